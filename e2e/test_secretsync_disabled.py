"""SecretSync where the chart's ``secrets.enabled`` is off (its default): the operator, run
without ``--secrets``, never reads or writes a Secret, and each SecretSync says why."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from e2e.cluster import Cluster, condition, flush_audit_log, wait_until
from e2e.configmapsync_support import (
    ACCEPT,
    ALLOWED,
    GROUP,
    PLURAL,
    SECRET_RESOURCE,
    VERSION,
    sync_manifest,
)
from e2e.operators import OperatorHandle, start_operator
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


def test_without_the_secretsync_crd_configmapsyncs_go_on(
    cluster: Cluster, api: client.ApiClient, tmp_path: Path
) -> None:
    """An upgrade whose CRDs were not applied (Helm never upgrades crds/): the operator, even
    with --secrets, gets Ready and copies ConfigMaps; SecretSyncs wait for the CRD. First in
    the module: the module's operator, which watches SecretSyncs, is not running yet."""
    core = client.CoreV1Api(api)
    run = uuid.uuid4().hex[:6]
    src, dst = f"crdless-{run}-src", f"crdless-{run}-dst"
    core.create_namespace({"metadata": {"name": src}})
    core.create_namespace({"metadata": {"name": dst, "annotations": {ACCEPT: src}}})
    cluster.kubectl("delete", "crd", f"secretsyncs.{GROUP}", "--wait=true")
    process = None
    try:
        process = start_operator(
            cluster, "configmapsync-operator", (src, dst), tmp_path, "--secrets"
        )
        process.wait_ready()
        assert "SecretSyncs are not served" in process.log_tail()
        annotations = {ALLOWED: dst}
        core.create_namespaced_config_map(
            src, {"metadata": {"name": "settings", "annotations": annotations}, "data": {"k": "v"}}
        )
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            GROUP,
            VERSION,
            src,
            PLURAL,
            sync_manifest("settings", "settings", destinationNamespaces=[dst]),
        )
        wait_until(
            lambda: [
                c.data
                for c in core.list_namespaced_config_map(dst).items
                if c.metadata.name == "settings"
            ],
            lambda found: found == [{"k": "v"}],
            timeout=60,
            what="the copy made without the SecretSync CRD",
        )
    finally:
        if process is not None:
            process.stop()
        SECRET_RESOURCE.install_crd(cluster)
        for ns in (src, dst):
            core.delete_namespace(ns, propagation_policy="Background")


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
