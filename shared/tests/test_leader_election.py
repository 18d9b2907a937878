"""Leader election against an in-memory Lease server, on a virtual-time event loop."""

import asyncio
import contextlib
import copy
import json
import random
import re
import selectors
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from opsuite_common.fence import WriteFence
from opsuite_common.kube import ApiException, KubeApi
from opsuite_common.kubeconfig import Configuration
from opsuite_common.leader_election import (
    LeaderElectionConfig,
    LeaderElector,
    LeadershipLost,
    Lease,
    LeaseConflictError,
    default_identity,
    micro_time,
)
from opsuite_common.lease_api import KubernetesLeaseApi
from opsuite_testkit.local_server import address, serve

NS, NAME = "ops", "opsuite-lock"
EPOCH = datetime(2026, 11, 21, 23, 40, tzinfo=UTC)
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


class _FastForwardSelector(selectors.DefaultSelector):
    """Never blocks: when idle, jumps the loop's clock to the next timer."""

    def __init__(self, loop: "VirtualTimeLoop") -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[Any]:
        events = super().select(0)
        if not events and timeout is None:
            raise RuntimeError("deadlock: nothing scheduled and nothing ready")
        if not events and timeout:
            self._loop.now += timeout
        return events


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """Event loop whose time only advances when every task is waiting."""

    def __init__(self) -> None:
        self.now = 0.0
        super().__init__(_FastForwardSelector(self))

    def time(self) -> float:
        return self.now


def run_virtual(coro: Coroutine[Any, Any, None]) -> None:
    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        runner.run(coro)


def virtual_now() -> datetime:
    return EPOCH + timedelta(seconds=asyncio.get_running_loop().time())


class LeaseServer:
    """Lease storage with the API server's create/replace/resourceVersion rules."""

    def __init__(self) -> None:
        self.lease: Lease | None = None
        self.version = 0
        self.rejected = 0
        self.changed = asyncio.Event()

    def get(self) -> Lease | None:
        return copy.deepcopy(self.lease)

    def create(self, lease: Lease) -> Lease:
        if self.lease is not None:
            self.rejected += 1
            raise LeaseConflictError("already exists")
        return self._store(lease)

    def replace(self, lease: Lease) -> Lease:
        assert self.lease is not None, "replace of a missing lease"
        if lease["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            self.rejected += 1
            raise LeaseConflictError("stale resourceVersion")
        return self._store(lease)

    def put(self, spec: dict[str, Any]) -> None:
        """Write as some other client would (no precondition)."""
        self._store({"metadata": {"name": NAME, "namespace": NS}, "spec": spec})

    def _store(self, lease: Lease) -> Lease:
        self.version += 1
        stored = copy.deepcopy(lease)
        stored["metadata"]["resourceVersion"] = str(self.version)
        self.lease = stored
        self.changed.set()
        self.changed = asyncio.Event()
        return copy.deepcopy(stored)

    @property
    def spec(self) -> dict[str, Any]:
        assert self.lease is not None
        spec: dict[str, Any] = self.lease["spec"]
        return spec


class FakeLeaseApi:
    """One client's view of the server: latency each way and outages."""

    def __init__(self, server: LeaseServer, latency: float = 0.0) -> None:
        self.server = server
        self.latency = latency
        self.down = False
        self.before_write: Callable[[], None] | None = None

    async def _call(self, op: Callable[[], Lease | None]) -> Lease | None:
        await asyncio.sleep(self.latency / 2)
        if self.down:
            raise ConnectionError("API server unreachable")
        result = op()
        await asyncio.sleep(self.latency / 2)
        return result

    async def get(self, namespace: str, name: str) -> Lease | None:
        return await self._call(self.server.get)

    async def create(self, namespace: str, lease: Lease) -> Lease:
        self._hook()
        result = await self._call(lambda: self.server.create(lease))
        assert result is not None
        return result

    async def replace(self, namespace: str, name: str, lease: Lease) -> Lease:
        self._hook()
        result = await self._call(lambda: self.server.replace(lease))
        assert result is not None
        return result

    async def wait_for_change(
        self, namespace: str, name: str, resource_version: str, max_wait: float
    ) -> None:
        await asyncio.sleep(self.latency / 2)
        if self.down:
            raise ConnectionError("API server unreachable")
        current = self.server.lease
        if current is None or current["metadata"]["resourceVersion"] == resource_version:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.server.changed.wait(), max_wait)
        await asyncio.sleep(self.latency / 2)

    def _hook(self) -> None:
        if self.before_write is not None:
            self.before_write()


def config(identity: str, **kwargs: Any) -> LeaderElectionConfig:
    return LeaderElectionConfig(name=NAME, namespace=NS, identity=identity, **kwargs)


def elector(
    api: FakeLeaseApi, identity: str, statuses: list[bool] | None = None, **kwargs: Any
) -> LeaderElector:
    return LeaderElector(
        api,
        config(identity, **kwargs),
        now=virtual_now,
        rng=random.Random(identity),
        on_leading_change=None if statuses is None else statuses.append,
    )


async def forever() -> None:
    await asyncio.Event().wait()


def now() -> float:
    return asyncio.get_running_loop().time()


def test_acquires_a_missing_lease_and_fills_every_field() -> None:
    server = LeaseServer()
    statuses: list[bool] = []

    async def scenario() -> None:
        candidate = elector(FakeLeaseApi(server), "a", statuses)
        task = asyncio.create_task(candidate.run(forever))
        await asyncio.sleep(0.1)
        assert candidate.is_leader
        assert candidate.leader == "a"
        assert server.spec == {
            "holderIdentity": "a",
            "leaseDurationSeconds": 15,
            "acquireTime": "2026-11-21T23:40:00.000000Z",
            "renewTime": "2026-11-21T23:40:00.000000Z",
            "leaseTransitions": 0,
        }
        assert server.lease is not None
        assert server.lease["metadata"]["name"] == NAME
        await asyncio.sleep(7.5)
        assert server.spec["acquireTime"] == "2026-11-21T23:40:00.000000Z"
        assert server.spec["renewTime"] == "2026-11-21T23:40:06.000000Z"
        assert server.spec["leaseTransitions"] == 0
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    run_virtual(scenario())
    assert statuses == [False, True, False]


def test_takes_a_released_lease_at_once_and_counts_the_transition() -> None:
    server = LeaseServer()
    server.put({"holderIdentity": "", "leaseDurationSeconds": 1, "leaseTransitions": 4})

    async def scenario() -> None:
        candidate = elector(FakeLeaseApi(server), "a")
        task = asyncio.create_task(candidate.run(forever))
        await asyncio.sleep(0.01)
        assert candidate.is_leader
        assert server.spec["holderIdentity"] == "a"
        assert server.spec["leaseTransitions"] == 5
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    run_virtual(scenario())


def test_waits_a_full_lease_duration_from_observation_not_from_remote_times() -> None:
    server = LeaseServer()
    # The remote renewTime is long past; only the local observation counts.
    stamp = "2000-01-01T00:00:00.000000Z"
    server.put(
        {
            "holderIdentity": "b",
            "leaseDurationSeconds": 15,
            "acquireTime": stamp,
            "renewTime": stamp,
            "leaseTransitions": 2,
        }
    )

    async def scenario() -> None:
        candidate = elector(FakeLeaseApi(server), "a")
        task = asyncio.create_task(candidate.run(forever))
        await asyncio.sleep(14.9)
        assert not candidate.is_leader
        assert candidate.leader == "b"
        # Jittered retries are at most 2 * (1 + 1.2) = 4.4 s apart.
        await asyncio.sleep(5)
        assert candidate.is_leader
        assert server.spec["holderIdentity"] == "a"
        assert server.spec["leaseTransitions"] == 3
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    run_virtual(scenario())


def test_never_takes_a_lease_whose_holder_keeps_renewing() -> None:
    server = LeaseServer()

    async def holder() -> None:
        while True:
            server.put({"holderIdentity": "b", "leaseDurationSeconds": 15, "renewTime": now()})
            await asyncio.sleep(10)

    async def scenario() -> None:
        renewing = asyncio.create_task(holder())
        candidate = elector(FakeLeaseApi(server), "a")
        task = asyncio.create_task(candidate.run(forever))
        await asyncio.sleep(300)
        assert not candidate.is_leader
        renewing.cancel()
        await asyncio.sleep(20)
        assert candidate.is_leader
        task.cancel()
        await asyncio.gather(task, renewing, return_exceptions=True)

    run_virtual(scenario())


def test_renewal_failing_past_the_deadline_cancels_leading_then_raises() -> None:
    server = LeaseServer()
    api = FakeLeaseApi(server)
    statuses: list[bool] = []
    stopped_at: list[float] = []

    async def lead() -> None:
        try:
            await forever()
        finally:
            stopped_at.append(now())

    async def scenario() -> None:
        candidate = elector(api, "a", statuses)
        task = asyncio.create_task(candidate.run(lead))
        await asyncio.sleep(5)  # renewed at 2 and 4
        api.down = True
        with pytest.raises(LeadershipLost, match=r"within 10\.0s"):
            await task
        # It gives up 10 s after the last renewal was sent (at 4), at 14: before the lease
        # expires for others, 15 s after they saw that renewal.
        assert stopped_at == [14.0]
        assert now() == 14.0
        assert not candidate.is_leader

    run_virtual(scenario())
    assert statuses == [False, True, False]
    assert server.spec["holderIdentity"] == "a"  # not released: it was lost


class FakeFence:
    """Records when it was closed and drained, and the last deadline it was given; draining
    takes ``drain_time`` (virtual) s."""

    def __init__(self, server: LeaseServer, drain_time: float = 0.0) -> None:
        self.server = server
        self.drain_time = drain_time
        self.events: list[tuple[str, float, str]] = []  # (what, when, holder then)
        self.deadline = float("-inf")

    def lead_until(self, deadline: float) -> None:
        self.deadline = deadline

    def close(self) -> None:
        self.events.append(("closed", now(), self.server.spec["holderIdentity"]))

    async def drain(self, max_wait: float) -> bool:
        await asyncio.sleep(min(self.drain_time, max_wait))
        self.events.append(("drained", now(), self.server.spec["holderIdentity"]))
        return self.drain_time <= max_wait


def fenced_elector(api: FakeLeaseApi, identity: str, fence: FakeFence) -> LeaderElector:
    return LeaderElector(
        api, config(identity), now=virtual_now, rng=random.Random(identity), fence=fence
    )


def test_the_fence_closes_the_moment_renewal_fails_before_leading_has_stopped() -> None:
    """The leader knows at the renew deadline (14 s, 10 s after its last renewal was sent,
    before the lease expires for others at 19 s), the fence's own deadline: the fence closes
    then, before the leading task's 1 s cleanup; nothing is drained or released, since the
    lease is lost."""
    server = LeaseServer()
    api = FakeLeaseApi(server)
    fence = FakeFence(server)
    stopped_at: list[float] = []

    async def lead() -> None:
        try:
            await forever()
        finally:
            await asyncio.sleep(1)
            stopped_at.append(now())

    async def scenario() -> None:
        task = asyncio.create_task(fenced_elector(api, "a", fence).run(lead))
        await asyncio.sleep(5)
        api.down = True
        with pytest.raises(LeadershipLost):
            await task

    run_virtual(scenario())
    assert fence.deadline == 14.0
    assert fence.events == [("closed", 14.0, "a")]
    assert stopped_at == [15.0]


def test_the_fence_closes_when_another_holder_is_seen() -> None:
    server = LeaseServer()
    fence = FakeFence(server)

    async def scenario() -> None:
        task = asyncio.create_task(fenced_elector(FakeLeaseApi(server), "a", fence).run(forever))
        await asyncio.sleep(3)
        server.put({"holderIdentity": "b", "leaseDurationSeconds": 15})
        with pytest.raises(LeadershipLost):
            await task

    run_virtual(scenario())
    assert fence.events == [("closed", 4.0, "b")]


@pytest.mark.parametrize(("drain_time", "released"), [(3.0, True), (11.0, False)])
def test_the_lease_is_released_only_once_the_writes_in_flight_are_answered(
    drain_time: float, released: bool
) -> None:
    """On a stop the fence closes, the writes in flight are drained, then the lease is
    released; writes still in flight after renew_deadline (10 s) keep it from being released
    (it expires instead, later)."""
    server = LeaseServer()
    fence = FakeFence(server, drain_time)

    async def scenario() -> None:
        task = asyncio.create_task(fenced_elector(FakeLeaseApi(server), "a", fence).run(forever))
        await asyncio.sleep(1)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    run_virtual(scenario())
    assert fence.events == [("closed", 1.0, "a"), ("drained", 1.0 + min(drain_time, 10), "a")]
    assert server.spec["holderIdentity"] == ("" if released else "a")


def test_observing_another_holder_ends_leadership_immediately() -> None:
    server = LeaseServer()

    async def scenario() -> None:
        candidate = elector(FakeLeaseApi(server), "a")
        task = asyncio.create_task(candidate.run(forever))
        await asyncio.sleep(3)
        server.put({"holderIdentity": "b", "leaseDurationSeconds": 15})
        with pytest.raises(LeadershipLost, match="taken by 'b'"):
            await task
        assert now() == 4.0
        assert server.spec["holderIdentity"] == "b"

    run_virtual(scenario())


def test_cancel_stops_leading_then_releases_so_a_standby_takes_over_at_once() -> None:
    server = LeaseServer()
    events: list[str] = []

    async def lead() -> None:
        try:
            await forever()
        finally:
            await asyncio.sleep(1)  # cleanup finishes before the lease is released
            events.append(f"stopped with holder {server.spec['holderIdentity']}")

    async def scenario() -> None:
        first = elector(FakeLeaseApi(server), "a")
        took_over = asyncio.Event()

        def on_leading_change(leading: bool) -> None:
            if leading:
                took_over.set()

        standby = LeaderElector(
            FakeLeaseApi(server), config("b"), on_leading_change=on_leading_change
        )
        first_task = asyncio.create_task(first.run(lead))
        await asyncio.sleep(1)
        standby_task = asyncio.create_task(standby.run(forever))
        await asyncio.sleep(10)
        assert not standby.is_leader
        first_task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first_task
        assert events == ["stopped with holder a"]
        assert not first.is_leader
        assert server.spec["holderIdentity"] == ""
        assert server.spec["leaseDurationSeconds"] == 1
        assert server.spec["leaseTransitions"] == 0
        released_at = now()
        await took_over.wait()
        assert now() - released_at <= 2 * 2.2
        assert server.spec["holderIdentity"] == "b"
        assert server.spec["leaseTransitions"] == 1
        standby_task.cancel()
        await asyncio.gather(standby_task, return_exceptions=True)

    run_virtual(scenario())


def test_without_release_on_cancel_the_lease_is_left_to_expire() -> None:
    server = LeaseServer()

    async def scenario() -> None:
        task = asyncio.create_task(
            elector(FakeLeaseApi(server), "a", release_on_cancel=False).run(forever)
        )
        await asyncio.sleep(1)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert server.spec["holderIdentity"] == "a"
        assert server.spec["leaseDurationSeconds"] == 15

    run_virtual(scenario())


def test_leading_coroutine_outcome_is_returned_after_releasing() -> None:
    server = LeaseServer()

    async def fail() -> None:
        await asyncio.sleep(3)
        raise RuntimeError("boom")

    async def scenario() -> None:
        await elector(FakeLeaseApi(server), "a").run(lambda: asyncio.sleep(3))
        assert server.spec["holderIdentity"] == ""
        with pytest.raises(RuntimeError, match="boom"):
            await elector(FakeLeaseApi(server), "b").run(fail)
        assert server.spec["holderIdentity"] == ""
        assert server.spec["leaseTransitions"] == 1

    run_virtual(scenario())


def test_a_conflicting_update_is_not_acquired_and_overwrites_nothing() -> None:
    server = LeaseServer()
    server.put({"holderIdentity": "", "leaseTransitions": 0})
    api = FakeLeaseApi(server)
    # Another candidate wins between our read and our write.
    api.before_write = lambda: server.put({"holderIdentity": "b", "leaseDurationSeconds": 15})

    async def scenario() -> None:
        candidate = elector(api, "a")
        task = asyncio.create_task(candidate.run(forever))
        await asyncio.sleep(1)
        assert not candidate.is_leader
        assert server.rejected == 1
        assert server.spec == {"holderIdentity": "b", "leaseDurationSeconds": 15}
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    run_virtual(scenario())


def test_losing_the_create_race_only_loses_the_round() -> None:
    server = LeaseServer()
    api = FakeLeaseApi(server)
    api.before_write = lambda: server.put({"holderIdentity": "b", "leaseDurationSeconds": 15})

    async def scenario() -> None:
        candidate = elector(api, "a")
        task = asyncio.create_task(candidate.run(forever))
        await asyncio.sleep(1)
        api.before_write = None
        assert not candidate.is_leader
        assert server.rejected == 1
        assert server.spec["holderIdentity"] == "b"
        await asyncio.sleep(20)
        assert candidate.is_leader
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    run_virtual(scenario())


class Cluster:
    """N candidate processes; each restarts after LeadershipLost, like a pod."""

    def __init__(self, latencies: list[float]) -> None:
        self.server = LeaseServer()
        self.apis = [FakeLeaseApi(self.server, latency) for latency in latencies]
        self.processes: dict[int, asyncio.Task[None]] = {}
        self.electors: dict[int, LeaderElector] = {}
        self.active: set[str] = set()
        self.overlaps: list[tuple[float, set[str]]] = []

    def start(self, index: int) -> None:
        if index not in self.processes:
            self.processes[index] = asyncio.create_task(self._process(index))

    async def stop(self, index: int) -> None:
        process = self.processes.pop(index, None)
        if process is not None:
            process.cancel()
            await asyncio.gather(process, return_exceptions=True)

    async def _process(self, index: int) -> None:
        identity = f"pod-{index}"

        async def lead() -> None:
            if self.active:
                self.overlaps.append((now(), {*self.active, identity}))
            self.active.add(identity)
            try:
                await forever()
            finally:
                self.active.discard(identity)

        while True:
            self.electors[index] = elector(self.apis[index], identity)
            try:
                await self.electors[index].run(lead)
            except LeadershipLost:
                await asyncio.sleep(1)

    def leaders(self) -> set[int]:
        return {
            index
            for index, candidate in self.electors.items()
            if index in self.processes and candidate.is_leader
        }


steps = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=3),
        st.sampled_from(["down", "up", "stop", "start"]),
        st.floats(min_value=0, max_value=25),
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(
    latencies=st.lists(st.floats(min_value=0, max_value=1), min_size=2, max_size=4),
    steps=steps,
)
def test_never_two_leaders_under_faults_restarts_and_interleavings(
    latencies: list[float], steps: list[tuple[int, str, float]]
) -> None:
    async def scenario() -> None:
        cluster = Cluster(latencies)
        for index in range(len(latencies)):
            cluster.start(index)
        for index, action, delay in steps:
            await asyncio.sleep(delay)
            index %= len(latencies)
            if action in ("down", "up"):
                cluster.apis[index].down = action == "down"
            elif action == "stop":
                await cluster.stop(index)
            else:
                cluster.start(index)
        for index, api in enumerate(cluster.apis):
            api.down = False
            cluster.start(index)
        await asyncio.sleep(45)
        assert cluster.overlaps == []
        assert len(cluster.active) == 1
        assert len(cluster.leaders()) == 1
        (leader,) = cluster.leaders()
        assert cluster.server.spec["holderIdentity"] == f"pod-{leader}"
        for index in list(cluster.processes):
            await cluster.stop(index)
        assert cluster.server.spec["holderIdentity"] == ""

    run_virtual(scenario())


def test_config_applies_client_go_checks() -> None:
    config("a")
    with pytest.raises(ValueError, match="greater than renew_deadline"):
        config("a", lease_duration=10)
    with pytest.raises(ValueError, match="retry_period\\*JitterFactor"):
        config("a", renew_deadline=2.4)
    with pytest.raises(ValueError, match="retry_period must be greater than zero"):
        config("a", retry_period=0)
    with pytest.raises(ValueError, match="identity"):
        config("")


def test_default_identity_prefers_pod_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAME", "podset-operator-7d9f-abcde")
    assert default_identity() == "podset-operator-7d9f-abcde"
    monkeypatch.delenv("POD_NAME")
    monkeypatch.setattr("socket.gethostname", lambda: "node-1")
    first, second = default_identity(), default_identity()
    assert re.fullmatch(r"node-1_[0-9a-f-]{36}", first)
    assert first != second


def test_micro_time_keeps_six_digits_and_utc() -> None:
    assert micro_time(EPOCH) == "2026-11-21T23:40:00.000000Z"
    assert MICRO_TIME.match(micro_time(datetime.now(UTC)))


async def test_kubernetes_lease_api_sends_and_reads_raw_json() -> None:
    """Against a stub API server: exact MicroTime on the wire, 404, 409, other errors."""
    stored: dict[str, Any] = {}
    seen: list[tuple[str, str, Any]] = []

    async def handle(request: web.Request) -> web.Response:
        body: Any = await request.json() if request.can_read_body else None
        seen.append((request.method, request.path, body))
        if request.method == "GET":
            if not stored:
                return web.json_response({"kind": "Status", "code": 404}, status=404)
            return web.json_response(stored)
        if request.method == "PUT" and body["metadata"]["resourceVersion"] != "1":
            return web.json_response({"kind": "Status", "code": 409}, status=409)
        if request.method == "PUT" and body["spec"]["holderIdentity"] == "explode":
            return web.json_response({"kind": "Status", "code": 500}, status=500)
        stored.clear()
        stored.update(body, metadata={**body["metadata"], "resourceVersion": "1"})
        return web.json_response(stored, status=201 if request.method == "POST" else 200)

    path = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
    app = web.Application()
    app.router.add_route("*", path, handle)
    app.router.add_route("*", path + "/{name}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        kube = KubeApi(Configuration(host=f"http://127.0.0.1:{port}"), user_agent="t", fence=None)
        api = KubernetesLeaseApi(kube)
        spec = {"holderIdentity": "a", "acquireTime": "2026-11-21T23:40:01.000000Z"}
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "spec": spec}

        assert await api.get(NS, NAME) is None
        created = await api.create(NS, lease | {"metadata": {"name": NAME}})
        assert created["metadata"]["resourceVersion"] == "1"
        assert await api.get(NS, NAME) == created
        method, path, body = seen[1]
        assert (method, path) == ("POST", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases")
        assert json.dumps(body["spec"]) == json.dumps(spec)

        replaced = await api.replace(NS, NAME, created)
        assert replaced == created
        stale = created | {"metadata": {"name": NAME, "resourceVersion": "0"}}
        with pytest.raises(LeaseConflictError):
            await api.replace(NS, NAME, stale)
        with pytest.raises(ApiException) as failure:
            await api.replace(NS, NAME, created | {"spec": {"holderIdentity": "explode"}})
        assert failure.value.status == 500
        assert seen[-1][1] == f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{NAME}"
    finally:
        await kube.close()
        await runner.cleanup()


async def test_kubernetes_lease_api_waits_for_the_first_watch_event_or_max_wait() -> None:
    """A standby's wait ends at the Lease's first change, at its deadline when nothing
    changes, and with an error (the elector then retries after its period) on an error
    status."""
    change = asyncio.Event()
    queries: list[dict[str, str]] = []

    async def watch(request: web.Request) -> web.StreamResponse:
        queries.append(dict(request.query))
        if request.query["resourceVersion"] == "gone":
            return web.json_response({"kind": "Status", "code": 410}, status=410)
        response = web.StreamResponse()
        await response.prepare(request)
        await change.wait()
        await response.write(b'{"type":"MODIFIED","object":{}}\n')
        await asyncio.sleep(30)  # a watch stays open
        return response

    app = web.Application()
    app.router.add_get(f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases", watch)
    runner = await serve(app)
    kube = KubeApi(Configuration(host=f"http://{address(runner)}"), user_agent="t", fence=None)
    api = KubernetesLeaseApi(kube)
    loop = asyncio.get_running_loop()
    try:
        began = loop.time()
        await api.wait_for_change(NS, NAME, "7", 0.3)
        assert 0.3 <= loop.time() - began < 1  # nothing changed: the deadline
        assert queries[0] == {
            "watch": "true",
            "fieldSelector": f"metadata.name={NAME}",
            "resourceVersion": "7",
            "timeoutSeconds": "1",
        }
        loop.call_later(0.2, change.set)
        began = loop.time()
        await api.wait_for_change(NS, NAME, "7", 10)
        assert 0.2 <= loop.time() - began < 2  # the change, long before the deadline
        with pytest.raises(ApiException) as gone:
            await api.wait_for_change(NS, NAME, "gone", 10)
        assert gone.value.status == 410
    finally:
        await kube.close()
        await runner.cleanup()


async def test_the_renew_deadline_counts_from_when_the_last_renewal_was_sent() -> None:
    """A standby counts the lease's expiry from when it saw the last renewal, at the latest as
    soon as the API server stored it: before it was answered. Lease 1 s, renew deadline 0.6 s,
    retry 0.2 s; the server answers the first renewal 0.4 s late and fails any after.
    Counted from the answer, the leader gave up 0.4 + 0.2 + 0.6 s after the renewal arrived, 0.2
    s after a standby could have taken the lease; counted from when it was sent, it gives up,
    and its fence refuses writes, 0.6 s after, before the lease can expire."""
    loop = asyncio.get_running_loop()
    stored: dict[str, Any] = {}
    renewals: list[float] = []  # when each renewal arrived

    async def handle(request: web.Request) -> web.Response:
        body: Any = await request.json() if request.can_read_body else None
        if request.method == "GET":
            if not stored:
                return web.json_response({"kind": "Status", "code": 404}, status=404)
            return web.json_response(stored)
        if request.method == "PUT":
            renewals.append(loop.time())
            if len(renewals) > 1:
                return web.json_response({"kind": "Status", "code": 500}, status=500)
            await asyncio.sleep(0.4)  # the late answer
        stored.update(body, metadata={**body["metadata"], "resourceVersion": str(len(renewals))})
        return web.json_response(stored, status=201 if request.method == "POST" else 200)

    path = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"
    app = web.Application()
    app.router.add_route("*", path, handle)
    app.router.add_route("*", path + "/{name}", handle)
    runner = await serve(app)
    fence = WriteFence()
    url = f"http://{address(runner)}"
    kube = KubeApi(Configuration(host=url), user_agent="t", fence=fence)
    candidate = LeaderElector(
        KubernetesLeaseApi(kube),
        config("a", lease_duration=1, renew_deadline=0.6, retry_period=0.2),
        fence=fence,
    )

    async def lead() -> None:
        fence.open()
        await forever()

    try:
        async with asyncio.timeout(5):
            with pytest.raises(LeadershipLost, match=r"within 0\.6s"):
                await candidate.run(lead)
        lost_at = loop.time()
    finally:
        await kube.close()
        await runner.cleanup()
    assert lost_at < renewals[0] + 1, f"lost {lost_at - renewals[0]:.2f} s after the renewal"
    assert not fence.is_open
