"""Follow any collection (a namespace's pods, configmaps across namespaces by label) through a
raw watch stream, and record when each object first satisfies a predicate.

Like :mod:`bench.podwatch` (both are :mod:`bench.rawwatch`: list, then watch, JSON parsed by the
benchmark, every event stamped with ``time.monotonic()`` when its line arrives), but generic: the
tracker keeps, per object (namespace, name), a small summary computed by ``summarize``; an
:class:`Arm` records, for each object, the first instant its summary satisfies a predicate, and
fires once ``count`` objects did. Also a few helpers the operator benchmarks share: an admin client
with a larger connection pool, a thread pool that times each call, percentiles.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, Self, TypeVar

from kubernetes import client

from bench.plane import api_client
from bench.rawwatch import RawWatch

log = logging.getLogger(__name__)

Key = tuple[str, str]
"""(namespace, name)."""
S = TypeVar("S")
T = TypeVar("T")

THREADS = 32
"""Threads of the plain client that issues the reference requests."""


def wide_client(pool: int = THREADS) -> client.ApiClient:
    """An admin client (User-Agent opsuite-bench) whose connection pool fits ``pool`` threads."""
    api = api_client()
    api.configuration.connection_pool_maxsize = pool
    # The REST client was built with the old pool size; rebuild it with the new one.
    api.rest_client = type(api.rest_client)(api.configuration)
    return api


def timed_parallel(
    call: Callable[[T], object], items: Sequence[T], threads: int = THREADS
) -> tuple[float, list[float]]:
    """Run ``call`` on every item from ``threads`` threads; (wall seconds, per-call seconds)."""

    def one(item: T) -> float:
        began = time.monotonic()
        call(item)
        return time.monotonic() - began

    began = time.monotonic()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        durations = list(pool.map(one, items))
    return time.monotonic() - began, durations


def percentile(values: Iterable[float], q: float) -> float:
    """The q-th percentile (0-100, nearest rank); nan for no values."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


class Arm:
    """Per object, the first instant (monotonic) at which its summary satisfied a predicate."""

    def __init__(self, description: str, predicate: Callable[[Key, Any], bool], count: int) -> None:
        self.description = description
        self.predicate = predicate
        self.count = count
        self.times: dict[Key, float] = {}
        self._event = threading.Event()

    def check(self, key: Key, summary: Any, at: float) -> None:
        """Record ``at`` for ``key`` the first time its summary satisfies the predicate."""
        if key not in self.times and self.predicate(key, summary):
            self.times[key] = at
            if len(self.times) >= self.count:
                self._event.set()

    @property
    def done(self) -> bool:
        """True once ``count`` objects satisfied the predicate."""
        return self._event.is_set()

    def wait(self, timeout: float) -> float:
        """Block until ``count`` objects satisfied it; the last of their instants."""
        if not self._event.wait(timeout):
            raise TimeoutError(
                f"not reached within {timeout:.0f} s: {self.description} "
                f"({len(self.times)}/{self.count})"
            )
        return max(self.times.values())


class Tracker(RawWatch, Generic[S]):
    """Objects of one collection path (optionally label-selected) as the watch delivers them."""

    def __init__(
        self,
        api: client.ApiClient,
        path: str,
        summarize: Callable[[dict[str, Any]], S],
        label_selector: str | None = None,
    ) -> None:
        query = {"labelSelector": label_selector} if label_selector else {}
        super().__init__(api, path, query, f"watch of {path}", list_timeout=60)
        self._summarize = summarize
        self.state: dict[Key, S] = {}
        self._arms: list[Arm] = []

    def start(self, timeout: float = 60.0) -> Self:
        """Start following; return once the initial list is loaded."""
        return super().start(timeout)

    def arm(self, description: str, predicate: Callable[[Key, Any], bool], count: int) -> Arm:
        """An :class:`Arm` checked on every event from now on (and against the current state)."""
        arm = Arm(description, predicate, count)
        with self._lock:
            now = time.monotonic()
            for key, summary in self.state.items():
                arm.check(key, summary, now)
            if not arm.done:
                self._arms.append(arm)
        return arm

    def snapshot(self) -> dict[Key, S]:
        """A copy of the current state."""
        with self._lock:
            return dict(self.state)

    # ------------------------------------------------------------------ internals

    def _set(self, key: Key, summary: S | None, at: float) -> None:
        """Caller holds the lock."""
        if summary is None:
            self.state.pop(key, None)
            return
        self.state[key] = summary
        for arm in self._arms:
            arm.check(key, summary, at)
        self._arms = [a for a in self._arms if not a.done]

    @staticmethod
    def _key(obj: dict[str, Any]) -> Key:
        meta = obj.get("metadata") or {}
        return str(meta.get("namespace") or ""), str(meta.get("name") or "")

    def _replace(self, items: list[dict[str, Any]], at: float) -> None:
        fresh = {self._key(o): o for o in items}
        for key in set(self.state) - set(fresh):
            self._set(key, None, at)
        for key, obj in fresh.items():
            self._set(key, self._summarize(obj), at)

    def _apply(self, kind: str, obj: dict[str, Any], at: float) -> None:
        self._set(self._key(obj), None if kind == "DELETED" else self._summarize(obj), at)
