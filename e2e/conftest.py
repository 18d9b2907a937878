"""Fixtures shared by every e2e test: the cluster, an API client, a namespace per test; and those
of the modules that run a PodSet operator for one test's namespace."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from kubernetes import client

from e2e import poddebugger_support
from e2e.charts import install_identities
from e2e.cluster import Cluster, docker_available, start_local_plane, wait_until
from e2e.operators import OperatorHandle, operators_mode, stopped_after
from e2e.ordering import after_suite_last
from e2e.poddebugger_support import Debuggers
from e2e.podset_support import PodSets, install_crd, podset_operator
from e2e.resources import NamespacePool
from e2e.third_party import PROMETHEUS_RULE_CRD, SERVICE_MONITOR_CRD, module_file

pytestmark = pytest.mark.e2e


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything under e2e/ is an e2e test, those that judge the whole run last
    (:mod:`e2e.ordering`); in in-cluster mode (E2E_OPERATORS), tests marked ``local_operators``
    are skipped with the marker's reason."""
    after_suite_last(items)
    in_cluster = operators_mode() == "in-cluster"
    for item in items:
        item.add_marker(pytest.mark.e2e)
        if not in_cluster:
            continue
        marker = item.get_closest_marker("local_operators")
        if marker is None:
            continue
        reason = marker.kwargs.get("reason") or (marker.args[0] if marker.args else None)
        assert reason, f"{item.nodeid}: local_operators needs a reason"
        item.add_marker(pytest.mark.skip(reason=f"needs local operators: {reason}"))


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest) -> Cluster:
    """The cluster under test (E2E_KUBECONFIG, kind when Docker runs, else the local plane).

    With E2E_KUBECONFIG, E2E_AUDIT_LOG names the cluster's audit log where this machine can
    read it (the local plane's ``.local/audit.log`` of another checkout, say): the tests that
    prove things from the audit log then run instead of skipping."""
    if explicit := os.environ.get("E2E_KUBECONFIG"):
        audit_log = os.environ.get("E2E_AUDIT_LOG")
        return Cluster("external", Path(explicit), Path(audit_log) if audit_log else None)
    if docker_available():
        kind_cluster = request.getfixturevalue("kind_cluster")
        return Cluster("kind", Path(kind_cluster.kubeconfig_path), None)
    if operators_mode() == "in-cluster":
        raise pytest.UsageError(
            "E2E_OPERATORS=in-cluster needs the charts installed in a cluster whose nodes run"
            " containers: run `make e2e-in-cluster` (the local plane's real node) or set"
            " E2E_KUBECONFIG"
        )
    return start_local_plane()


@pytest.fixture(scope="session")
def api(cluster: Cluster) -> Iterator[client.ApiClient]:
    """An admin API client for the cluster under test."""
    with cluster.api_client() as api_client:
        yield api_client


@pytest.fixture(scope="session", autouse=True)
def operator_identities(cluster: Cluster, api: client.ApiClient) -> datetime:
    """Operators run as their charts' ServiceAccounts (e2e.charts); when the session began.

    In in-cluster mode the charts are installed already (with the images under test) and their
    pods use those ServiceAccounts themselves."""
    started = datetime.now(UTC)
    if operators_mode() == "local":
        install_identities(cluster, api)
    return started


@pytest.fixture
def namespace(request: pytest.FixtureRequest, api: client.ApiClient) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards; ready once its ServiceAccount is."""
    core = client.CoreV1Api(api)
    base = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:40].strip("-")
    name = f"{base}-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    wait_until(
        lambda: core.read_namespaced_service_account("default", name),
        lambda sa: sa is not None,
        timeout=60,
        what=f"the default ServiceAccount in {name}",
    )
    yield name
    core.delete_namespace(name, propagation_policy="Background")


@pytest.fixture(scope="module")
def operator(
    pool: NamespacePool, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorHandle]:
    """The operator serving the module's ``pool`` fixture's namespaces, for the whole module."""
    yield from stopped_after(pool.operator(tmp_path_factory.mktemp(pool.COMMAND)))


@pytest.fixture(scope="module")
def podset_crd(cluster: Cluster) -> None:
    """The generated PodSet CRD, applied."""
    install_crd(cluster)


@pytest.fixture
def podset_op(
    cluster: Cluster, podset_crd: None, namespace: str, tmp_path: Path
) -> Iterator[OperatorHandle]:
    """A podset-operator serving the test's namespace (e2e.podset_support.podset_operator)."""
    yield from stopped_after(podset_operator(cluster, namespace, tmp_path))


@pytest.fixture
def podsets(api: client.ApiClient, namespace: str) -> PodSets:
    """PodSet access in the test's namespace."""
    return PodSets(api, namespace)


@pytest.fixture(scope="module")
def poddebugger_crd(cluster: Cluster) -> None:
    """The generated PodDebugger CRD, applied."""
    poddebugger_support.install_crd(cluster)


@pytest.fixture
def pdbg_op(
    cluster: Cluster, poddebugger_crd: None, namespace: str, tmp_path: Path
) -> Iterator[OperatorHandle]:
    """A pod-debugger-operator serving the test's namespace
    (e2e.poddebugger_support.namespace_operator)."""
    yield from stopped_after(poddebugger_support.namespace_operator(cluster, namespace, tmp_path))


@pytest.fixture
def debuggers(api: client.ApiClient, pdbg_op: OperatorHandle) -> Iterator[Debuggers]:
    """PodDebugger access; deletes the debuggers created through it afterwards."""
    with Debuggers(api) as access:
        yield access


@pytest.fixture(scope="session")
def service_monitor_crd(cluster: Cluster) -> None:
    """prometheus-operator's ServiceMonitor and PrometheusRule CRDs, so that a chart's
    ServiceMonitor and PrometheusRule install."""
    for crd, name in (
        (SERVICE_MONITOR_CRD, "servicemonitors"),
        (PROMETHEUS_RULE_CRD, "prometheusrules"),
    ):
        path = module_file(*crd)
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
        cluster.kubectl(
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            f"crd/{name}.monitoring.coreos.com",
        )
