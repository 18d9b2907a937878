"""Deletions no watch event reports: objects deleted in etcd while the API server is stopped.

The operators' watches reconnect to a restarted API server whose watch cache starts after the
deletions, so the re-watch gets "410 Gone" and kopf re-lists: no DELETED event is ever sent for
those objects. The manager prunes every cache given to ``manager.watch`` at the end of each
listing (client-go's reflector turns such objects into DeletedFinalStateUnknown); these tests
check that ConfigMapSync's and PodDebugger's caches are among them (issue #16, item 1).

Local plane only: ``hack/localplane.py stop/start kube-apiserver`` and etcdctl on its etcd.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException
from prometheus_client.parser import text_string_to_metric_families

from e2e import configmapsync_support, poddebugger_support
from e2e.cluster import ROOT, Cluster, wait_until
from e2e.configmapsync_support import OWNER_LABEL, Syncs, sync_manifest
from e2e.operators import OperatorProcess, operator_env
from e2e.poddebugger_support import Debuggers, debugger_manifest, ephemeral
from poddebugger_operator.names import container_name
from poddebugger_operator.spec import parse_spec

# Fault injection, run by `make chaos`: while a restarted API server's RBAC authorizer has not
# synced, the operators' reconnecting watches are refused (403), which the least-privilege
# audit of `make e2e` (e2e/test_least_privilege.py) would rightly count against them.
pytestmark = [
    pytest.mark.chaos,
    pytest.mark.local_operators(
        "stops the local plane's API server and deletes objects in its etcd"
    ),
]

ETCDCTL = ROOT / ".local" / "bin" / "etcdctl"
SETTLE = 3.0
"""Seconds over which a sync that has nothing left to do must not be reconciled again."""


def _etcdctl(*args: str) -> str:
    base = int(os.environ.get("OPSUITE_PLANE_PORT_BASE", "36400"))
    done = subprocess.run(
        [str(ETCDCTL), f"--endpoints=http://127.0.0.1:{base}", *args],
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout


def _plane(*args: str) -> None:
    subprocess.run([sys.executable, str(ROOT / "hack" / "localplane.py"), *args], check=True)


def delete_behind_the_api_server(keys: list[str], namespaces: tuple[str, ...] = ()) -> None:
    """Stop the API server, delete ``keys`` and every object of ``namespaces`` (the namespace
    too) straight from etcd and compact it, start the API server again: no watch sees a
    DELETED event for them, every watch resumed from before re-lists."""
    _plane("stop", "kube-apiserver")
    try:
        doomed = list(keys)
        if namespaces:
            every = _etcdctl("get", "--prefix", "/registry/", "--keys-only").split()
            for ns in namespaces:
                doomed.append(f"/registry/namespaces/{ns}")
                doomed.extend(k for k in every if f"/{ns}/" in k)
        for key in doomed:
            _etcdctl("del", key)
        remaining = [k for k in doomed if _etcdctl("get", k, "--keys-only").strip()]
        assert not remaining, f"still in etcd: {remaining}"
        # Compacted past the deletions: a watch resumed from before them cannot be replayed
        # from etcd either (it gets "410 Gone" wherever the API server serves it from).
        revision = json.loads(_etcdctl("get", "/registry/", "--limit=1", "-w", "json"))
        _etcdctl("compact", str(revision["header"]["revision"]))
    finally:
        _plane("start", "kube-apiserver")


def _operator(cluster: Cluster, command: str, log_dir: Path, *args: str) -> OperatorProcess:
    log = log_dir / f"{command}-{uuid.uuid4().hex[:6]}.log"
    env = operator_env(cluster, command, POD_NAME=f"gap-e2e-{uuid.uuid4().hex[:6]}")
    process = OperatorProcess(command, list(args), log, env).start()
    process.wait_ready(timeout=120)
    return process


@pytest.fixture
def local_plane(cluster: Cluster) -> Cluster:
    if cluster.kind != "local":
        pytest.skip(f"stops the local plane's API server; the cluster is {cluster.kind}")
    if not ETCDCTL.exists():
        pytest.skip(f"{ETCDCTL} is not built")
    return cluster


@pytest.fixture
def namespaces(api: client.ApiClient) -> Iterator[list[str]]:
    """Names for the test's namespaces (created by the test), deleted afterwards if present."""
    run = uuid.uuid4().hex[:6]
    names = [f"gap-{run}-{suffix}" for suffix in ("src", "a", "b", "work")]
    yield names
    core = client.CoreV1Api(api)
    for name in names:
        try:
            core.delete_namespace(name, propagation_policy="Background")
        except ApiException as exc:
            if exc.status != 404:
                raise


def _reconciles(process: OperatorProcess, controller: str) -> float:
    """Reconciles of ``controller`` so far, whatever their result."""
    return sum(
        sample.value
        for family in text_string_to_metric_families(process.metrics())
        for sample in family.samples
        if sample.name == "controller_runtime_reconcile_total"
        and sample.labels.get("controller") == controller
    )


def test_configmapsync_restores_a_copy_and_reports_a_namespace_deleted_behind_its_watch(
    local_plane: Cluster,
    api: client.ApiClient,
    namespaces: list[str],
    tmp_path: Path,
) -> None:
    src, a, b, _work = namespaces
    core = client.CoreV1Api(api)
    for ns in (src, a, b):
        accept = {configmapsync_support.ACCEPT: src}
        core.create_namespace({"metadata": {"name": ns, "annotations": accept}})
    configmapsync_support.install_crd(local_plane)
    process = _operator(
        local_plane,
        "configmapsync-operator",
        tmp_path,
        *(f"--namespace={ns}" for ns in (src, a, b)),
    )
    syncs = Syncs(api)
    try:
        syncs.put_source(src, "cfg", {"key": "value"})
        created = syncs.create(src, sync_manifest("gap", "cfg", destinationNamespaces=[a, b]))
        syncs.wait_ready(src, "gap", 2)

        started = time.monotonic()
        delete_behind_the_api_server([f"/registry/configmaps/{a}/cfg"], namespaces=(b,))
        restarted = time.monotonic()
        print(f"\nAPI server stopped, etcd edited, ready again in {restarted - started:.1f} s")

        restored = syncs.wait_copies(
            [a],
            "cfg",
            lambda cm: (
                cm is not None
                and cm.data == {"key": "value"}
                and (cm.metadata.labels or {}).get(OWNER_LABEL) == created["metadata"]["uid"]
            ),
            "the copy deleted behind the watch restored",
            timeout=60,
        )
        assert restored[a] is not None
        print(f"copy restored {time.monotonic() - restarted:.1f} s after the restart")
        status = syncs.wait(
            src,
            "gap",
            lambda o: (
                o["status"].get("syncedNamespaces") == 1
                and [(t["namespace"], t["reason"]) for t in o["status"].get("failedTargets") or ()]
                == [(b, "NamespaceMissing")]
            ),
            f"{b} reported missing",
            timeout=60,
        )["status"]
        print(f"namespace reported missing {time.monotonic() - restarted:.1f} s after the restart")
        assert status["failedTargets"][0]["namespace"] == b

        # Nothing is left to do: the sync stops being retried (it was, every second, for ever,
        # while the cache still held the vanished namespace). Retries already scheduled while
        # the other watches re-listed may still run once.
        def reconciles_in_a_while() -> float:
            before = _reconciles(process, "configmapsync")
            time.sleep(SETTLE)
            return _reconciles(process, "configmapsync") - before

        wait_until(
            reconciles_in_a_while,
            lambda grown: grown == 0,
            timeout=45,
            what=f"no reconcile of the sync for {SETTLE:.0f} s",
        )
        print(f"retries stopped {time.monotonic() - restarted:.1f} s after the restart")
        assert "vanished while the watch was down" in process.log_path.read_text()
    finally:
        syncs.cleanup()
        assert process.stop() == 0, process.log_tail()


def test_poddebugger_drops_pods_deleted_behind_its_watch(
    local_plane: Cluster,
    api: client.ApiClient,
    namespaces: list[str],
    tmp_path: Path,
) -> None:
    work = namespaces[3]
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": work}})
    wait_until(
        lambda: core.read_namespaced_service_account("default", work),
        lambda sa: sa is not None,
        timeout=60,
        what=f"the default ServiceAccount in {work}",
    )
    poddebugger_support.install_crd(local_plane)
    process = _operator(
        local_plane,
        "pod-debugger-operator",
        tmp_path,
        f"--namespace={work}",
        f"--allowed-image-prefix={poddebugger_support.ALLOWED_PREFIX}",
        poddebugger_support.OPT_OUT,
    )
    debuggers = Debuggers(api)
    try:
        for name in ("web-1", "web-2", "web-3"):
            debuggers.run_pod(work, name, {"app": "web"})
        debugger = debuggers.create(work, debugger_manifest("dbg", {"app": "web"}, maxPods=2))
        debuggers.wait(
            work,
            "dbg",
            lambda o: o["status"].get("matchedPods") == 3 and o["status"].get("debuggedCount") == 2,
            "3 matched, 2 debugged",
        )
        container = container_name("dbg", parse_spec(debugger))
        debugged = [
            name
            for name in ("web-1", "web-2", "web-3")
            if container in ephemeral(debuggers.pod(work, name))
        ]
        assert len(debugged) == 2, debugged
        (spare,) = {"web-1", "web-2", "web-3"} - set(debugged)

        started = time.monotonic()
        delete_behind_the_api_server([f"/registry/pods/{work}/{name}" for name in debugged])
        restarted = time.monotonic()
        print(f"\nAPI server stopped, etcd edited, ready again in {restarted - started:.1f} s")

        # The ghosts no longer count nor hold maxPods slots: the spare pod gets its container.
        debuggers.wait(
            work,
            "dbg",
            lambda o: o["status"].get("matchedPods") == 1 and o["status"].get("debuggedCount") == 1,
            "1 matched (the ghosts dropped), 1 debugged",
        )
        print(f"ghosts dropped {time.monotonic() - restarted:.1f} s after the restart")
        assert container in ephemeral(debuggers.pod(work, spare))
        assert "vanished while the watch was down" in process.log_path.read_text()
    finally:
        debuggers.cleanup()
        assert process.stop() == 0, process.log_tail()
