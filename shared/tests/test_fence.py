"""The write fence: no write leaves once leadership ends, nor past the renew deadline of the
last renewal; writes in flight are drained (#16, 9; #32, 2)."""

import asyncio
import contextlib
import itertools
import json
import math
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from opsuite_common.fence import WriteFence, WriteFenced
from opsuite_common.kube import KubeApi
from opsuite_common.kubeconfig import Configuration, load_configuration
from opsuite_common.leader_election import (
    LeaderElectionConfig,
    LeaderElector,
    LeadershipLost,
)
from opsuite_common.lease_api import KubernetesLeaseApi


async def test_a_closed_fence_refuses_writes_and_counts_them() -> None:
    fence = WriteFence()
    with pytest.raises(WriteFenced, match="POST /x: refused"), fence.write("POST /x"):
        pytest.fail("a write left through a fence that was never opened")
    fence.open()
    assert fence.refused == 0
    with fence.write("POST /x"):
        assert fence.in_flight == 1
    assert fence.in_flight == 0
    fence.close()
    with pytest.raises(WriteFenced), fence.write("PATCH /y"):
        pytest.fail("a write left after close()")
    assert fence.refused == 1
    assert not fence.is_open


async def test_past_its_deadline_an_open_fence_refuses_writes_on_its_own() -> None:
    """The elector sets the deadline at each renewal; should it not run again before then (the
    event loop was blocked), the fence still refuses: nothing closed it, its deadline passed."""
    fence = WriteFence()
    fence.open()
    now = asyncio.get_running_loop().time()
    fence.lead_until(now + 60)
    with fence.write("POST /x"):
        assert fence.in_flight == 1
    assert fence.is_open
    fence.lead_until(now)  # the loop's clock has moved on since: it has passed
    with pytest.raises(WriteFenced, match="POST /y: refused"), fence.write("POST /y"):
        pytest.fail("a write left after the renew deadline")
    assert fence.refused == 1
    assert not fence.is_open


async def test_drain_waits_for_the_writes_in_flight_and_gives_up_after_max_wait() -> None:
    fence = WriteFence()
    fence.open()
    answered = asyncio.Event()
    admitted = asyncio.Event()

    async def write() -> None:
        with fence.write("POST /x"):
            admitted.set()
            await answered.wait()

    writer = asyncio.create_task(write())
    await admitted.wait()
    fence.close()
    assert fence.in_flight == 1  # admitted before the close: it is on its way
    assert not await fence.drain(0.05)
    draining = asyncio.create_task(fence.drain(5))
    await asyncio.sleep(0.05)
    assert not draining.done()
    answered.set()
    assert await draining
    await writer


@dataclass
class SlowServer:
    """Records each write it receives; each takes ``delay`` seconds to answer."""

    delay: float = 0.3
    writes: list[str] = field(default_factory=list)
    reads: int = 0
    two_writes: asyncio.Event = field(default_factory=asyncio.Event)


@pytest.fixture
async def slow_server() -> AsyncIterator[tuple[str, SlowServer]]:
    state = SlowServer()

    async def create(request: web.Request) -> web.Response:
        body = await request.json()
        state.writes.append(body["metadata"]["name"])
        if len(state.writes) == 2:
            state.two_writes.set()
        await asyncio.sleep(state.delay)
        return web.json_response(body, status=201)

    async def get(request: web.Request) -> web.Response:
        state.reads += 1
        return web.json_response({"kind": "Pod", "metadata": {"name": "a"}})

    app = web.Application()
    app.router.add_post("/api/v1/namespaces/ns/pods", create)
    app.router.add_get("/api/v1/namespaces/ns/pods/{name}", get)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"127.0.0.1:{runner.addresses[0][1]}", state
    finally:
        await runner.cleanup()


async def test_writes_queued_when_the_fence_closes_are_never_sent(
    slow_server: tuple[str, SlowServer],
) -> None:
    """Two in flight at most, six creates: the two in flight when leadership ends are answered
    (and drained); the four still waiting for their turn are refused and never reach the
    server. Reads still pass."""
    host, server = slow_server
    fence = WriteFence()
    fence.open()
    kube = KubeApi(
        Configuration(host=f"http://{host}"), user_agent="test", fence=fence, max_parallel=2
    )
    path = "/api/v1/namespaces/ns/pods"
    futures = [kube.create(path, {"metadata": {"name": f"p{i}"}}) for i in range(6)]
    await server.two_writes.wait()
    fence.close()
    assert await fence.drain(5)
    results = await asyncio.gather(*futures, return_exceptions=True)
    assert sorted(server.writes) == ["p0", "p1"]
    assert [isinstance(r, WriteFenced) for r in results] == [False] * 2 + [True] * 4
    assert fence.refused == 4
    assert await kube.get(f"{path}/a") is not None
    assert server.reads == 1
    assert len(server.writes) == 2
    await kube.close()


async def test_a_write_whose_caller_stops_waiting_stays_in_flight_until_answered(
    slow_server: tuple[str, SlowServer],
) -> None:
    """Leadership ends: the fence closes, then the leading task (and the reconcile awaiting a
    write) is cancelled. The write was sent; it may still reach the API server, so it stays in
    flight, and the Lease is not released, until its answer comes."""
    host, server = slow_server
    fence = WriteFence()
    fence.open()
    kube = KubeApi(Configuration(host=f"http://{host}"), user_agent="test", fence=fence)
    path = "/api/v1/namespaces/ns/pods"

    async def reconcile() -> None:
        await asyncio.gather(*(kube.create(path, {"metadata": {"name": f"p{i}"}}) for i in (0, 1)))

    reconciling = asyncio.create_task(reconcile())
    await server.two_writes.wait()
    fence.close()
    reconciling.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reconciling
    assert fence.in_flight == 2
    assert not await fence.drain(0.05)
    assert await fence.drain(5)  # the server answers after its delay
    assert sorted(server.writes) == ["p0", "p1"]
    await kube.close()


LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/ns/leases"
CONFIGMAPS = "/api/v1/namespaces/ns/configmaps"


@dataclass
class Plane:
    """What the stand-in API server holds: one Lease, which a standby takes the moment it
    expires (``leaseDurationSeconds`` after the holder's last write arrived), and the arrival
    times (time.monotonic) of the ConfigMap creates."""

    lease: dict[str, Any] | None = None
    version: int = 0
    expires: float = math.inf
    """When the lease expires, and the standby takes it."""
    taken_at: float | None = None
    writes: list[float] = field(default_factory=list)
    """When each create arrived."""
    late: list[float] = field(default_factory=list)
    """How long after the standby took the lease each create that arrived later did."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, method: str, path: str, body: dict[str, Any] | None) -> tuple[int, bytes]:
        """The status and JSON body of one request."""
        with self.lock:
            status, answer = self._answer(method, path, body)
            return status, json.dumps(answer).encode()

    def _answer(self, method: str, path: str, body: dict[str, Any] | None) -> tuple[int, object]:
        now = time.monotonic()
        if now >= self.expires:
            assert self.lease is not None
            self.taken_at, self.expires = self.expires, math.inf
            self.version += 1
            self.lease["spec"]["holderIdentity"] = "standby"
            self.lease["metadata"]["resourceVersion"] = str(self.version)
        if path == CONFIGMAPS:
            self.writes.append(now)
            if self.taken_at is not None:
                self.late.append(now - self.taken_at)
            return 201, body
        if method == "GET":
            return (
                (404, {"kind": "Status", "code": 404}) if self.lease is None else (200, self.lease)
            )
        assert body is not None
        if method == "PUT" and (
            self.lease is None
            or body["metadata"]["resourceVersion"] != self.lease["metadata"]["resourceVersion"]
        ):
            return 409, {"kind": "Status", "code": 409}
        if method == "POST" and self.lease is not None:
            return 409, {"kind": "Status", "code": 409}
        self.version += 1
        self.lease = {
            **body,
            "metadata": {**body["metadata"], "resourceVersion": str(self.version)},
        }
        self.expires = now + body["spec"]["leaseDurationSeconds"]
        return (201 if method == "POST" else 200), self.lease


class PlaneHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as KubeApi's connections expect
    server: "PlaneServer"

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        status, data = self.server.plane.answer(self.command, self.path, body)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = _handle

    def log_message(self, *args: Any) -> None:
        return


class PlaneServer(ThreadingHTTPServer):
    """Serves a :class:`Plane` from threads of its own: it answers while the operator's event
    loop is blocked, as a real API server would."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), PlaneHandler)
        self.plane = Plane()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet about the client closing its keep-alive connections at the end."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@pytest.fixture
def plane_server() -> Iterator[PlaneServer]:
    server = PlaneServer()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


SLOW_PLUGIN = """\
import datetime, json, pathlib, sys, time
runs, lifetime, slowness = pathlib.Path(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
run = len(runs.read_text().splitlines()) if runs.exists() else 0
with runs.open("a") as log:
    log.write(f"{run}\\n")
if run:
    time.sleep(slowness)  # a refresh, as slow as a cloud provider's plugin can be
expiry = datetime.datetime.now(datetime.UTC) + datetime.timedelta(
    seconds=lifetime if run == 0 else 3600
)
status = {"token": f"t{run}", "expirationTimestamp": expiry.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}
print(json.dumps(
    {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": status}
))
"""


async def test_no_write_arrives_once_a_standby_could_lead_while_an_exec_plugin_refreshes(
    plane_server: PlaneServer, tmp_path: Path
) -> None:
    """#32 item 2: the token an exec credential plugin gave expires 1 s after the start and the
    plugin then takes 1.5 s (a cloud provider's can take seconds). Lease 1 s, renew deadline
    0.6 s, retry 0.2 s; three workers create ConfigMaps throughout. Run on the event loop, the
    plugin blocked it: no renewal, and nothing to close the fence, until it returned, when the
    write that had asked for the token and those queued behind it went out, after the standby
    could have taken the Lease. Now the plugin runs off the loop, the renewal waits for the
    token and misses its deadline, and whatever waits for the token is refused at the fence."""
    plugin = tmp_path / "plugin.py"
    plugin.write_text(SLOW_PLUGIN)
    runs = tmp_path / "runs"
    user = {"exec": {"command": sys.executable, "args": [str(plugin), str(runs), "1.0", "1.5"]}}
    server = f"http://127.0.0.1:{plane_server.server_address[1]}"
    (tmp_path / "kubeconfig").write_text(
        json.dumps(
            {
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    configuration = load_configuration({"KUBECONFIG": str(tmp_path / "kubeconfig")})
    fence = WriteFence()
    kube = KubeApi(configuration, user_agent="test", fence=fence)
    elector = LeaderElector(
        KubernetesLeaseApi(kube),
        LeaderElectionConfig(
            name="lock",
            namespace="ns",
            identity="leader",
            lease_duration=1,
            renew_deadline=0.6,
            retry_period=0.2,
        ),
        fence=fence,
    )

    async def worker(index: int) -> None:
        for serial in itertools.count():
            with contextlib.suppress(WriteFenced):
                await kube.create(CONFIGMAPS, {"metadata": {"name": f"w{index}-{serial}"}})
            await asyncio.sleep(0.05)  # paces the workers; proves nothing

    async def lead() -> None:
        fence.open()  # as Manager.lead does
        await asyncio.gather(*(worker(index) for index in range(3)))

    try:
        async with asyncio.timeout(10):
            with pytest.raises(LeadershipLost):
                await elector.run(lead)
            assert await configuration.authorization() == "Bearer t1"  # the slow run's token
    finally:
        await kube.close()
    plane = plane_server.plane
    assert plane.writes, "no write was made while leading"
    assert plane.late == [], "writes arrived these seconds after a standby could lead"
    assert runs.read_text().splitlines() == ["0", "1"]
