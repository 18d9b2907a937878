"""The charts' users' roles on a real API server (#17, item 6): rendered from each chart and
applied, the <release>-view and <release>-edit ClusterRoles are aggregated by the controller
manager into the built-in roles. A ServiceAccount bound (in its namespace) to the built-in
``view`` role may list the custom resources but not create one; one bound to ``edit`` may create
PodSets and ConfigMapSyncs, and PodDebuggers only when ``userRoles.aggregateToEdit`` is set."""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from e2e.charts import CHARTS, KUBE_VERSION, PODDEBUGGER_CHART, chart_dir, helm, token_kubeconfig
from e2e.cluster import Cluster, wait_until
from opsuite_packaging.chart import ChartSpec
from opsuite_packaging.operators import OPERATORS

SPECS = list(CHARTS.values())
SAMPLES = {
    m.CHART_SPEC.name: next(s for s in m.SAMPLES if s["kind"] == m.CRD.kind)
    for m in (importlib.import_module(op.manifests) for op in OPERATORS)
}
"""The sample custom resource of each chart."""
RBAC_REFUSAL = "cannot create resource"
"""What the API server says when RBAC, not admission, refuses a create."""


def _apply_user_roles(cluster: Cluster, spec: ChartSpec, release: str, **values: Any) -> None:
    rendered = helm(
        cluster,
        "template",
        release,
        str(chart_dir(spec)),
        "--kube-version",
        KUBE_VERSION,
        "--show-only",
        "templates/user-roles.yaml",
        values=values,
    )
    cluster.kubectl("apply", "-f", "-", stdin=rendered)


def _bound_client(
    cluster: Cluster, api: client.ApiClient, namespace: str, role: str
) -> client.ApiClient:
    """An API client for ServiceAccount ``role`` of ``namespace``, bound there to the built-in
    ClusterRole of that name."""
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    core.create_namespaced_service_account(
        namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=role))
    )
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": role},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [{"kind": "ServiceAccount", "name": role, "namespace": namespace}],
        },
    )
    path = token_kubeconfig(cluster, api, namespace, role)
    bound: client.ApiClient = config.new_client_from_config(config_file=str(path))
    return bound


def _create(api: client.ApiClient, namespace: str, spec: ChartSpec) -> str:
    """Create the chart's sample custom resource (server-side dry run): "created", or the
    refusal's message."""
    plural, group = spec.crd_name.split(".", 1)
    body = SAMPLES[spec.name]
    version = body["apiVersion"].rsplit("/", 1)[1]
    try:
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            group, version, namespace, plural, body, dry_run="All"
        )
    except ApiException as exc:
        if exc.status != 403:
            raise
        return str(exc.body)
    return "created"


def _list(api: client.ApiClient, namespace: str, spec: ChartSpec) -> int:
    plural, group = spec.crd_name.split(".", 1)
    version = SAMPLES[spec.name]["apiVersion"].rsplit("/", 1)[1]
    try:
        client.CustomObjectsApi(api).list_namespaced_custom_object(
            group, version, namespace, plural
        )
    except ApiException as exc:
        return int(exc.status)
    return 200


@pytest.fixture
def release(cluster: Cluster) -> Iterator[str]:
    """A unique release name; its cluster-scoped roles are deleted afterwards."""
    name = f"roles-{uuid.uuid4().hex[:6]}"
    yield name
    roles = [f"{name}-{spec.name}-{role}" for spec in SPECS for role in ("view", "edit")]
    cluster.kubectl("delete", "clusterrole", "--ignore-not-found", *roles)


def test_view_and_edit_users_get_the_charts_roles(
    cluster: Cluster, api: client.ApiClient, namespace: str, release: str
) -> None:
    for spec in SPECS:
        cluster.kubectl(
            "apply", "--server-side", "--force-conflicts", "-f", str(chart_dir(spec) / "crds")
        )
        _apply_user_roles(cluster, spec, release)
    with (
        _bound_client(cluster, api, namespace, "view") as viewer,
        _bound_client(cluster, api, namespace, "edit") as editor,
    ):
        for spec in SPECS:
            # The controller manager aggregates the new roles within moments.
            wait_until(
                lambda spec=spec: _list(viewer, namespace, spec),
                lambda status: status == 200,
                timeout=30,
                what=f"view may list {spec.crd_name}",
            )
            refusal = _create(viewer, namespace, spec)
            assert RBAC_REFUSAL in refusal, refusal
            assert _list(editor, namespace, spec) == 200
        for spec in SPECS:
            if spec is PODDEBUGGER_CHART:
                refusal = _create(editor, namespace, spec)
                assert RBAC_REFUSAL in refusal, refusal
            else:
                wait_until(
                    lambda spec=spec: _create(editor, namespace, spec),
                    lambda answer: answer == "created",
                    timeout=30,
                    what=f"edit may create {spec.crd_name}",
                )

        # Opted in, PodDebugger's edit role joins the built-in edit role: RBAC lets the editor
        # create (admission policies, where installed, still decide).
        _apply_user_roles(cluster, PODDEBUGGER_CHART, release, userRoles={"aggregateToEdit": True})
        answer = wait_until(
            lambda: _create(editor, namespace, PODDEBUGGER_CHART),
            lambda text: RBAC_REFUSAL not in text,
            timeout=30,
            what="edit may create PodDebuggers once aggregated",
        )
        assert answer == "created" or "admission" in answer.lower(), answer
