"""The plain-manifest install (deploy/<chart>/install.yaml), as someone who uses neither Helm
nor OLM installs it: ``kubectl apply --server-side -k`` of a kustomization that names the files
and redirects the images to where their cluster has them (here: the images hack/images.py built,
already on the real node), on a cluster where no Helm release exists.

hack/e2e-in-cluster.sh plain runs this module once, after the Helm releases are uninstalled and
the operators' CRDs removed, so the files create everything themselves (CRDs, RBAC, admission
policies, the requester mutation on 1.36 and later). The operators then run on the real node and
each serves its kind; deleting the same kustomization takes everything away again.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.charts import CHARTS, RELEASE_NAMESPACE, serves_mutating_policies
from e2e.cluster import ROOT, Cluster, condition, wait_until
from e2e.configmapsync_support import ACCEPT, ALLOWED, sync_manifest
from e2e.configmapsync_support import RESOURCE as SYNC
from e2e.operators import operators_mode
from e2e.placement import BUSYBOX, real_node_placement, real_pod_spec
from e2e.poddebugger_support import RESOURCE as DEBUGGER
from e2e.poddebugger_support import debugger_manifest, ephemeral
from e2e.podset_support import RESOURCE as PODSET
from e2e.podset_support import podset
from e2e.resources import CustomResource
from opsuite_packaging.chart_values import IMAGE_REGISTRY
from opsuite_packaging.plain_install import CUSTOM_RESOURCES, INSTALL, MUTATION
from poddebugger_operator.gate import LOAD_GRACE

pytestmark = [
    pytest.mark.plain_install,
    pytest.mark.skipif(
        operators_mode() != "in-cluster" or not os.environ.get("E2E_IMAGE_TAG"),
        reason="installs the operators from deploy/ (hack/e2e-in-cluster.sh plain)",
    ),
]

PARAM_KIND_PENDING = "failed to find resource referenced by paramKind"
"""The API server's refusal while its admission policies have not yet resolved a parameter
kind whose CRD was just created (it retries, rate limited; Kubernetes' own tests wait it out)."""
REQUESTED_BY = "requested-by"
"""The suffix of the annotation the requester mutation writes (under each kind's API group)."""


def _kustomization(work: Path, chart: str, api: client.ApiClient, mutation: bool) -> None:
    """A user's kustomization over one operator's shipped files: their image, on the real
    node. One per operator: the three files each create the suggested namespace, which one
    kustomization may hold only once."""
    prefix, tag = os.environ["E2E_IMAGE_PREFIX"], os.environ["E2E_IMAGE_TAG"]
    work.mkdir()
    names = [INSTALL, MUTATION] if mutation else [INSTALL]
    for name in names:
        shutil.copy(ROOT / "deploy" / chart / name, work / name)
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": chart},
        "spec": {"template": {"spec": real_node_placement(api)}},
    }
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": names,
        "images": [
            {"name": f"{IMAGE_REGISTRY}/{chart}", "newName": f"{prefix}/{chart}", "newTag": tag}
        ],
        "patches": [
            {"target": {"kind": "Deployment", "name": chart}, "patch": yaml.safe_dump(deployment)}
        ],
    }
    (work / "kustomization.yaml").write_text(yaml.safe_dump(kustomization, sort_keys=False))


@pytest.fixture(scope="module")
def installed(
    cluster: Cluster, api: client.ApiClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[bool]:
    """The three operators installed from deploy/; yields whether the requester mutation was
    applied too (the API server serves MutatingAdmissionPolicy)."""
    work = tmp_path_factory.mktemp("plain-install")
    mutation = serves_mutating_policies(api)
    for chart in CHARTS:
        _kustomization(work / chart, chart, api, mutation)
    custom = [ROOT / "deploy" / c / CUSTOM_RESOURCES for c in CHARTS]
    custom = [path for path in custom if path.exists()]
    try:
        for chart in CHARTS:
            cluster.kubectl("apply", "--server-side", "-k", str(work / chart))
        # As the files' headers say: the custom resources once their CRDs are established.
        cluster.kubectl("wait", "--for=condition=Established", "crd", "--all")
        for path in custom:
            cluster.kubectl("apply", "--server-side", "-f", str(path))
        for chart in CHARTS:
            cluster.kubectl(
                "rollout", "status", f"deployment/{chart}", "-n", RELEASE_NAMESPACE, "--timeout=3m"
            )
        yield mutation
    finally:
        for path in custom:
            cluster.kubectl("delete", "-f", str(path), "--wait", "--ignore-not-found")
        for chart in CHARTS:
            cluster.kubectl("delete", "-k", str(work / chart), "--wait", "--ignore-not-found")


def test_the_operators_run_on_the_real_node_without_restarts(
    api: client.ApiClient, installed: bool
) -> None:
    pods = client.CoreV1Api(api).list_namespaced_pod(RELEASE_NAMESPACE).items
    by_chart = {
        chart: [p for p in pods if (p.metadata.labels or {}).get("app.kubernetes.io/name") == chart]
        for chart in CHARTS
    }
    for chart, chart_pods in by_chart.items():
        assert len(chart_pods) == 1, f"{chart}: {[p.metadata.name for p in chart_pods]}"
        (pod,) = chart_pods
        assert pod.metadata.labels["app.kubernetes.io/managed-by"] == "kubectl"
        assert "helm.sh/chart" not in pod.metadata.labels
        node = client.CoreV1Api(api).read_node(pod.spec.node_name)
        assert not node.metadata.annotations or "kwok.x-k8s.io/node" not in (
            node.metadata.annotations
        ), f"{chart} runs on the fake node {node.metadata.name}"
        statuses = pod.status.container_statuses or []
        assert statuses, pod.status
        assert all(s.ready and s.restart_count == 0 for s in statuses), statuses


def _ready(obj: dict[str, Any]) -> bool:
    generation = obj["metadata"]["generation"]
    ready = condition(obj, "Ready").get("status") == "True"
    return ready and (obj.get("status") or {}).get("observedGeneration") == generation


def _custom(
    api: client.ApiClient,
    resource: CustomResource,
    body: dict[str, Any],
    namespace: str,
    done: Callable[[dict[str, Any]], bool] = _ready,
) -> dict[str, Any]:
    """Create a custom resource of ``resource`` and wait until ``done`` (Ready at its
    generation)."""
    group, version, plural = resource.group, resource.version, resource.plural
    custom = client.CustomObjectsApi(api)

    def create() -> ApiException | None:
        try:
            custom.create_namespaced_custom_object(group, version, namespace, plural, body)
        except ApiException as error:
            if PARAM_KIND_PENDING not in str(error.body):
                raise
            return error
        return None

    wait_until(create, lambda error: error is None, timeout=60, what=f"{body['kind']} admitted")

    def read() -> dict[str, Any]:
        got: dict[str, Any] = custom.get_namespaced_custom_object(
            group, version, namespace, plural, body["metadata"]["name"]
        )
        return got

    return wait_until(read, done, timeout=120, what=f"{body['kind']} Ready")


def _after_the_policies_load_grace(api: client.ApiClient) -> None:
    """Wait until PodDebugger's policies are older than the operator's LOAD_GRACE: it acts
    only for PodDebuggers created after the API server surely enforced them (gate.py)."""
    admission = client.AdmissionregistrationV1Api(api)
    objects = [
        *admission.list_validating_admission_policy().items,
        *admission.list_validating_admission_policy_binding().items,
    ]
    created = [
        o.metadata.creation_timestamp
        for o in objects
        if (o.metadata.labels or {}).get("app.kubernetes.io/name") == "pod-debugger-operator"
    ]
    assert created, "no admission policy of pod-debugger-operator installed"
    time.sleep(max(0.0, (max(created) + LOAD_GRACE - datetime.now(UTC)).total_seconds()))


def test_each_operator_serves_its_kind(
    api: client.ApiClient, installed: bool, namespace: str, tmp_path: Path, cluster: Cluster
) -> None:
    core = client.CoreV1Api(api)
    pset = _custom(
        api,
        PODSET,
        podset("plain", 2),
        namespace,
        lambda o: _ready(o) and o["status"].get("readyReplicas") == 2,
    )
    annotations = pset["metadata"].get("annotations") or {}
    assert any(k.endswith("/" + REQUESTED_BY) for k in annotations) == installed, annotations

    destination = f"{namespace}-copy"
    core.create_namespace(
        client.V1Namespace(
            metadata=client.V1ObjectMeta(name=destination, annotations={ACCEPT: namespace})
        )
    )
    try:
        core.create_namespaced_config_map(
            namespace,
            client.V1ConfigMap(
                metadata=client.V1ObjectMeta(name="settings", annotations={ALLOWED: destination}),
                data={"level": "info"},
            ),
        )
        sync = sync_manifest("plain", "settings", destinationNamespaces=[destination])
        _custom(api, SYNC, sync, namespace)
        copy = core.read_namespaced_config_map("settings", destination)
        assert copy.data == {"level": "info"}
    finally:
        core.delete_namespace(destination)

    _after_the_policies_load_grace(api)
    labels = {"opsuite.dev/debug": "plain"}
    core.create_namespaced_pod(
        namespace,
        client.V1Pod(
            metadata=client.V1ObjectMeta(name="target", labels=labels),
            spec=real_pod_spec(api),
        ),
    )
    _custom(api, DEBUGGER, debugger_manifest("plain", labels, image=BUSYBOX), namespace)

    def running_debug() -> list[str]:
        pod = core.read_namespaced_pod("target", namespace)
        states = pod.status.ephemeral_container_statuses or []
        return [s.name for s in states if s.state and s.state.running] if ephemeral(pod) else []

    wait_until(
        running_debug, bool, timeout=120, what="the debug container running on the real node"
    )
