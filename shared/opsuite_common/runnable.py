"""The parts of an operator process, each started and stopped the same way, as controller-runtime's
manager runs its ``Runnable``\\ s.

A :class:`Runnable` runs until told to stop, then winds down and returns. Those that do not need
leadership (the metrics and probes servers) run from start to exit, each in :func:`running`;
those that do (the watchdog, the controllers, kopf's watches) run in one group, :func:`run_group`,
while the process leads. Order matters both ways: each part starts once the one before it has
(the metrics server listens before the probes answer; the controllers' workers exist before kopf
starts), and a leader told to stop stops its parts in turn (its controllers finish the
reconciles in hand, then the write fence closes, then its watches stop).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Protocol


class Runnable(Protocol):
    """A part of an operator process that the manager starts and stops."""

    @property
    def needs_leader(self) -> bool:
        """Whether it runs only while the process leads, or from start to exit."""
        ...

    @property
    def started(self) -> asyncio.Event:
        """Set once it is up (a server: listening); the part after it starts then. Set it
        without waiting on the network: until then no stop is heard (kopf's watches are
        started once their tasks are spawned, not once kopf is ready)."""
        ...

    async def run(self, stop: asyncio.Event) -> None:
        """Run until ``stop`` is set, then wind down and return. Returning or raising before
        that ends the group it runs in."""
        ...


async def _start(runnable: Runnable, stop: asyncio.Event) -> asyncio.Task[None]:
    """``runnable.run(stop)`` as a task, once it has started; raise what it raised instead."""
    task = asyncio.create_task(runnable.run(stop), name=type(runnable).__name__)
    started = asyncio.create_task(runnable.started.wait())
    try:
        await asyncio.wait((task, started), return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()
    except BaseException:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise
    finally:
        started.cancel()
    return task


@contextlib.asynccontextmanager
async def running(runnable: Runnable) -> AsyncIterator[None]:
    """Run ``runnable`` for the body of the ``with``, which begins once it has started; at the
    end, tell it to stop and wait for it."""
    stop = asyncio.Event()
    task = await _start(runnable, stop)
    try:
        yield
    finally:
        stop.set()
        await task


async def run_group(runnables: Sequence[Runnable], stop: asyncio.Event) -> None:
    """Run ``runnables``, each started once the one before it has, until ``stop`` is set or one
    of them ends. Stopped, they stop in the order given, each told once the one before it has
    returned. One that returns or fails by itself ends the group at once: the others are
    cancelled and its error, if any, raised.

    Every task of the group is created before the last runnable starts: kopf, the last of a
    leader's, waits on its way out for the tasks created after it started."""
    stopping = asyncio.create_task(stop.wait(), name="stopping")
    tasks: list[asyncio.Task[None]] = []
    stops: list[asyncio.Event] = []
    try:
        for runnable in runnables:
            stops.append(asyncio.Event())
            tasks.append(await _start(runnable, stops[-1]))
        await asyncio.wait((stopping, *tasks), return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            if task.done():
                task.result()  # a failure ends the group at once
        if stopping.done():
            for own_stop, task in zip(stops, tasks, strict=True):
                own_stop.set()
                await task
    finally:
        stopping.cancel()
        for task in tasks:
            task.cancel()
        await asyncio.gather(stopping, *tasks, return_exceptions=True)
