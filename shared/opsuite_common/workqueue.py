"""A controller-runtime style work queue for reconcile keys.

Semantics of client-go's workqueue: a key waiting in the queue is there once however often it is
added; a key is never handed to two workers at once (an add while it is being processed marks it
dirty and it comes back when the worker is done); a key waits for a delayed add at most once, at
the earliest time asked (client-go's delaying queue); failures are retried with per-key
exponential backoff (5 ms doubling up to 1000 s, as controller-runtime's default rate limiter),
reset by ``forget`` after a success.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

BASE_DELAY = 0.005
MAX_DELAY = 1000.0


class ShutDown(Exception):
    """The queue was shut down; workers stop."""


@dataclass
class WorkQueue(Generic[K]):
    """Deduplicating, rate-limited queue of keys (asyncio, one event loop)."""

    base_delay: float = BASE_DELAY
    max_delay: float = MAX_DELAY
    on_queued: Callable[[bool], None] | None = None
    """Called when a key enters the queue, with True for a rate-limited retry."""
    on_dequeued: Callable[[], None] | None = None
    """Called when a worker takes a key."""
    _queue: deque[K] = field(default_factory=deque)
    _dirty: set[K] = field(default_factory=set)
    _processing: set[K] = field(default_factory=set)
    _failures: dict[K, int] = field(default_factory=dict)
    _delayed: list[tuple[float, int, K]] = field(default_factory=list)
    _waiting: dict[K, tuple[float, int, bool]] = field(default_factory=dict)
    """The live delayed entry of each key: (due time, sequence, retry); others are stale."""
    _seq: itertools.count[int] = field(default_factory=itertools.count)
    _waiters: deque[asyncio.Future[None]] = field(default_factory=deque)
    _shutdown: bool = False
    _timer: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, key: K, *, retry: bool = False) -> None:
        """Queue ``key`` now (no-op if already waiting; deferred if being processed)."""
        if self._shutdown or key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._enqueue(key, retry)

    def add_after(self, key: K, delay: float, *, retry: bool = False) -> None:
        """Queue ``key`` after ``delay`` seconds; a delayed add already due sooner wins."""
        if delay <= 0:
            self.add(key, retry=retry)
            return
        due = asyncio.get_running_loop().time() + delay
        waiting = self._waiting.get(key)
        if waiting is not None and waiting[0] <= due:
            self._waiting[key] = (waiting[0], waiting[1], waiting[2] or retry)
            return
        seq = next(self._seq)
        self._waiting[key] = (due, seq, retry)
        heapq.heappush(self._delayed, (due, seq, key))
        if self._delayed[0][1] == seq:
            self._arm_timer()

    def add_rate_limited(self, key: K) -> float:
        """Queue ``key`` after its next backoff delay; return that delay."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        delay: float = min(self.base_delay * (2**failures), self.max_delay)
        self.add_after(key, delay, retry=True)
        return delay

    def forget(self, key: K) -> None:
        """Reset the backoff of ``key`` (after a successful reconcile)."""
        self._failures.pop(key, None)

    def retries(self, key: K) -> int:
        """How many times ``key`` has been requeued after a failure."""
        return self._failures.get(key, 0)

    async def get(self) -> K:
        """Wait for the next key and mark it as being processed."""
        while not self._queue and not self._shutdown:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                # Pass a wake-up this worker can no longer use on to the next one.
                if waiter.done() and not waiter.cancelled():
                    self._notify()
                raise
        if self._shutdown:
            raise ShutDown
        key = self._queue.popleft()
        if self.on_dequeued is not None:
            self.on_dequeued()
        self._processing.add(key)
        self._dirty.discard(key)
        return key

    def done(self, key: K) -> None:
        """Mark ``key`` processed; re-queue it if it was added meanwhile."""
        self._processing.discard(key)
        if key in self._dirty:
            self._enqueue(key, False)

    def _enqueue(self, key: K, retry: bool) -> None:
        self._queue.append(key)
        if self.on_queued is not None:
            self.on_queued(retry)
        self._notify()

    def shut_down(self) -> None:
        """Wake every waiting worker with :class:`ShutDown`."""
        self._shutdown = True
        if self._timer is not None:
            self._timer.cancel()
        self._notify()

    def _notify(self) -> None:
        """Wake one waiting worker (all of them after shutdown)."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                if not self._shutdown:
                    return

    def _arm_timer(self) -> None:
        loop = asyncio.get_running_loop()
        if self._timer is not None:
            self._timer.cancel()
        if self._delayed and not self._shutdown:
            self._timer = loop.call_at(self._delayed[0][0], self._release_due)

    def _release_due(self) -> None:
        now = asyncio.get_running_loop().time()
        while self._delayed and self._delayed[0][0] <= now:
            _, seq, key = heapq.heappop(self._delayed)
            waiting = self._waiting.get(key)
            if waiting is not None and waiting[1] == seq:
                del self._waiting[key]
                self.add(key, retry=waiting[2])
        self._timer = None
        self._arm_timer()
