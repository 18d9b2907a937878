"""A reconcile loop: a work queue of object keys and N workers, as controller-runtime runs one.

Watch handlers only enqueue keys; a worker takes a key, calls the operator's ``reconcile``
with it, and requeues on error (with backoff), on request, or after a delay. One key is never
reconciled by two workers at once. Each outcome is counted under controller-runtime's metric
names.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from opsuite_common.fence import WriteFence, WriteFenced
from opsuite_common.logs import reconciling
from opsuite_common.metrics import ReconcileMetrics, WorkQueueMetrics
from opsuite_common.store import ObjectKey
from opsuite_common.workqueue import ShutDown, WorkQueue

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Result:
    """What a reconcile asks for: nothing, a requeue now, or a requeue after a delay."""

    requeue: bool = False
    requeue_after: float | None = None


class TerminalError(Exception):
    """An error retrying cannot fix (reported, not requeued), like reconcile.TerminalError."""


Reconciler = Callable[[ObjectKey], Awaitable[Result | None]]


class Controller:
    """A named reconcile loop over object keys."""

    def __init__(self, name: str, reconcile: Reconciler, *, max_concurrent: int = 1) -> None:
        self.name = name
        self._reconcile = reconcile
        self._max_concurrent = max_concurrent
        self.metrics = ReconcileMetrics(name, max_concurrent, terminal_errors=(TerminalError,))
        self.queue: WorkQueue[ObjectKey] = WorkQueue(metrics=WorkQueueMetrics(name))

    def enqueue(self, key: ObjectKey, *, after: float = 0.0) -> None:
        """Ask for ``key`` to be reconciled (deduplicated while waiting)."""
        self.queue.add_after(key, after)

    def start(self, synced: asyncio.Event) -> list[asyncio.Task[None]]:
        """Start the workers, which reconcile once ``synced`` is set. Shutting the queue down
        ends each of them after the key in hand; cancel them to stop at once.

        Workers are created here, synchronously, so that they exist before kopf starts (the
        manager starts kopf once they do): kopf, on its way out, stops every task created after
        it started.
        They wait for ``synced`` (every cache filled by its initial listing), so that no
        reconcile acts on a half-filled cache, as controller-runtime waits for cache sync.
        """
        return [
            asyncio.create_task(self._worker(synced), name=f"{self.name}-worker-{i}")
            for i in range(self._max_concurrent)
        ]

    async def _worker(self, synced: asyncio.Event) -> None:
        await synced.wait()
        while True:
            try:
                key = await self.queue.get()
            except ShutDown:
                return
            try:
                await self._process(key)
            finally:
                self.queue.done(key)

    async def _process(self, key: ObjectKey) -> None:
        with reconciling(self.name, key):
            await self._reconcile_once(key)

    async def _reconcile_once(self, key: ObjectKey) -> None:
        try:
            with self.metrics.track() as outcome:
                result = await self._reconcile(key) or Result()
                outcome.requeue = result.requeue
                outcome.requeue_after = result.requeue_after or 0.0
        except WriteFenced as exc:
            # Leadership ended during the reconcile; the worker is about to be cancelled.
            log.info("reconcile %s/%s stopped: %s", *key, exc)
            return
        except TerminalError as exc:
            log.error("reconcile %s/%s: %s", *key, exc)
            self.queue.forget(key)
            return
        except Exception:
            delay = self.queue.add_rate_limited(key)
            log.exception("reconcile %s/%s failed; retrying in %.3f s", *key, delay)
            return
        if result.requeue_after is not None:
            self.queue.forget(key)
            # controller-runtime's AddAfter, which client-go counts as a retry.
            self.queue.add_after(key, result.requeue_after, retry=True)
        elif result.requeue:
            self.queue.add_rate_limited(key)
        else:
            self.queue.forget(key)


class Controllers:
    """The operator's reconcile loops, run while the process leads: a
    :class:`~opsuite_common.runnable.Runnable`. Their workers reconcile once ``gate`` is set
    (every cache synced). Told to stop, it hands out no new key and lets the reconciles in hand
    run for up to ``grace`` seconds; then (or at once, cancelled) it closes ``fence``, so that
    nothing those still running do reaches the API server, and cancels them."""

    needs_leader = True

    def __init__(self, gate: asyncio.Event, fence: WriteFence, grace: float) -> None:
        self._gate = gate
        self._fence = fence
        self._grace = grace
        self.all: list[Controller] = []
        self.started = asyncio.Event()
        """Set once the workers exist."""

    def add(self, controller: Controller) -> None:
        """Run ``controller`` too."""
        self.all.append(controller)

    async def run(self, stop: asyncio.Event) -> None:
        """Run every controller's workers (see :meth:`Controller.start`) until ``stop`` is
        set, then stop as the class says."""
        workers = [task for c in self.all for task in c.start(self._gate)]
        self.started.set()
        try:
            await stop.wait()
            await self._finish(workers)
        finally:
            # No write may leave once the workers are cancelled, stopped or not (the leader
            # failing): a cancelled reconcile's own clean-up must not reach the API server.
            self._fence.close()
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    async def _finish(self, workers: list[asyncio.Task[None]]) -> None:
        """Hand out no more keys and wait, up to the grace, for the reconciles in hand to end
        (before the gate opens none has started: the workers wait for it)."""
        for controller in self.all:
            controller.queue.shut_down()
        if not workers or not self._gate.is_set():
            return
        _, running = await asyncio.wait(workers, timeout=self._grace)
        if running:
            log.warning(
                "%d reconciles still running after %.0f s; stopping them",
                len(running),
                self._grace,
            )
