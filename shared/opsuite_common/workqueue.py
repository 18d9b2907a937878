"""A controller-runtime style work queue for reconcile keys.

Semantics of client-go's workqueue: a key waiting in the queue is there once however often it is
added; a key is never handed to two workers at once (an add while it is being processed marks it
dirty and it comes back when the worker is done); a key waits for a delayed add at most once, at
the earliest time asked (client-go's delaying queue). Rate-limited re-adds (``add_rate_limited``:
failures, and reconciles asking for a requeue) wait as long as controller-runtime's default rate
limiter says: the longer of a per-key exponential backoff (5 ms doubling up to 1000 s, reset by
``forget`` after a success) and an overall token bucket shared by every key (10 per second,
bursts of 100), so that a mass failure cannot turn into a storm of retries. Plain and delayed adds
are not rate limited.

The queue reports to an optional ``QueueMetrics`` at the points client-go's queue does (see
``opsuite_common.metrics.WorkQueueMetrics``).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

K = TypeVar("K", bound=Hashable)

BASE_DELAY = 0.005
MAX_DELAY = 1000.0
OVERALL_QPS = 10.0
OVERALL_BURST = 100


class QueueMetrics(Protocol):
    """What a queue reports, at client-go's points (its queueMetrics interface)."""

    def add(self, key: Hashable) -> None:
        """``key`` became dirty: it is queued, or will be once its processing is done."""

    def get(self, key: Hashable) -> None:
        """A worker took ``key``."""

    def done(self, key: Hashable) -> None:
        """A worker finished ``key``."""

    def retry(self) -> None:
        """A key was re-added after a failure or a requeue request."""


@dataclass
class TokenBucket:
    """An overall rate limit: golang.org/x/time/rate's Limiter.Reserve, as client-go's
    BucketRateLimiter uses it (every reservation takes a token, going into debt if need be)."""

    rate: float = OVERALL_QPS
    burst: int = OVERALL_BURST
    clock: Callable[[], float] = time.monotonic
    _tokens: float | None = None
    _last: float = 0.0

    def reserve(self) -> float:
        """Take a token; return how long to wait until it is really there (0 if it is)."""
        now = self.clock()
        if self._tokens is None:
            tokens = float(self.burst)
        else:
            tokens = min(float(self.burst), self._tokens + max(0.0, now - self._last) * self.rate)
        tokens -= 1
        self._tokens, self._last = tokens, now
        return -tokens / self.rate if tokens < 0 else 0.0


class ShutDown(Exception):
    """The queue was shut down; workers stop."""


@dataclass
class WorkQueue(Generic[K]):
    """Deduplicating, rate-limited queue of keys (asyncio, one event loop)."""

    base_delay: float = BASE_DELAY
    max_delay: float = MAX_DELAY
    overall: TokenBucket = field(default_factory=TokenBucket)
    """The limit shared by every key's rate-limited re-adds."""
    metrics: QueueMetrics | None = None
    _queue: deque[K] = field(default_factory=deque)
    _dirty: set[K] = field(default_factory=set)
    _processing: set[K] = field(default_factory=set)
    _failures: dict[K, int] = field(default_factory=dict)
    _delayed: list[tuple[float, int, K]] = field(default_factory=list)
    _waiting: dict[K, tuple[float, int]] = field(default_factory=dict)
    """The live delayed entry of each key: (due time, sequence); others are stale."""
    _seq: itertools.count[int] = field(default_factory=itertools.count)
    _waiters: deque[asyncio.Future[None]] = field(default_factory=deque)
    _shutdown: bool = False
    _timer: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, key: K) -> None:
        """Queue ``key`` now (no-op if already waiting; deferred if being processed)."""
        if self._shutdown or key in self._dirty:
            return
        if self.metrics is not None:
            self.metrics.add(key)
        self._dirty.add(key)
        if key not in self._processing:
            self._enqueue(key)

    def add_after(self, key: K, delay: float, *, retry: bool = False) -> None:
        """Queue ``key`` after ``delay`` seconds; a delayed add already due sooner wins.

        ``retry``: this re-add is a retry (counted as one, as client-go counts AddAfter).
        """
        if self._shutdown:
            return
        if retry and self.metrics is not None:
            self.metrics.retry()
        if delay <= 0:
            self.add(key)
            return
        due = asyncio.get_running_loop().time() + delay
        waiting = self._waiting.get(key)
        if waiting is not None and waiting[0] <= due:
            return
        seq = next(self._seq)
        self._waiting[key] = (due, seq)
        heapq.heappush(self._delayed, (due, seq, key))
        if self._delayed[0][1] == seq:
            self._arm_timer()

    def add_rate_limited(self, key: K) -> float:
        """Queue ``key`` after the rate limiter's delay (the longer of its backoff and the
        overall bucket's); return that delay."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        backoff: float = min(self.base_delay * (2**failures), self.max_delay)
        delay = max(backoff, self.overall.reserve())
        self.add_after(key, delay, retry=True)
        return delay

    def forget(self, key: K) -> None:
        """Reset the backoff of ``key`` (after a successful reconcile); the bucket is shared."""
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
        if self.metrics is not None:
            self.metrics.get(key)
        self._processing.add(key)
        self._dirty.discard(key)
        return key

    def done(self, key: K) -> None:
        """Mark ``key`` processed; re-queue it if it was added meanwhile."""
        if key not in self._processing:
            return
        if self.metrics is not None:
            self.metrics.done(key)
        self._processing.discard(key)
        if key in self._dirty:
            self._enqueue(key)

    def _enqueue(self, key: K) -> None:
        self._queue.append(key)
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
                self.add(key)
        self._timer = None
        self._arm_timer()
