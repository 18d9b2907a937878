"""Health probe server, event loop monitor and watch freshness."""

import asyncio
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator

import aiohttp
import pytest

from opsuite_common.health import (
    EventLoopMonitor,
    HealthServer,
    WatchFreshness,
    parse_bind_address,
    run_check,
)
from opsuite_testkit import FakeClock


@pytest.mark.parametrize(
    ("bind", "expected"),
    [
        (":8081", (None, 8081)),
        ("127.0.0.1:8081", ("127.0.0.1", 8081)),
        ("0.0.0.0:8081", ("0.0.0.0", 8081)),
        ("[::1]:9000", ("::1", 9000)),
        ("127.0.0.1:0", ("127.0.0.1", 0)),
        ("0", None),
        ("", None),
    ],
)
def test_parse_bind_address(bind: str, expected: tuple[str | None, int] | None) -> None:
    assert parse_bind_address(bind) == expected


@pytest.mark.parametrize("bind", ["8081", "localhost:", ":http", ":65536", "host:-1"])
def test_parse_bind_address_rejects(bind: str) -> None:
    with pytest.raises(ValueError, match="invalid bind address"):
        parse_bind_address(bind)


def test_run_check_normalises_results() -> None:
    def boom() -> str | None:
        raise RuntimeError("cache not synced")

    def bare() -> str | None:
        raise RuntimeError

    assert run_check(lambda: None) is None
    assert run_check(lambda: "lagging") == "lagging"
    assert run_check(lambda: "") == "failed"
    assert run_check(boom) == "cache not synced"
    assert run_check(bare) == "RuntimeError"


@pytest.fixture
async def health() -> AsyncIterator[tuple[HealthServer, str]]:
    server = HealthServer("127.0.0.1:0", max_loop_lag=None)
    port = await server.start()
    assert port is not None
    assert server.port == port
    yield server, f"http://127.0.0.1:{port}"
    await server.stop()


async def fetch(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


async def test_probes_pass_with_ok_and_list_checks_when_verbose(
    health: tuple[HealthServer, str],
) -> None:
    server, base = health
    server.add_healthz_check("ping", lambda: None)
    server.add_readyz_check("informers", lambda: None)
    assert await fetch(f"{base}/healthz") == (200, "ok")
    assert await fetch(f"{base}/readyz") == (200, "ok")
    assert await fetch(f"{base}/readyz?verbose") == (
        200,
        "[+]informers ok\nreadyz check passed\n",
    )


async def test_failing_checks_give_500_and_the_kubernetes_listing(
    health: tuple[HealthServer, str],
) -> None:
    server, base = health

    def not_synced() -> str | None:
        raise RuntimeError("cache not synced")

    server.add_readyz_check("zeta", lambda: None)
    server.add_readyz_check("informers", not_synced)
    server.add_readyz_check("leader", lambda: "no lease")
    status, body = await fetch(f"{base}/readyz")
    assert status == 500
    assert body == (
        "[-]informers failed: cache not synced\n"
        "[-]leader failed: no lease\n"
        "[+]zeta ok\n"
        "readyz check failed\n"
    )
    assert await fetch(f"{base}/healthz") == (200, "ok")


async def test_all_interfaces_bind_reports_one_reachable_port() -> None:
    server = HealthServer(":0")
    port = await server.start()
    try:
        assert await fetch(f"http://127.0.0.1:{port}/healthz") == (200, "ok")
        if socket.has_dualstack_ipv6():
            assert await fetch(f"http://[::1]:{port}/healthz") == (200, "ok")
    finally:
        await server.stop()


async def test_disabled_and_stopped_servers_do_not_listen() -> None:
    assert await HealthServer("0").start() is None
    server = HealthServer("127.0.0.1:0")
    port = await server.start()
    await server.stop()
    assert server.port is None
    with pytest.raises(aiohttp.ClientConnectionError):
        await fetch(f"http://127.0.0.1:{port}/healthz")


async def test_busy_port_fails_start() -> None:
    first = HealthServer("127.0.0.1:0")
    port = await first.start()
    try:
        with pytest.raises(OSError, match="in use"):
            await HealthServer(f"127.0.0.1:{port}").start()
    finally:
        await first.stop()


async def test_healthz_reports_a_blocked_event_loop() -> None:
    """The probe thread answers while this loop is blocked, and says so."""
    server = HealthServer("127.0.0.1:0", max_loop_lag=0.2)
    port = await server.start()
    answers: list[tuple[int, str]] = []

    def probe() -> None:
        time.sleep(0.5)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
                answers.append((r.status, r.read().decode()))
        except urllib.error.HTTPError as error:
            answers.append((error.code, error.read().decode()))

    try:
        assert await fetch(f"http://127.0.0.1:{port}/healthz") == (200, "ok")
        prober = threading.Thread(target=probe)
        prober.start()
        time.sleep(0.8)  # noqa: ASYNC251 - blocking the loop is the point
        prober.join()
        ((status, body),) = answers
        assert status == 500
        assert body.startswith("[-]eventloop failed: event loop unresponsive for 0.")
        await asyncio.sleep(0.1)
        assert await fetch(f"http://127.0.0.1:{port}/healthz") == (200, "ok")
    finally:
        await server.stop()


async def test_event_loop_monitor_fails_when_ticks_stop() -> None:
    clock = FakeClock()
    monitor = EventLoopMonitor(10, clock)
    assert monitor() == "not started"
    monitor.start()
    assert monitor() is None
    clock.now += 10.5
    assert monitor() == "event loop unresponsive for 10.5s (limit 10s)"
    await asyncio.sleep(0)  # the ticker runs
    assert monitor() is None
    await monitor.stop()
    assert monitor() == "not started"


def test_watch_freshness_fails_only_for_stale_watches() -> None:
    clock = FakeClock()
    watches = WatchFreshness(clock)
    assert watches() is None
    watches.register("pods", 60)
    watches.register("podsets", 120)
    clock.now += 59
    assert watches() is None
    clock.now += 2
    assert watches() == "watch pods idle for 61s (timeout 60s)"
    watches.mark("pods")
    assert watches() is None
    clock.now += 100
    assert watches() == (
        "watch pods idle for 100s (timeout 60s); watch podsets idle for 161s (timeout 120s)"
    )
    with pytest.raises(KeyError, match="configmaps"):
        watches.mark("configmaps")
