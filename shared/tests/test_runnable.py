"""How the manager starts and stops the parts of a process (``opsuite_common.runnable``): each
starts once the one before it has; told to stop, the leader's parts stop one after the other;
one that fails stops the rest at once."""

from __future__ import annotations

import asyncio

import pytest

from opsuite_common.runnable import run_group, running


class Part:
    """A runnable that records its life in ``log``. It starts once ``up`` is set (unless
    ``failure`` is set by then, which it raises instead) and runs until stopped, or until
    ``done`` is set: then it returns, or raises ``failure`` if set by then."""

    needs_leader = True

    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log
        self.failure: Exception | None = None
        self.up = asyncio.Event()
        self.up.set()
        self.done = asyncio.Event()
        self.started = asyncio.Event()

    async def run(self, stop: asyncio.Event) -> None:
        self.log.append(f"{self.name} runs")
        try:
            await self.up.wait()
            if self.failure is not None:
                raise self.failure
            self.started.set()
            ending, stopping = (
                asyncio.create_task(self.done.wait()),
                asyncio.create_task(stop.wait()),
            )
            await asyncio.wait((ending, stopping), return_when=asyncio.FIRST_COMPLETED)
            ending.cancel()
            stopping.cancel()
            if not stop.is_set():
                if self.failure is not None:
                    raise self.failure
                self.log.append(f"{self.name} ended")
                return
            self.log.append(f"{self.name} stopping")
            await asyncio.sleep(0.01)
            self.log.append(f"{self.name} stopped")
        except asyncio.CancelledError:
            self.log.append(f"{self.name} cancelled")
            raise


async def test_each_part_starts_once_the_one_before_it_has() -> None:
    log: list[str] = []
    first, second = Part("first", log), Part("second", log)
    first.up.clear()
    stop = asyncio.Event()
    group = asyncio.create_task(run_group((first, second), stop))
    await asyncio.sleep(0.05)
    assert log == ["first runs"]
    first.up.set()
    await asyncio.wait_for(second.started.wait(), 5)
    assert log == ["first runs", "second runs"]
    stop.set()
    await asyncio.wait_for(group, 5)


async def test_stopped_the_parts_stop_in_the_order_given_each_once_the_one_before_returned() -> (
    None
):
    log: list[str] = []
    parts = [Part(name, log) for name in ("watchdog", "controllers", "watches")]
    stop = asyncio.Event()
    group = asyncio.create_task(run_group(parts, stop))
    await asyncio.wait_for(parts[-1].started.wait(), 5)
    log.clear()
    stop.set()
    await asyncio.wait_for(group, 5)
    assert log == [
        "watchdog stopping",
        "watchdog stopped",
        "controllers stopping",
        "controllers stopped",
        "watches stopping",
        "watches stopped",
    ]


async def test_a_part_that_fails_cancels_the_others_and_its_error_is_raised() -> None:
    log: list[str] = []
    first, failing, last = Part("first", log), Part("failing", log), Part("last", log)
    group = asyncio.create_task(run_group((first, failing, last), asyncio.Event()))
    await asyncio.wait_for(last.started.wait(), 5)
    failing.failure = LookupError("dead")
    failing.done.set()
    with pytest.raises(LookupError, match="dead"):
        await asyncio.wait_for(group, 5)
    assert sorted(log[-2:]) == ["first cancelled", "last cancelled"]


async def test_a_part_that_ends_by_itself_ends_the_group() -> None:
    log: list[str] = []
    first, second = Part("first", log), Part("second", log)
    group = asyncio.create_task(run_group((first, second), asyncio.Event()))
    await asyncio.wait_for(second.started.wait(), 5)
    second.done.set()
    await asyncio.wait_for(group, 5)
    assert log[-2:] == ["second ended", "first cancelled"]


async def test_running_returns_once_the_part_started_and_stops_it_at_the_end() -> None:
    log: list[str] = []
    server = Part("server", log)
    server.up.clear()
    entered = asyncio.Event()

    async def body() -> None:
        async with running(server):
            entered.set()
            log.append("body")

    task = asyncio.create_task(body())
    await asyncio.sleep(0.05)
    assert not entered.is_set()
    server.up.set()
    await asyncio.wait_for(task, 5)
    assert log == ["server runs", "body", "server stopping", "server stopped"]


async def test_running_raises_what_keeps_the_part_from_starting() -> None:
    server = Part("server", [])
    server.failure = OSError("address in use")
    with pytest.raises(OSError, match="address in use"):
        async with running(server):
            pytest.fail("the body runs only once the part has started")
