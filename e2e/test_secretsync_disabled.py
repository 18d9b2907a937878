"""SecretSync where the chart's ``secrets.enabled`` is off (its default): the operator, run
without ``--secrets``, never reads or writes a Secret, and each SecretSync says why."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from e2e.cluster import Cluster, condition, flush_audit_log
from e2e.operators import OperatorHandle
from e2e.resources import pool_fixture
from e2e.secretsync_support import SecretPool, SecretSyncs, secret_requests, secret_sync_manifest

pytestmark = pytest.mark.local_operators(
    "runs the operator without --secrets and reads its requests in the audit log"
)


class DisabledPool(SecretPool):
    """The namespaces of this module; its operator runs without ``--secrets``."""

    PREFIX = "secoff"
    FLAGS = ()


pool = pool_fixture(DisabledPool)


@pytest.fixture
def syncs(api: client.ApiClient, operator: OperatorHandle) -> Iterator[SecretSyncs]:
    with SecretSyncs(api) as access:
        yield access


def test_without_secrets_enabled_nothing_is_copied_no_secret_is_touched_and_the_status_says_why(
    cluster: Cluster, api: client.ApiClient, pool: DisabledPool, syncs: SecretSyncs
) -> None:
    src, a = pool.name("src"), pool.name("a")
    syncs.put_secret(src, "registry", {".dockerconfigjson": "{}"}, "kubernetes.io/dockerconfigjson")
    syncs.create(src, secret_sync_manifest("registry", "registry", destinationNamespaces=[a]))
    refused = syncs.wait(
        src, "registry", lambda o: condition(o, "Ready").get("status") == "False", "not Ready"
    )
    for type_ in ("Ready", "Degraded"):
        assert condition(refused, type_)["reason"] == "SecretsNotEnabled"
    assert "secrets.enabled" in condition(refused, "Ready")["message"]
    assert condition(refused, "Degraded")["status"] == "True"
    assert refused["status"]["observedGeneration"] == refused["metadata"]["generation"]
    assert syncs.secret(a, "registry") is None
    table = cluster.kubectl("get", "secsync", "registry", "-n", src).splitlines()
    assert table[1].split()[1:5] == [f"{src}/registry", "0", "0", "False"]
    if cluster.audit_log is not None and cluster.operator_kubeconfigs:
        flush_audit_log(cluster, api)
        assert secret_requests(cluster, pool) == []
