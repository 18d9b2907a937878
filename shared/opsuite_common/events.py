"""Kubernetes Events about the objects an operator manages, as client-go's EventRecorder posts.

``EventRecorder.event(obj, "Normal", "SuccessfulCreate", "Created pod: web-x2k")`` posts a
core/v1 Event (``kubectl describe`` and ``kubectl events`` show it) and returns at once: the
write is a :class:`~opsuite_common.kube.KubeApi` future whose outcome is logged, never awaited
by the caller, and never an asyncio task. Repeats are folded the way client-go's
EventCorrelator folds them, so a burst costs a handful of API calls, not one per event:

* identical events (same object, type, reason and message) within ``dedupe_window`` update one
  Event: ``count`` and ``lastTimestamp`` are patched, and repeats arriving while a write is in
  flight are coalesced into the next patch;
* once ``max_similar`` different messages with the same object, type and reason arrive within
  ``dedupe_window``, further ones update a single Event whose message starts with
  "(combined from similar events): " (client-go's EventAggregator);
* each object gets a token bucket (``burst`` writes, then one per ``refill_seconds``): events
  beyond it are not written, only counted, and the next write carries the count, like
  client-go's spam filter. Unlike client-go, Normal and Warning events have a bucket each, so a
  burst of routine events cannot hide a failure.

Not thread-safe: call it from the event loop (reconcilers and watch handlers run there).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from opsuite_common.fence import WriteFenced
from opsuite_common.kube import ApiException, resource_path
from opsuite_common.store import JSON

__all__ = ["EventRecorder", "EventSink", "EventType", "object_reference"]

log = logging.getLogger(__name__)

EventType = Literal["Normal", "Warning"]

COMBINED_PREFIX = "(combined from similar events): "
MAX_MESSAGE_LENGTH = 1024
"""Longest message kept (events.k8s.io's note limit); longer ones are truncated."""
MAX_REPORTING_INSTANCE_LENGTH = 128
_MAX_NAME_LENGTH = 253


class EventSink(Protocol):
    """The writes the recorder needs; :class:`~opsuite_common.kube.KubeApi` provides them."""

    def create(self, path: str, body: Mapping[str, Any]) -> asyncio.Future[JSON]:
        """POST ``body`` to the collection ``path``."""
        ...

    def patch(self, path: str, patch: object, *, patch_type: str = "merge") -> asyncio.Future[JSON]:
        """PATCH the object at ``path``."""
        ...


def object_reference(obj: Mapping[str, Any]) -> JSON:
    """The ``involvedObject`` of an Event about ``obj`` (a dict as the API returns it)."""
    meta = obj.get("metadata") or {}
    ref: JSON = {
        "apiVersion": obj.get("apiVersion", ""),
        "kind": obj.get("kind", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
    }
    if meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    return ref


def _timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _truncate(message: str) -> str:
    if len(message) <= MAX_MESSAGE_LENGTH:
        return message
    return message[: MAX_MESSAGE_LENGTH - 3] + "..."


@dataclass
class _Similar:
    """Distinct messages seen for one (object, type, reason) in the current window."""

    messages: set[str]
    since: float


@dataclass
class _Bucket:
    tokens: float
    updated: float
    dry: bool = False
    """Events were dropped since the last one let through (logged once per dry spell)."""


@dataclass
class _Entry:
    """One Event object on the server and the writes pending for it."""

    namespace: str
    name: str
    body: JSON
    """The Event as last created or patched (count, lastTimestamp and message current)."""
    last_seen: float
    created: bool = False
    in_flight: asyncio.Future[JSON] | None = None
    dirty: bool = False
    """Changed since the write in flight started: patch again when it completes."""
    retired: bool = False
    """Evicted from the cache; its in-flight write completes without follow-up."""


class EventRecorder:
    """Posts and aggregates core/v1 Events for one reporting controller instance."""

    def __init__(
        self,
        sink: EventSink,
        reporting_controller: str,
        reporting_instance: str,
        *,
        dedupe_window: float = 600.0,
        max_similar: int = 10,
        burst: int = 25,
        refill_seconds: float = 300.0,
        cache_size: int = 4096,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._sink = sink
        self._controller = reporting_controller
        self._instance = reporting_instance[:MAX_REPORTING_INSTANCE_LENGTH]
        self._window = dedupe_window
        self._max_similar = max_similar
        self._burst = burst
        self._refill = refill_seconds
        self._cache_size = cache_size
        self._clock = clock
        self._wall_clock = wall_clock
        self._entries: OrderedDict[tuple[str, ...], _Entry] = OrderedDict()
        self._similar: OrderedDict[tuple[str, ...], _Similar] = OrderedDict()
        self._buckets: OrderedDict[tuple[str, ...], _Bucket] = OrderedDict()
        self._in_flight: set[asyncio.Future[JSON]] = set()
        self._names = itertools.count()
        self.dropped = 0
        """Events the spam filter kept from being written (for tests and debugging)."""

    def normal(self, obj: Mapping[str, Any], reason: str, message: str) -> None:
        """Record a Normal event about ``obj``."""
        self.event(obj, "Normal", reason, message)

    def warning(self, obj: Mapping[str, Any], reason: str, message: str) -> None:
        """Record a Warning event about ``obj``."""
        self.event(obj, "Warning", reason, message)

    def event(self, obj: Mapping[str, Any], type_: EventType, reason: str, message: str) -> None:
        """Record an event about ``obj`` (fire and forget; call from the event loop)."""
        now = self._clock()
        ref = object_reference(obj)
        object_key = (
            ref["apiVersion"],
            ref["kind"],
            ref.get("namespace", ""),
            ref["name"],
            ref["uid"],
        )
        message = _truncate(message)
        similar_key = (*object_key, type_, reason)
        if self._is_similar_flood(similar_key, message, now):
            key = (*similar_key, COMBINED_PREFIX)
            message = _truncate(COMBINED_PREFIX + message)
        else:
            key = (*similar_key, message)
        entry = self._observe(key, ref, type_, reason, message, now)
        # As client-go: a filtered event is still counted; the next write carries the count.
        if not self._take_token((*object_key, type_), now):
            self.dropped += 1
        elif entry.in_flight is not None:
            entry.dirty = True
        else:
            self._write(entry)

    async def flush(self) -> None:
        """Wait until every write started so far (and its follow-ups) has completed."""
        while self._in_flight:
            await asyncio.gather(*self._in_flight, return_exceptions=True)
            await asyncio.sleep(0)  # let the done callbacks start follow-up patches

    def _take_token(self, key: tuple[str, ...], now: float) -> bool:
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = _Bucket(float(self._burst), now)
            self._buckets[key] = bucket
            self._trim(self._buckets)
        else:
            self._buckets.move_to_end(key)
            refilled = (now - bucket.updated) / self._refill if self._refill > 0 else self._burst
            bucket.tokens = min(float(self._burst), bucket.tokens + refilled)
            bucket.updated = now
        if bucket.tokens < 1:
            if not bucket.dry:
                bucket.dry = True
                log.debug("spam filter: dropping %s events about %s for now", key[-1], key[:-1])
            return False
        bucket.tokens -= 1
        bucket.dry = False
        return True

    def _is_similar_flood(self, key: tuple[str, ...], message: str, now: float) -> bool:
        similar = self._similar.get(key)
        if similar is None or now - similar.since > self._window:
            similar = _Similar(set(), now)
            self._similar[key] = similar
            self._trim(self._similar)
        self._similar.move_to_end(key)
        similar.messages.add(message)
        return len(similar.messages) >= self._max_similar

    def _trim(self, cache: OrderedDict[tuple[str, ...], Any]) -> None:
        while len(cache) > self._cache_size:
            _, evicted = cache.popitem(last=False)
            if isinstance(evicted, _Entry):
                evicted.retired = True

    def _observe(
        self,
        key: tuple[str, ...],
        ref: JSON,
        type_: EventType,
        reason: str,
        message: str,
        now: float,
    ) -> _Entry:
        """The Event for ``key``, new or with one more occurrence counted (not written yet)."""
        stamp = _timestamp(self._wall_clock())
        entry = self._entries.get(key)
        if entry is not None and now - entry.last_seen <= self._window:
            self._entries.move_to_end(key)
            entry.last_seen = now
            entry.body["count"] += 1
            entry.body["lastTimestamp"] = stamp
            entry.body["message"] = message
        else:
            if entry is not None:
                entry.retired = True
            namespace = ref.get("namespace") or "default"
            entry = _Entry(
                namespace=namespace,
                name=self._event_name(ref["name"]),
                body={
                    "apiVersion": "v1",
                    "kind": "Event",
                    "metadata": {"namespace": namespace},
                    "involvedObject": ref,
                    "type": type_,
                    "reason": reason,
                    "message": message,
                    "count": 1,
                    "firstTimestamp": stamp,
                    "lastTimestamp": stamp,
                    "source": {"component": self._controller},
                    "reportingComponent": self._controller,
                    "reportingInstance": self._instance,
                },
                last_seen=now,
            )
            entry.body["metadata"]["name"] = entry.name
            self._entries[key] = entry
            self._trim(self._entries)
        return entry

    def _event_name(self, involved_name: str) -> str:
        """``<object>.<hex nanoseconds>`` as client-go names Events, made unique per process."""
        suffix = f"{time.time_ns() + next(self._names):x}"
        return f"{involved_name[: _MAX_NAME_LENGTH - len(suffix) - 1]}.{suffix}"

    def _write(self, entry: _Entry) -> None:
        entry.dirty = False
        try:
            if entry.created:
                future = self._sink.patch(
                    resource_path("v1", "events", entry.namespace, entry.name),
                    {
                        "count": entry.body["count"],
                        "lastTimestamp": entry.body["lastTimestamp"],
                        "message": entry.body["message"],
                    },
                )
            else:
                future = self._sink.create(
                    resource_path("v1", "events", entry.namespace), dict(entry.body)
                )
        except RuntimeError as exc:  # no running event loop: nothing can be written
            log.debug("event not written: %s", exc)
            return
        entry.in_flight = future
        self._in_flight.add(future)
        future.add_done_callback(lambda done: self._written(entry, done))

    def _written(self, entry: _Entry, future: asyncio.Future[JSON]) -> None:
        self._in_flight.discard(future)
        entry.in_flight = None
        if future.cancelled() or isinstance(future.exception(), WriteFenced):
            return  # shutting down, or no longer leading: never sent
        error = future.exception()
        if error is None:
            entry.created = True
        elif isinstance(error, ApiException) and error.status == 404 and entry.created:
            # Expired (Events live an hour) or deleted: post it again under a new name.
            entry.created = False
            entry.name = self._event_name(entry.body["involvedObject"]["name"])
            entry.body["metadata"]["name"] = entry.name
            entry.dirty = True
        else:
            status = error.status if isinstance(error, ApiException) else type(error).__name__
            log.warning(
                "could not write event %s %s about %s/%s: %s",
                entry.body["type"],
                entry.body["reason"],
                entry.namespace,
                entry.body["involvedObject"]["name"],
                status,
            )
            return
        if entry.dirty and not entry.retired:
            self._write(entry)
