"""ConfigMapSync's exclusions and key filter on a real API server (#34, items 2 and 3).

The operator of this module serves the run's namespaces *and* kube-system, and kube-system is
made to accept copies from the run's source namespace (literally, as a protected namespace
must), so that only the rule under test keeps a match-all selector out of it; the annotation
is removed, and the copy the test lists there explicitly deleted, when the module ends.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from e2e.cluster import Cluster, condition, wait_until
from e2e.configmapsync_support import (
    ACCEPT,
    OWNER_LABEL,
    Pool,
    Syncs,
    describe,
    doc_examples,
    install_crd,
    owned_by,
    sync_manifest,
    writes_by,
)
from e2e.operators import OperatorHandle, operator_handle, start_operator
from e2e.resources import pool_fixture

KUBE_SYSTEM = "kube-system"


class FilterPool(Pool):
    """The run's namespaces; its operator also serves kube-system."""

    PREFIX = "cmx"
    SUFFIXES = ("src", "a", "sandbox", "legacy")
    CREATED_UP_FRONT = SUFFIXES

    def operator(self, log_dir: Path) -> OperatorHandle:
        return operator_handle(
            self.cluster,
            self.COMMAND,
            lambda: start_operator(
                self.cluster,
                self.COMMAND,
                [*self.all(), KUBE_SYSTEM],
                log_dir,
                POD_NAME=self.identity,
            ),
        )


pool = pool_fixture(FilterPool)


@pytest.fixture(scope="module")
def kube_system_accepts(api: client.ApiClient, pool: FilterPool) -> Iterator[str]:
    """kube-system accepting copies from the run's source namespace, for the module."""
    core = client.CoreV1Api(api)
    src = pool.name("src")
    assert ACCEPT not in (core.read_namespace(KUBE_SYSTEM).metadata.annotations or {})
    core.patch_namespace(KUBE_SYSTEM, {"metadata": {"annotations": {ACCEPT: src}}})
    try:
        yield src
    finally:
        core.patch_namespace(KUBE_SYSTEM, {"metadata": {"annotations": {ACCEPT: None}}})


@pytest.fixture
def syncs(api: client.ApiClient, cluster: Cluster, operator: OperatorHandle) -> Iterator[Syncs]:
    install_crd(cluster)  # this tree's CRD: another checkout's may lack the new fields
    with Syncs(api, cluster) as access:
        yield access


@pytest.mark.local_operators("serves kube-system beside the run's namespaces")
def test_exclusions_and_protected_namespaces_under_a_match_all_selector(
    cluster: Cluster, pool: FilterPool, syncs: Syncs, kube_system_accepts: str
) -> None:
    """docs/configmapsync.md, "Leaving namespaces out": a match-all selector never reaches
    kube-system; an excluded namespace gets no copy and its own ConfigMap is never touched,
    even under conflictPolicy Overwrite; a namespace that becomes excluded loses exactly the
    copy; kube-system gets one only when listed."""
    src, a, sandbox, legacy = (pool.name(s) for s in ("src", "a", "sandbox", "legacy"))
    example = doc_examples("Leaving namespaces out")[0]["spec"]
    excluded = [legacy if n == "legacy" else n for n in example["excludeNamespaces"]]
    assert excluded == [legacy, "*-sandbox"]
    name = f"shared-{pool.run}"
    started = time.time()
    theirs = syncs.put_configmap(legacy, name, {"owner": "team-legacy"})
    syncs.put_source(src, name, {"k": "v"})
    spec = {**example, "configMapName": name, "excludeNamespaces": excluded[:1]}
    created = syncs.create(src, {**sync_manifest("everywhere", name), "spec": spec})
    uid = created["metadata"]["uid"]
    status = syncs.wait_ready(src, "everywhere", 2)["status"]
    assert status["targetNamespaces"] == 2
    syncs.wait_copies([a, sandbox], name, owned_by(uid), "copies", 30)
    assert syncs.configmap(KUBE_SYSTEM, name) is None

    # The sandbox becomes excluded (the example's pattern): its copy goes, and only it.
    syncs.patch(src, "everywhere", {"spec": {"excludeNamespaces": excluded}})
    syncs.wait_copies([sandbox], name, lambda cm: cm is None, "copy removed", 30)
    assert syncs.wait_ready(src, "everywhere", 1)["status"]["targetNamespaces"] == 1
    assert owned_by(uid)(syncs.configmap(a, name))

    still = syncs.configmap(legacy, name)
    assert still is not None
    assert still.metadata.resource_version == theirs.metadata.resource_version
    assert OWNER_LABEL not in (still.metadata.labels or {})
    assert syncs.configmap(KUBE_SYSTEM, name) is None
    if cluster.audit_log is not None:
        time.sleep(3)  # the audit log is written asynchronously
        writes = writes_by(cluster.audit_log, pool.identity, started, time.time())
        elsewhere = [
            e
            for e in writes
            if e["objectRef"].get("namespace") in (legacy, KUBE_SYSTEM)
            and e["objectRef"].get("resource") == "configmaps"
        ]
        assert not elsewhere, describe(elsewhere)

    # Listed, kube-system (accepting src literally) gets its copy; it goes with the sync.
    syncs.patch(src, "everywhere", {"spec": {"destinationNamespaces": [KUBE_SYSTEM]}})
    syncs.wait_copies([KUBE_SYSTEM], name, owned_by(uid), "copy in kube-system", 30)
    syncs.delete(src, "everywhere", wait=True)
    syncs.wait_copies([a, KUBE_SYSTEM], name, lambda cm: cm is None, "copies deleted", 30)
    assert (
        syncs.configmap(legacy, name).metadata.resource_version == theirs.metadata.resource_version
    )


def test_include_and_exclude_keys_select_what_the_copies_carry(
    pool: FilterPool, syncs: Syncs
) -> None:
    """docs/configmapsync.md, "Copying some keys": excludeKeys, then includeKeys with a key
    the source lacks (Degraded KeysMissing, copies made with the keys that exist), both applied
    to data and binaryData; a changed list updates the copies."""
    src, a = pool.name("src"), pool.name("a")
    data = {"app.yaml": "port: 80\n", "credentials.txt": "s3cr3t", "notes": "n"}
    binary = {"logo.png": "iVBORw0KGgo=", "dump.bin": "AAE="}
    excluding, including = (e["spec"] for e in doc_examples("Copying some keys"))
    syncs.put_source(src, "keys", data, binary=binary)
    target = {"configMapName": "keys", "destinationNamespaces": [a]}
    syncs.create(src, {**sync_manifest("keys", "keys"), "spec": {**excluding, **target}})
    syncs.wait_ready(src, "keys", 1)
    copy = syncs.wait_copies(
        [a], "keys", lambda cm: cm is not None and "credentials.txt" not in (cm.data or {}), "", 30
    )[a]
    assert copy is not None
    assert copy.data == {"app.yaml": "port: 80\n", "notes": "n"}
    assert copy.binary_data == {"logo.png": "iVBORw0KGgo="}

    syncs.patch(src, "keys", {"spec": {"excludeKeys": None, **including, **target}})
    copy = syncs.wait_copies(
        [a], "keys", lambda cm: cm is not None and "notes" not in (cm.data or {}), "narrowed", 30
    )[a]
    assert copy is not None
    assert copy.data == {"app.yaml": "port: 80\n"}
    assert copy.binary_data == {"logo.png": "iVBORw0KGgo="}
    cms = wait_until(
        lambda: syncs.get(src, "keys"),
        lambda o: condition(o, "Degraded").get("reason") == "KeysMissing",
        timeout=30,
        what="Degraded KeysMissing",
    )
    assert condition(cms, "Degraded")["status"] == "True"
    assert "tls.conf" in condition(cms, "Degraded")["message"]
    assert condition(cms, "Ready")["status"] == "True"
    assert cms["status"]["syncedNamespaces"] == 1

    # The key appears in the source: copied, and the sync is no longer Degraded.
    syncs.core.patch_namespaced_config_map("keys", src, {"data": {"tls.conf": "x=1"}})
    syncs.wait_copies(
        [a], "keys", lambda cm: cm is not None and "tls.conf" in (cm.data or {}), "added", 30
    )
    wait_until(
        lambda: syncs.get(src, "keys"),
        lambda o: condition(o, "Degraded").get("status") == "False",
        timeout=30,
        what="Degraded False",
    )
