"""What `make manifests` generates for PodSet: the CRD, the samples and the Helm chart."""

from __future__ import annotations

from opsuite_common.kube_model import TemplateMetadata
from opsuite_packaging.bundle import BundleText
from opsuite_packaging.chart import ChartSpec, PolicyRule
from opsuite_packaging.chart_values import ChartValues, published_image
from opsuite_packaging.crd import CrdDescriptor, PrinterColumn, ScaleSubresource, condition_column
from podset_operator import models

CHART = "podset-operator"

CRD = CrdDescriptor.of(
    models,
    printer_columns=(
        PrinterColumn("Desired", "integer", ".spec.replicas", "Desired pods"),
        PrinterColumn("Current", "integer", ".status.replicas", "Active pods"),
        PrinterColumn("Ready", "integer", ".status.readyReplicas", "Ready pods"),
        PrinterColumn(
            "Up-To-Date", "integer", ".status.updatedReplicas", "Pods of the current template"
        ),
        PrinterColumn(
            "Available", "integer", ".status.availableReplicas", "Available pods", priority=1
        ),
        condition_column(
            "Progress",
            "Progressing",
            "reason",
            "Why the PodSet is or is not progressing (RollingUpdate, ProgressDeadlineExceeded, "
            "Complete, ...)",
            priority=1,
        ),
    ),
    scale=ScaleSubresource(".spec.replicas", ".status.replicas", ".status.selector"),
)


SAMPLES = [
    CRD.sample(
        "busybox-sleepers",
        models.PodSetSpec(
            replicas=3,
            template=models.PodSetTemplate(
                metadata=TemplateMetadata(labels={"app": "busybox-sleepers"}),
                spec={
                    "containers": [
                        {"name": "sleep", "image": "busybox:1.37", "command": ["sleep", "3600"]}
                    ]
                },
            ),
            update_strategy=models.UpdateStrategy(
                type="RollingUpdate",
                rolling_update=models.RollingUpdate(max_surge=1, max_unavailable=0),
            ),
        ),
    ),
]


CHART_SPEC = ChartSpec(
    name=CHART,
    command="podset-operator",
    description="PodSet keeps N pods from a template running, like a ReplicaSet: scale "
    "subresource (kubectl scale, HPA), ReplicaSet's deletion order, adoption and release, and "
    "rolling updates with maxSurge/maxUnavailable.",
    crd_name=CRD.name,
    values=ChartValues(image=published_image(CHART)),
    namespaced_rules=(
        PolicyRule(("",), ("pods",), ("list", "watch", "create", "patch", "delete")),
        PolicyRule((models.GROUP,), (models.PLURAL,), ("get", "list", "watch")),
        PolicyRule((models.GROUP,), (f"{models.PLURAL}/status",), ("patch",)),
        # A pod names its PodSet with blockOwnerDeletion (as a ReplicaSet's pods do): where
        # the OwnerReferencesPermissionEnforcement plugin is on (OpenShift; the local plane),
        # creating it needs update on the owner's finalizers.
        PolicyRule(
            (models.GROUP,),
            (f"{models.PLURAL}/finalizers",),
            ("update",),
            checked_on=("", "pods", "create"),
        ),
        PolicyRule(("",), ("events",), ("create", "patch")),
    ),
    keywords=("replicaset", "scaling", "hpa"),
)
"""The Helm chart: RBAC as the operator's code calls the API (see docs/podset.md)."""


BUNDLE_TEXT = BundleText(
    display_name="PodSet Operator",
    overview="""\
A PodSet keeps a number of pods from a template running, like a ReplicaSet: the scale
subresource (`kubectl scale`, HorizontalPodAutoscaler), ReplicaSet's deletion order, adoption
and release of matching pods, and rolling updates with `maxSurge`/`maxUnavailable`.""",
    categories=("Application Runtime",),
    resources={"PodSet": (("Pod", "v1"),)},
)
"""What the OperatorHub listing (the OLM bundle's CSV) says beyond the chart."""
