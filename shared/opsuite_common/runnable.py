"""The parts of an operator process, each started and stopped through one interface, as
controller-runtime's manager runs its Runnables: the probes and metrics servers, the watches
(:class:`~opsuite_common.kopfwatch.runner.KopfWatches`) and the reconcile loops
(:class:`~opsuite_common.controller.Controllers`); the leader elector runs the latter two while
it leads (:meth:`~opsuite_common.manager.Manager.lead`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Protocol


class Runnable(Protocol):
    """Started once, stopped once; ``stop`` is at once, and safe after a failed ``start``."""

    async def start(self) -> object:
        """Start; return once running (what is returned is the runnable's own business)."""
        ...

    async def stop(self) -> None:
        """Stop at once and release what was held."""
        ...


@asynccontextmanager
async def running(runnables: Sequence[Runnable]) -> AsyncIterator[None]:
    """Start ``runnables`` in order (each once the one before runs) and, on the way out, stop
    those started in reverse order."""
    started: list[Runnable] = []
    try:
        for runnable in runnables:
            started.append(runnable)
            await runnable.start()
        yield
    finally:
        for runnable in reversed(started):
            await runnable.stop()
