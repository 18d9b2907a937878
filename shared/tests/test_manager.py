"""The manager's hand-off to kopf, without a cluster."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import getpass
import socket
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import kopf
import pytest

from opsuite_common import manager as manager_module
from opsuite_common.credentials import BasicAuth, StaticToken
from opsuite_common.health import HealthServer
from opsuite_common.kopfwatch.hooks import Deliver
from opsuite_common.kopfwatch.runner import connection_info
from opsuite_common.kopfwatch.settings import watch_dead_after
from opsuite_common.leading import WatchDead
from opsuite_common.manager import Manager
from opsuite_common.metrics import REGISTRY
from opsuite_common.store import JSON, Store, object_key
from opsuite_testkit import FakeClock, offline_manager


def kopf_runs(
    monkeypatch: pytest.MonkeyPatch, operator: Callable[..., Coroutine[Any, Any, None]]
) -> None:
    """lead() runs ``operator``, called with kopf.spawn_tasks's keywords, as kopf's one task."""

    async def spawn_tasks(**kwargs: Any) -> list[asyncio.Task[None]]:
        return [asyncio.create_task(operator(**kwargs))]

    monkeypatch.setattr(kopf, "spawn_tasks", spawn_tasks)


def routed(manager: Manager, plural: str) -> Deliver:
    """The route of a core resource's watch events to ``manager`` (it watches it)."""
    deliver = manager.route("", plural)
    assert deliver is not None, plural
    return deliver


async def test_kopf_gets_the_identity_so_no_passwd_entry_is_needed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The images run as uid 65532, which has no passwd entry: kopf must not look the user up
    (getpass.getuser raises KeyError there) but use the manager's identity."""

    def no_passwd_entry() -> str:
        raise KeyError("getpwuid(): uid not found: 65532")

    seen: dict[str, Any] = {}

    async def operator(**kwargs: Any) -> None:
        seen.update(kwargs)
        if kwargs.get("identity") is None:
            getpass.getuser()  # what kopf does without an identity

    monkeypatch.setenv("POD_NAME", "operator-pod-1")
    monkeypatch.setattr(getpass, "getuser", no_passwd_entry)
    kopf_runs(monkeypatch, operator)
    manager = offline_manager("test-operator", ("ns",), tmp_path, monkeypatch)
    await manager.lead()
    assert seen["identity"] == "operator-pod-1"


def test_a_relisting_prunes_the_store_and_reports_each_pruned_object_as_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Objects deleted while a watch was down (no DELETED event) leave the cache at the end of
    the next listing and reach the handler as DELETED events; the listing of one namespace
    prunes nothing in another."""
    manager = offline_manager("test-operator", ("ns",), tmp_path, monkeypatch)
    store = Store("pods")
    seen: list[tuple[str | None, str, bool]] = []

    def on_event(event_type: str | None, obj: JSON, old: JSON | None) -> None:
        seen.append((event_type, obj["metadata"]["name"], old is not None))

    manager.watch("", "v1", "pods", store=store, on_event=on_event)
    assert manager.cache("pods") is store
    deliver = routed(manager, "pods")
    for namespace, name in (("ns", "kept"), ("ns", "gone"), ("other", "elsewhere")):
        deliver({"type": None, "object": {"metadata": {"namespace": namespace, "name": name}}})
    seen.clear()
    manager.activity.listed("pods", "ns", {("ns", "kept")})
    assert {object_key(o) for o in store.items()} == {("ns", "kept"), ("other", "elsewhere")}
    assert seen == [("DELETED", "gone", True)]


def test_a_listing_older_than_the_operators_own_write_leaves_the_cache_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listing (or event) under way when the operator recorded its own write carries the
    version before it: applied, it would take the cache back and make the next reconcile
    write again (#20: every copy patched five times after a partition healed). It is skipped,
    and no handler hears of it; newer versions, and deletions, still go through."""
    manager = offline_manager("test-operator", ("ns",), tmp_path, monkeypatch)
    store = Store("configmaps")
    seen: list[tuple[str | None, str]] = []

    def on_event(event_type: str | None, obj: JSON, old: JSON | None) -> None:
        seen.append((event_type, obj["metadata"]["resourceVersion"]))

    def version(rv: str) -> JSON:
        return {"metadata": {"namespace": "ns", "name": "cfg", "resourceVersion": rv}}

    manager.watch("", "v1", "configmaps", store=store, on_event=on_event)
    deliver = routed(manager, "configmaps")
    store.apply("MODIFIED", version("120"))  # the write-through of the operator's own patch
    deliver({"type": None, "object": version("99")})
    deliver({"type": "MODIFIED", "object": version("110")})
    assert store.get("ns", "cfg") == version("120")
    assert seen == []
    deliver({"type": "MODIFIED", "object": version("120")})
    deliver({"type": "MODIFIED", "object": version("1000")})
    deliver({"type": "DELETED", "object": version("1001")})
    assert seen == [("MODIFIED", "120"), ("MODIFIED", "1000"), ("DELETED", "1001")]
    assert store.get("ns", "cfg") is None


def test_once_the_caches_are_synced_the_objects_so_far_leave_the_full_collections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The code, kopf's objects and the initial listings live as long as the process: once
    the caches are synced they are frozen out of the collector's full passes (``gc.freeze``),
    which would otherwise scan them all again each time (#19)."""
    frozen: list[bool] = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))
    manager = offline_manager("test-operator", ("ns",), tmp_path, monkeypatch)
    manager.watch("", "v1", "pods", store=Store("pods"))
    routed(manager, "pods")(
        {"type": None, "object": {"metadata": {"namespace": "ns", "name": "a"}}}
    )
    assert frozen == []
    manager.activity.listed("pods", "ns", {("ns", "a")})
    assert manager.synced
    assert frozen == [True]
    manager.activity.listed("pods", "ns", {("ns", "a")})  # a relisting later: no second freeze
    assert frozen == [True]


def test_a_listing_that_ends_before_its_objects_reach_the_cache_syncs_with_the_last_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where events reach the cache after the listing's end is reported (kopf's own workers,
    for a resource not routed), the caches are synced when the last listed object arrives,
    not before; objects of other namespaces, or not listed, do not count."""
    manager = offline_manager("test-operator", ("ns",), tmp_path, monkeypatch)
    manager.watch("", "v1", "pods", store=Store("pods"))
    deliver = routed(manager, "pods")

    def pod(namespace: str, name: str) -> JSON:
        return {"type": None, "object": {"metadata": {"namespace": namespace, "name": name}}}

    deliver(pod("ns", "a"))
    manager.activity.listed("pods", "ns", {("ns", "a"), ("ns", "b"), ("ns", "c")})
    for event in (pod("other", "b"), pod("ns", "d"), pod("ns", "b")):
        deliver(event)
        assert not manager.synced
    deliver(pod("ns", "c"))
    assert manager.synced


async def test_the_collector_rests_while_the_initial_listings_fill_the_caches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its passes during the initial listings find nothing to free (the caches' records live
    on): it is off from lead() until the caches are synced, then on again; on again too when
    lead() ends before they were."""
    monkeypatch.setattr(gc, "freeze", lambda: None)  # keep the test process collectable
    seen: list[bool] = []

    async def listing(**_: Any) -> None:
        seen.append(gc.isenabled())
        pods = {"type": None, "object": {"metadata": {"namespace": "ns", "name": "a"}}}
        routed(manager, "pods")(pods)
        seen.append(gc.isenabled())
        manager.activity.listed("pods", "ns", {("ns", "a")})
        seen.append(gc.isenabled())

    async def stopped(**_: Any) -> None:
        seen.append(gc.isenabled())

    manager = offline_manager("test-operator", ("ns",), tmp_path, monkeypatch)
    manager.watch("", "v1", "pods", store=Store("pods"))
    stopping = offline_manager("test-operator", ("ns",), tmp_path, monkeypatch)
    stopping.watch("", "v1", "pods", store=Store("pods"))
    try:
        kopf_runs(monkeypatch, listing)
        await manager.lead()
        assert seen == [False, False, True]
        kopf_runs(monkeypatch, stopped)
        await stopping.lead()
        assert seen[3:] == [False]
        assert gc.isenabled()
    finally:
        gc.enable()


async def test_the_collector_is_back_after_a_while_when_the_listings_never_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listing that keeps failing (RBAC, a missing CRD) makes cyclic garbage: the collector
    is on again after GC_PAUSE_LIMIT though the caches never synced."""
    monkeypatch.setattr(manager_module, "GC_PAUSE_LIMIT", 0.05)
    seen: list[bool] = []

    async def failing(**_: Any) -> None:
        seen.append(gc.isenabled())
        await asyncio.sleep(0.2)
        seen.append(gc.isenabled())

    manager = offline_manager("test-operator", ("ns",), tmp_path, monkeypatch)
    manager.watch("", "v1", "pods", store=Store("pods"))
    try:
        kopf_runs(monkeypatch, failing)
        await manager.lead()
        assert seen == [False, True]
    finally:
        gc.enable()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def test_metrics_listen_before_the_probes_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ready means scrapable: the (secure, so slower to start) metrics server listens before
    the probes do, so a caller that waits for /readyz never finds the metrics port closed."""
    metrics_port = _free_port()
    manager = offline_manager(
        "test-operator",
        ("ns",),
        tmp_path,
        monkeypatch,
        metrics_bind_address=f"127.0.0.1:{metrics_port}",
        health_probe_bind_address=f"127.0.0.1:{_free_port()}",
        metrics_secure=True,
    )
    listening: list[bool] = []
    start_probes = HealthServer.start

    async def start(server: HealthServer) -> int | None:
        with socket.socket() as probe:
            listening.append(probe.connect_ex(("127.0.0.1", metrics_port)) == 0)
        return await start_probes(server)

    async def lead() -> None:
        return None

    monkeypatch.setattr(HealthServer, "start", start)
    monkeypatch.setattr(manager, "lead", lead)
    assert await manager.run() == 0
    assert listening == [True]


def stale_streams() -> float | None:
    """opsuite_watch_stale_streams as /metrics would serve it now."""
    return REGISTRY.get_sample_value("opsuite_watch_stale_streams")


async def test_a_dead_watch_stream_fails_liveness_and_makes_the_leader_step_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Serving two namespaces, the pods stream of one goes silent while the other streams on:
    /readyz names it after twice the watch timeout; past watch_dead_after, /healthz fails
    and lead() stops with WatchDead, its write fence closed (#16, item 7 and the minor on
    per-namespace liveness)."""

    async def operator(**kwargs: Any) -> None:
        kwargs["ready_flag"].set()
        await asyncio.Event().wait()

    kopf_runs(monkeypatch, operator)
    monkeypatch.setattr(manager_module, "WATCHDOG_PERIOD", 0.01)
    clock = FakeClock(0)
    manager = offline_manager(
        "test-operator", ("a", "b"), tmp_path, monkeypatch, clock=clock, watch_timeout=5
    )
    manager.watch("", "v1", "pods")
    assert not manager.fence.is_open  # a standby writes nothing
    leading = asyncio.create_task(manager.lead())
    await asyncio.sleep(0.05)
    assert manager.fence.is_open
    for namespace in ("a", "b"):
        manager.activity.mark("pods", namespace)
        manager.activity.listed("pods", namespace, set())
    await asyncio.sleep(0.05)
    assert manager.readiness() is None
    assert stale_streams() == 0
    limit = watch_dead_after(5)
    assert limit == 60

    def tick(now: float) -> None:
        clock.now = now
        manager.activity.mark("pods", "a")

    tick(11)
    assert manager.readiness() == "watch silent for over 10 s: pods in b"
    assert stale_streams() == 1  # what the alert on an unhealthy watch reads
    assert manager.liveness() is None
    tick(limit)
    await asyncio.sleep(0.05)
    assert not leading.done()
    assert manager.liveness() is None
    tick(limit + 1)
    with pytest.raises(WatchDead, match="pods in b"):
        await asyncio.wait_for(leading, 5)
    assert not manager.fence.is_open
    reason = manager.liveness()
    assert reason == "watch dead (silent for over 60 s): pods in b"
    tick(limit + 2)  # even if the stream came back: the process is on its way out
    assert manager.liveness() == reason


async def test_a_watch_that_never_starts_is_dead_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A watcher that fails at once (a 403, say) never shows life: silent since lead()."""

    async def operator(**kwargs: Any) -> None:
        kwargs["ready_flag"].set()
        await asyncio.Event().wait()  # its watcher gone, kopf runs on

    kopf_runs(monkeypatch, operator)
    monkeypatch.setattr(manager_module, "WATCHDOG_PERIOD", 0.01)
    clock = FakeClock(1000)
    manager = offline_manager(
        "test-operator", ("a",), tmp_path, monkeypatch, clock=clock, watch_timeout=5
    )
    manager.watch("", "v1", "pods")
    leading = asyncio.create_task(manager.lead())
    await asyncio.sleep(0.05)
    clock.now = 1060
    await asyncio.sleep(0.05)
    assert manager.liveness() is None
    assert not leading.done()
    clock.now = 1061
    with pytest.raises(WatchDead, match="pods in a"):
        await asyncio.wait_for(leading, 5)
    assert manager.liveness() == "watch dead (silent for over 60 s): pods in a"


def test_the_exit_code_does_not_wait_for_a_thread_stuck_on_the_network() -> None:
    """#20: a default-executor thread blocked on the network (a name lookup of a partitioned
    API server) would be joined by asyncio.run before it returns, until kopf's ultimate
    exiting timeout SIGKILLed the process (exit -9 instead of 1)."""
    stuck = threading.Event()

    async def main() -> int:
        asyncio.get_running_loop().run_in_executor(None, stuck.wait, 30)
        await asyncio.sleep(0.05)
        return 1

    began = time.monotonic()
    try:
        assert manager_module.run_main(main) == 1
        assert time.monotonic() - began < 5
    finally:
        stuck.set()


def test_without_leader_election_it_is_not_ready_before_it_leads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probes answer before lead() starts the watches: without leader election the process
    is no standby, and is not ready until its caches are synced (a bench run saw /readyz 200
    0.4 s after start with 20,000 pods to list). With leader election, a standby is ready."""
    manager = offline_manager("test-operator", ("a",), tmp_path, monkeypatch)
    manager.watch("", "v1", "pods")
    assert manager.readiness() == "caches not synced yet: pods"
    electing = offline_manager("test-operator", ("a",), tmp_path, monkeypatch, leader_elect=True)
    assert electing.readiness() is None


@pytest.mark.parametrize(
    ("credentials", "expected"),
    [
        (StaticToken("t0k"), {"scheme": "Bearer", "token": "t0k"}),
        (BasicAuth("ann", "p:w"), {"username": "ann", "password": "p:w"}),
        (None, {}),
    ],
)
async def test_kopf_logs_in_with_the_managers_own_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, credentials: Any, expected: dict[str, str]
) -> None:
    manager = offline_manager("test-operator", ("a",), tmp_path, monkeypatch)
    conf = dataclasses.replace(manager.kube.configuration, credentials=credentials)
    monkeypatch.setattr(type(manager.kube), "configuration", property(lambda _self: conf))
    info = await connection_info(manager.kube.configuration)
    login = {"scheme": None, "token": None, "username": None, "password": None} | expected
    assert {key: getattr(info, key) for key in login} == login
    assert info.server == conf.host


async def test_a_stopped_leader_finishes_the_reconcile_in_hand_then_closes_the_fence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """stop() while a reconcile is in hand: no other key is handed out; the reconcile goes on,
    the fence open and kopf running, to its end; then the fence closes and kopf is stopped."""
    monkeypatch.setattr(gc, "freeze", lambda: None)  # keep the test process collectable
    kopf_flags: dict[str, asyncio.Event] = {}
    kopf_started = asyncio.Event()

    async def operator(**kwargs: Any) -> None:
        kopf_flags.update(stop=kwargs["stop_flag"])
        kopf_started.set()
        kwargs["ready_flag"].set()
        await kwargs["stop_flag"].wait()

    kopf_runs(monkeypatch, operator)
    manager = offline_manager("test-operator", ("ns",), tmp_path, monkeypatch)
    manager.watch("", "v1", "pods")
    in_hand, finish = asyncio.Event(), asyncio.Event()
    seen: list[tuple[str, bool, bool]] = []

    async def reconcile(key: tuple[str, str]) -> None:
        seen.append((key[1], manager.fence.is_open, kopf_flags["stop"].is_set()))
        in_hand.set()
        await finish.wait()
        seen.append(("done", manager.fence.is_open, kopf_flags["stop"].is_set()))

    pods = manager.add_controller("pods", reconcile)
    pods.enqueue(("ns", "a"))
    pods.enqueue(("ns", "b"))
    leading = asyncio.create_task(manager.lead())
    await asyncio.wait_for(kopf_started.wait(), 5)  # kopf's list, as in a real start, ends
    manager.activity.listed("pods", "ns", set())  # with the caches synced
    await asyncio.wait_for(in_hand.wait(), 5)
    manager.stop()
    await asyncio.sleep(0.05)
    assert not leading.done()
    assert manager.fence.is_open
    finish.set()
    await asyncio.wait_for(leading, 5)
    assert seen == [("a", True, False), ("done", True, False)]
    assert not manager.fence.is_open
    assert kopf_flags["stop"].is_set()


async def a_reconcile_in_hand(manager: Manager) -> tuple[asyncio.Task[None], list[bool]]:
    """``manager`` leading (it watches pods in "ns"), its caches synced, with a reconcile in
    hand that runs until cancelled; the list gets whether the fence was open then."""
    in_hand = asyncio.Event()
    cancelled: list[bool] = []

    async def reconcile(_key: tuple[str, str]) -> None:
        in_hand.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(manager.fence.is_open)
            raise

    manager.add_controller("pods", reconcile).enqueue(("ns", "a"))
    leading = asyncio.create_task(manager.lead())
    manager.activity.listed("pods", "ns", set())
    await asyncio.wait_for(in_hand.wait(), 5)
    return leading, cancelled


async def test_a_reconcile_past_the_grace_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reconcile that outlasts RECONCILE_GRACE is cancelled, its writes fenced."""
    monkeypatch.setattr(gc, "freeze", lambda: None)
    monkeypatch.setattr(manager_module, "RECONCILE_GRACE", 0.05)

    async def operator(**kwargs: Any) -> None:
        kwargs["ready_flag"].set()
        await kwargs["stop_flag"].wait()

    kopf_runs(monkeypatch, operator)
    manager = offline_manager("test-operator", ("ns",), tmp_path, monkeypatch)
    manager.watch("", "v1", "pods")
    leading, cancelled = await a_reconcile_in_hand(manager)
    manager.stop()
    await asyncio.wait_for(leading, 5)
    assert cancelled == [False]


async def test_a_leader_stopped_before_its_caches_synced_does_not_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No reconcile has started before the caches are synced: nothing to wait for."""
    monkeypatch.setattr(manager_module, "RECONCILE_GRACE", 60)

    async def operator(**kwargs: Any) -> None:
        await kwargs["stop_flag"].wait()

    kopf_runs(monkeypatch, operator)
    manager = offline_manager("test-operator", ("ns",), tmp_path, monkeypatch)
    manager.watch("", "v1", "pods")
    manager.add_controller("pods", lambda _key: asyncio.sleep(0))
    manager.stop()
    await asyncio.wait_for(manager.lead(), 5)
    assert not manager.fence.is_open


async def test_a_failing_leader_closes_the_fence_before_it_cancels_the_reconciles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dead watch ends the leader at once: the reconcile in hand is cancelled, the fence
    closed first, so that nothing its clean-up does reaches the API server (as on a stop)."""
    monkeypatch.setattr(gc, "freeze", lambda: None)
    monkeypatch.setattr(manager_module, "WATCHDOG_PERIOD", 0.01)

    async def operator(**kwargs: Any) -> None:
        kwargs["ready_flag"].set()
        await asyncio.Event().wait()

    kopf_runs(monkeypatch, operator)
    clock = FakeClock(0)
    manager = offline_manager(
        "test-operator", ("ns",), tmp_path, monkeypatch, clock=clock, watch_timeout=5
    )
    manager.watch("", "v1", "pods")
    leading, cancelled = await a_reconcile_in_hand(manager)
    clock.now = watch_dead_after(5) + 1
    with pytest.raises(WatchDead):
        await asyncio.wait_for(leading, 5)
    assert cancelled == [False]
