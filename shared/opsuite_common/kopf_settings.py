"""Every kopf setting opsuite relies on, chosen deliberately and explained in one place.

Operators use kopf as the watch layer only: ``on.event`` handlers that update read-only
caches and enqueue keys for a :class:`~opsuite_common.controller.Controller`. They never use
kopf's high-level ``on.create/update/delete/resume`` handlers, which store a diff-base
annotation, progress and finalizers on the watched object: a write to objects we do not own
(users' pods, source ConfigMaps, namespaces) that fails outright on large objects (kopf #1087).

Watch health: each watch request asks the API server to end it after ``server_timeout``, and
kopf reconnects when a stream has been silent for ``inactivity_timeout`` (kopf #957, #1276).
:func:`track_watch_activity` records, per resource, the time of every event or bookmark and of
every watch request the API server ended cleanly, and ``/readyz`` fails when a watch has shown
none of these for twice the watch timeout. Bookmarks alone are not enough: the API server sends
one only when its watch cache has moved past the watch's resourceVersion, so on a quiet cluster
(no change to that resource anywhere) a healthy watch gets none at all.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

import kopf
from kopf._cogs.clients import api, watching

from opsuite_common.options import ManagerOptions


def configure_kopf(settings: kopf.OperatorSettings, options: ManagerOptions) -> None:
    """Apply opsuite's kopf settings for one operator process."""
    # Leader election is ours (a coordination.k8s.io Lease, see leader_election.py); kopf's
    # peering (KopfPeering objects, freezing same-priority peers) is off.
    settings.peering.standalone = True
    settings.peering.mandatory = False
    # Resources are discovered once at start-up: no cluster-wide watch of CRDs or namespaces,
    # so no RBAC for them. The CRDs are installed before the operator (Helm crds/, OLM).
    settings.scanning.disabled = True
    # No diff-base: with only on.event handlers nothing compares old and new essences, yet kopf
    # builds one (a deep copy of the object) for every event, a sixth of a busy operator's CPU.
    # Progress would go to our own status, never to annotations.
    settings.persistence.diffbase_storage = NoDiffBaseStorage()
    settings.persistence.progress_storage = kopf.StatusProgressStorage(field="status.kopf")
    settings.persistence.finalizer = "opsuite.dev/kopf-unused"
    # No log-to-Event posting: it would also post about objects we merely watch. Operators
    # report through status conditions and metrics.
    settings.posting.enabled = False
    # Watch streams: bounded server-side, reconnected when silent, never hanging on connect.
    settings.watching.server_timeout = int(options.watch_timeout)
    settings.watching.client_timeout = int(options.watch_timeout) + 30
    settings.watching.inactivity_timeout = options.watch_timeout + 15
    settings.watching.connect_timeout = 10
    settings.networking.request_timeout = 30
    settings.networking.connect_timeout = 10
    # Handlers only enqueue keys, so kopf's per-object workers are short-lived; a burst of
    # events for one object within the batch window collapses to its latest state (#698),
    # which is harmless because reconcilers read the cache, not the event.
    settings.batching.batch_window = 0.1
    settings.batching.exit_timeout = 2.0
    settings.process.ultimate_exiting_timeout = 5.0
    # Our handlers never block; keep kopf's thread pool for sync handlers small.
    settings.execution.max_workers = 2


ListingHandler = Callable[[str, str | None, set[tuple[str, str]]], None]
"""Called with a resource plural, the namespace of the watch (None: cluster-wide) and the
(namespace, name) of every object of the listing."""


class NoDiffBaseStorage(kopf.DiffBaseStorage):
    """A diff-base storage that keeps nothing, for operators without change-detecting handlers.

    kopf's ``on.create/update/resume`` handlers would see every object as new; opsuite uses
    ``on.event`` handlers only (see the module docstring).
    """

    def build(
        self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None
    ) -> kopf.BodyEssence:
        """An empty essence: nothing is compared."""
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        """Nothing is stored, so nothing is fetched."""
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        """Store nothing."""


class WatchActivity:
    """Per watched resource: when its stream last showed life, and whether it has listed."""

    def __init__(self) -> None:
        self._seen: dict[str, float] = {}
        self._listed: set[tuple[str, str | None]] = set()
        self._on_listed: list[ListingHandler] = []

    def mark(self, resource: str) -> None:
        """Record activity on the watch of ``resource``."""
        self._seen[resource] = time.monotonic()

    def on_listed(self, handler: ListingHandler) -> None:
        """Call ``handler`` at the end of every (re)listing of any resource."""
        self._on_listed.append(handler)

    def listed(self, resource: str, namespace: str | None, keys: set[tuple[str, str]]) -> None:
        """A listing of ``resource`` in ``namespace`` ended; ``keys`` are its objects."""
        self._listed.add((resource, namespace))
        for handler in self._on_listed:
            handler(resource, namespace, keys)

    def has_listed(self, resource: str, namespace: str | None) -> bool:
        """Whether the watch of ``resource`` in ``namespace`` has finished a listing."""
        return (resource, namespace) in self._listed

    def stale(self, older_than: float) -> list[str]:
        """Resources whose watch has been silent for longer than ``older_than`` seconds."""
        now = time.monotonic()
        return sorted(r for r, t in self._seen.items() if now - t > older_than)


def track_watch_activity(activity: WatchActivity) -> None:
    """Wrap kopf's watch streams to report listings and signs of life to ``activity``.

    Every listing is reported when it ends (``WatchActivity.listed``), with the objects it
    held: kopf sends no DELETED event for objects deleted while a watch was down (a relist
    after "410 Gone"), so caches drop what a listing no longer holds. Every event and bookmark
    marks the watch alive (kopf filters bookmarks out before handlers run, so they are observed
    at ``kopf._cogs.clients.watching.infinite_watch``), and so does every watch request that
    the API server ends cleanly (``kopf._cogs.clients.api.stream``, used only for watches,
    running out without an error): that happens every ``server_timeout`` on a healthy
    connection even when nothing changes and no bookmark comes. A hung API server or a
    half-open connection shows neither. kopf looks both functions up by module attribute at
    call time. Private API: kopf is pinned to 1.45.x and the e2e suite checks that readiness
    holds through a quiet period and follows the watch (API server paused and resumed).
    """

    original_watch = getattr(watching.infinite_watch, "__wrapped__", watching.infinite_watch)
    original_stream = getattr(api.stream, "__wrapped__", api.stream)

    async def infinite_watch(**kwargs: Any) -> AsyncIterator[Any]:
        name = str(kwargs["resource"].plural)
        namespace: str | None = kwargs.get("namespace")
        listing: set[tuple[str, str]] = set()
        async for item in original_watch(**kwargs):
            activity.mark(name)
            if item is watching.Bookmark.LISTED:
                activity.listed(name, namespace, listing)
                listing = set()
            elif isinstance(item, dict) and item.get("type") is None:  # part of a listing
                meta = item["object"].get("metadata", {})
                listing.add((meta.get("namespace", ""), meta.get("name", "")))
            yield item

    async def stream(url: str, **kwargs: Any) -> AsyncIterator[Any]:
        async for item in original_stream(url, **kwargs):
            yield item
        # Errors (connection reset, payload, timeouts) propagate from the stream; an ending
        # without one is the server closing the watch at its timeoutSeconds.
        stopper = kwargs.get("stopper")
        if stopper is None or not stopper.done():
            # A watch URL is a collection URL: its last path segment is the resource plural.
            activity.mark(urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1])

    infinite_watch.__wrapped__ = original_watch  # type: ignore[attr-defined]
    stream.__wrapped__ = original_stream  # type: ignore[attr-defined]
    watching.infinite_watch = infinite_watch
    api.stream = stream
    logging.getLogger(__name__).debug("watch activity tracking installed")
