"""The write fence: no write leaves once leadership ends; writes in flight are drained (#16, 9)."""

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web

from opsuite_common.fence import WriteFence, WriteFenced
from opsuite_common.kube import KubeApi
from opsuite_common.kubeconfig import Configuration


def test_a_closed_fence_refuses_writes_and_counts_them() -> None:
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
