"""The charts' Deployments themselves, with the real images (E2E_OPERATORS=in-cluster): Running
and Ready through their own probes in a namespace that enforces Pod Security "restricted", no
write refused by the read-only root filesystem, metrics read through the chart's Service, and
with two replicas exactly one leader, the standby taking over when the leader's pod goes.

hack/e2e-in-cluster.sh install (hack/e2e-install.sh) put them in :data:`RELEASE_NAMESPACE`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from kubernetes import client

from e2e.charts import CHARTS, RELEASE_NAMESPACE, helm
from e2e.cluster import ROOT, Cluster, wait_until
from e2e.operators import operators_mode

pytestmark = [
    pytest.mark.in_cluster,
    pytest.mark.skipif(
        operators_mode() != "in-cluster",
        reason="checks the charts' Deployments, which run only with E2E_OPERATORS=in-cluster",
    ),
]

CHART_NAMES = [spec.name for spec in CHARTS.values()]
METRICS_PORT = 8080
"""The charts' default metrics.port."""
IMAGE_USER = 65532
"""The images' USER, which runs when the chart sets no uid."""
READ_ONLY_ERRORS = ("Read-only file system", "EROFS", "Errno 30")


def _pods(core: client.CoreV1Api, chart: str) -> list[client.V1Pod]:
    pods = core.list_namespaced_pod(
        RELEASE_NAMESPACE, label_selector=f"app.kubernetes.io/name={chart}"
    ).items
    return [p for p in pods if p.metadata.deletion_timestamp is None]


def _ready(pod: client.V1Pod) -> bool:
    conditions = pod.status.conditions or []
    return pod.status.phase == "Running" and any(
        c.type == "Ready" and c.status == "True" for c in conditions
    )


def test_namespace_enforces_restricted(api: client.ApiClient) -> None:
    """The operators run where Pod Security admission enforces the restricted profile."""
    labels = client.CoreV1Api(api).read_namespace(RELEASE_NAMESPACE).metadata.labels or {}
    assert labels.get("pod-security.kubernetes.io/enforce") == "restricted"


@pytest.mark.parametrize("chart", CHART_NAMES)
def test_pods_ready_through_their_probes(
    cluster: Cluster, api: client.ApiClient, chart: str
) -> None:
    """Each operator's pod runs its image, passed its startup and readiness probes, and has
    not restarted; its root filesystem is read-only, and it runs as OpenShift's restricted-v2
    runs it: under a uid from the namespace's range, not the image's, with group 0
    (hack/e2e-install.sh sets them, as OpenShift would; the charts set no uid)."""
    values = json.loads(
        helm(cluster, "get", "values", chart, "-n", RELEASE_NAMESPACE, "-o", "json")
    )
    uid = values["podSecurityContext"]["runAsUser"]
    assert uid != IMAGE_USER
    assert values["podSecurityContext"]["runAsGroup"] == 0
    core = client.CoreV1Api(api)
    (pod,) = wait_until(
        lambda: _pods(core, chart),
        lambda pods: len(pods) == 1 and _ready(pods[0]),
        timeout=120,
        what=f"{chart}: one Ready pod",
    )
    (container,) = pod.spec.containers
    assert container.readiness_probe.http_get.path == "/readyz"
    assert container.startup_probe.http_get.path == "/healthz"
    assert container.security_context.read_only_root_filesystem is True
    (status,) = pod.status.container_statuses
    assert status.ready, status
    assert status.started, status
    assert status.restart_count == 0, status
    assert status.state.running is not None
    assert (pod.spec.security_context.run_as_user, pod.spec.security_context.run_as_group) == (
        uid,
        0,
    )


@pytest.mark.parametrize("chart", CHART_NAMES)
def test_no_write_refused_by_the_read_only_root(api: client.ApiClient, chart: str) -> None:
    """Nothing the operator did since it started hit the read-only root filesystem."""
    core = client.CoreV1Api(api)
    for pod in _pods(core, chart):
        log = core.read_namespaced_pod_log(pod.metadata.name, RELEASE_NAMESPACE)
        assert log.strip(), f"{pod.metadata.name} logged nothing"
        hits = [line for line in log.splitlines() if any(e in line for e in READ_ONLY_ERRORS)]
        assert not hits, f"{pod.metadata.name}:\n" + "\n".join(hits)


@pytest.mark.parametrize("chart", CHART_NAMES)
def test_metrics_through_the_service(api: client.ApiClient, chart: str) -> None:
    """The chart's metrics Service answers with the operator's metrics, through the API
    server's service proxy (so through the Service, its endpoints and the pod network)."""
    core = client.CoreV1Api(api)
    (service,) = [
        s
        for s in core.list_namespaced_service(
            RELEASE_NAMESPACE, label_selector=f"app.kubernetes.io/name={chart}"
        ).items
        if s.metadata.name.endswith("-metrics")
    ]
    wait_until(
        lambda: core.connect_get_namespaced_service_proxy_with_path(
            f"{service.metadata.name}:metrics", RELEASE_NAMESPACE, "metrics"
        ),
        lambda text: "leader_election_master_status" in text,
        timeout=60,
        what=f"{chart} metrics through {service.metadata.name}",
    )


@pytest.mark.parametrize("chart", CHART_NAMES)
def test_helm_test_passes(cluster: Cluster, api: client.ApiClient, chart: str) -> None:
    """`helm test`: the chart's test Pod (the operator's image, its own least-privilege
    ServiceAccount) finds every operator pod answering /readyz and the CRD Established, and,
    having passed, leaves nothing behind for `helm uninstall` to forget (hooks are untracked)."""
    out = helm(cluster, "test", chart, "--namespace", RELEASE_NAMESPACE, "--timeout", "3m")
    assert f"TEST SUITE:     {chart}-test" in out, out  # the release has the test hook
    assert "Phase:          Succeeded" in out, out
    left = client.CoreV1Api(api).list_namespaced_pod(
        RELEASE_NAMESPACE, field_selector=f"metadata.name={chart}-test"
    )
    assert not left.items, "the passed test's Pod is deleted"


def _leading(core: client.CoreV1Api, pod: str) -> float:
    """A pod's leader_election_master_status, read from its own metrics port."""
    text = core.connect_get_namespaced_pod_proxy_with_path(
        f"{pod}:{METRICS_PORT}", RELEASE_NAMESPACE, "metrics"
    )
    (value,) = [
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("leader_election_master_status{")
    ]
    return value


@pytest.fixture
def two_podset_operators(cluster: Cluster, api: client.ApiClient) -> Iterator[str]:
    """podset-operator's release scaled to two replicas, back to one afterwards."""
    chart = "podset-operator"
    path = str(ROOT / "charts" / chart)
    helm(cluster, "upgrade", chart, path, "--namespace", RELEASE_NAMESPACE, "--reuse-values",
         "--set", "replicaCount=2", "--wait", "--timeout", "3m")  # fmt: skip
    yield chart
    helm(cluster, "upgrade", chart, path, "--namespace", RELEASE_NAMESPACE, "--reuse-values",
         "--set", "replicaCount=1", "--wait", "--timeout", "3m")  # fmt: skip


def test_one_leader_and_hand_over(api: client.ApiClient, two_podset_operators: str) -> None:
    """Two replicas: exactly one holds the Lease; deleting its pod hands the Lease to another
    live pod, the standby or the leader's replacement (the time is printed)."""
    core = client.CoreV1Api(api)
    coordination = client.CoordinationV1Api(api)
    chart = two_podset_operators
    pods = wait_until(
        lambda: _pods(core, chart),
        lambda ps: len(ps) == 2 and all(_ready(p) for p in ps),
        timeout=120,
        what=f"{chart}: two Ready pods",
    )
    names = {p.metadata.name for p in pods}
    lease = wait_until(
        lambda: coordination.read_namespaced_lease(chart, RELEASE_NAMESPACE),
        lambda lease: lease.spec.holder_identity in names,
        timeout=60,
        what=f"a pod of {sorted(names)} holding the Lease",
    )
    leader = lease.spec.holder_identity
    (standby,) = names - {leader}
    # Each pod's own view (its metrics, through the API server's pod proxy): one leads.
    statuses = wait_until(
        lambda: {name: _leading(core, name) for name in names},
        lambda seen: seen == {leader: 1.0, standby: 0.0},
        timeout=30,
        what=f"{leader} leading and {standby} standing by, by their own metrics",
    )
    assert statuses[leader] == 1.0
    deleted = time.monotonic()
    core.delete_namespaced_pod(leader, RELEASE_NAMESPACE)
    # The stopping leader releases the Lease, so the standby or the leader's replacement,
    # starting meanwhile, may take it first: either is a handover to a live pod.
    lease = wait_until(
        lambda: coordination.read_namespaced_lease(chart, RELEASE_NAMESPACE),
        lambda lease: (
            lease.spec.holder_identity not in (None, "", leader)
            and lease.spec.holder_identity in {p.metadata.name for p in _pods(core, chart)}
        ),
        timeout=60,
        what=f"a pod other than {leader} holding the Lease",
    )
    holder = lease.spec.holder_identity
    print(f"leader pod {leader} deleted; {holder} led after {time.monotonic() - deleted:.2f} s")
