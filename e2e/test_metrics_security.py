"""Secure metrics on a real API server (#17, item 5): each operator, run as the ServiceAccount of
a release of its chart installed for the test, with secure metrics on as the chart runs it
(so the chart's review rules are what it needs), serves /metrics over HTTPS only to
a token whose user the API server authenticates (TokenReview) and allows ``get /metrics``
(SubjectAccessReview): 401 without a token or with a bad one, 403 for a ServiceAccount without
the chart's metrics-reader ClusterRole, 200 with the metric families for one bound to it, and
for the token the chart's ServiceMonitor scrapes with (its scraper's). The probes stay plain
HTTP."""

from __future__ import annotations

import base64
import ssl
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from e2e.charts import CHARTS, POLICIES_OFF, chart_dir, helm, token_kubeconfig
from e2e.cluster import Cluster, wait_until
from e2e.operators import OperatorProcess, operator_env

pytestmark = pytest.mark.local_operators("starts operator processes with flags of their own")

COMMANDS = sorted(CHARTS)
FAMILIES = {
    "controller_runtime_reconcile",
    "controller_runtime_active_workers",
    "workqueue_depth",
    "process_resident_memory_bytes",
}
"""Metric families every operator serves (controller-runtime's names)."""


def _get(url: str, token: str | None) -> tuple[int, str]:
    """(status, body) of a GET over TLS, not verifying the self-signed certificate."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _token(core: client.CoreV1Api, namespace: str, account: str) -> str:
    core.create_namespaced_service_account(
        namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=account))
    )
    request = {"spec": {"expirationSeconds": 3600}}
    return str(
        core.create_namespaced_service_account_token(account, namespace, request).status.token
    )


def _scraper_token(core: client.CoreV1Api, namespace: str, secret: str) -> str:
    """The token kube-controller-manager writes into the chart's scraper token Secret."""
    found = wait_until(
        lambda: core.read_namespaced_secret(secret, namespace),
        lambda s: bool((s.data or {}).get("token")),
        timeout=30,
        what=f"the token in Secret {secret}",
    )
    return base64.b64decode(found.data["token"]).decode()


@pytest.fixture
def release(cluster: Cluster, namespace: str) -> Iterator[str]:
    """A unique release name in the test's namespace, uninstalled afterwards."""
    name = f"m-{uuid.uuid4().hex[:6]}"
    yield name
    helm(cluster, "uninstall", name, "-n", namespace, "--wait", "--ignore-not-found")


def _bind_reader(rbac: client.RbacAuthorizationV1Api, role: str, namespace: str) -> str:
    """Bind ServiceAccount ``reader`` of ``namespace`` to ClusterRole ``role``; the binding."""
    name = f"metrics-reader-{uuid.uuid4().hex[:8]}"
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}],
        }
    )
    return name


@pytest.mark.parametrize("command", COMMANDS)
def test_metrics_need_a_token_allowed_to_get_metrics(
    cluster: Cluster,
    api: client.ApiClient,
    service_monitor_crd: None,
    namespace: str,
    release: str,
    tmp_path: Path,
    command: str,
) -> None:
    spec = CHARTS[command]
    cluster.kubectl(
        "apply", "--server-side", "--force-conflicts", "-f", str(chart_dir(spec) / "crds")
    )
    # The chart's default values but for its cluster-wide admission policies and users' roles,
    # with its ServiceMonitor, whose scraper identity scrapes below as Prometheus would.
    values = {
        **POLICIES_OFF.get(spec.name, {}),
        "userRoles": {"create": False},
        "metrics": {"serviceMonitor": {"enabled": True}},
    }
    helm(cluster, "install", release, str(chart_dir(spec)), "-n", namespace, "--skip-crds",
         values=values)  # fmt: skip
    fullname = f"{release}-{spec.name}"
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    scraper = _scraper_token(core, namespace, f"{fullname}-metrics-scraper-token")
    stranger = _token(core, namespace, "stranger")
    reader = _token(core, namespace, "reader")
    binding = _bind_reader(rbac, f"{fullname}-metrics-reader", namespace)
    env = operator_env(cluster, command)
    env["KUBECONFIG"] = str(token_kubeconfig(cluster, api, namespace, fullname))
    env["OPSUITE_METRICS_SECURE"] = "true"  # as the chart and the bundle set it
    process = OperatorProcess(
        command,
        [f"--namespace={namespace}"],
        tmp_path / f"{command}.log",
        env,
    ).start()
    try:
        process.wait_ready()  # the probes answer plain HTTP
        url = f"https://127.0.0.1:{process.metrics_port}/metrics"
        assert _get(url, None) == (401, "Unauthorized\n")
        assert _get(url, "not-a-token") == (401, "Unauthorized\n")
        user = f"system:serviceaccount:{namespace}:stranger"
        assert _get(url, stranger) == (403, f"Authorization denied for user {user}\n")
        _, text = wait_until(
            lambda: _get(url, reader),
            lambda answer: answer[0] == 200,
            timeout=30,
            what="the metrics-reader's scrape answered 200 (RBAC caches fill)",
        )
        families = {family.name for family in text_string_to_metric_families(text)}
        assert families >= FAMILIES, sorted(families)
        # The ServiceMonitor's credentials: the chart's scraper, bound to the metrics-reader.
        assert _get(url, scraper)[0] == 200
        with pytest.raises(ConnectionError):  # no plain HTTP on the metrics port
            urllib.request.urlopen(f"http://127.0.0.1:{process.metrics_port}/metrics", timeout=5)
        # A refusal is cached for 30 s at most, a grant kept: still the same answers.
        assert _get(url, stranger)[0] == 403
        assert _get(url, reader)[0] == 200
    finally:
        code = process.stop()
        rbac.delete_cluster_role_binding(binding)
    assert code == 0, process.log_tail()
