"""An operator's watched caches and the gate its reconciles wait behind.

Each watched resource has a :class:`~opsuite_common.store.Store` (or none) and an ``on_event``
callback; :meth:`Caches.watch` makes the function its raw watch events reach (kopf's watcher
calls it, :mod:`opsuite_common.kopfwatch.routing`). At the end of every (re)listing
(:meth:`~opsuite_common.kopfwatch.activity.WatchActivity.listed`) the store drops what the
listing no longer holds, but for the operator's own writes after its snapshot. The gate
(:attr:`Caches.synced`) opens once every watch stream has listed and every object of those
listings has reached its store, as controller-runtime waits for its caches to sync.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opsuite_common import protowatch
from opsuite_common.kopfwatch.activity import WatchActivity
from opsuite_common.kopfwatch.hooks import Deliver
from opsuite_common.protofields import Fields
from opsuite_common.store import JSON, Store, object_key

log = logging.getLogger(__name__)

EventHandler = Callable[[str | None, JSON, JSON | None], None]
"""Called for each watch event with (event type, new object, previous cached object)."""


class Caches:
    """The watched resources of one operator: their stores, event routes and sync gate."""

    def __init__(self, activity: WatchActivity, namespaces: Sequence[str]) -> None:
        """``activity``: the watch streams' listings and signs of life; ``namespaces``: those
        the operator serves (none: all)."""
        self._activity = activity
        self._namespaces = namespaces
        self._watched: list[str] = []
        self._stores: dict[str, tuple[Store | None, EventHandler | None]] = {}
        self._routes: dict[tuple[str, str], Deliver] = {}
        self._decoders: dict[str, protowatch.Decoder] = {}
        # Until the caches are synced: objects each handler has applied, and objects of each
        # initial listing not applied yet (handlers may run before or after the listing ends).
        self._applied_keys: dict[str, set[tuple[str, str]]] = {}
        self._unapplied: dict[tuple[str, str | None], set[tuple[str, str]]] = {}
        self.synced = asyncio.Event()
        """Set once every cache holds its initial listing."""
        activity.on_listed(self._listed)

    def watch(
        self,
        group: str,
        plural: str,
        *,
        store: Store | None = None,
        on_event: EventHandler | None = None,
        fields: Fields | None = None,
    ) -> Deliver:
        """Cache a resource: the function returned feeds ``store`` each raw watch event of it
        and calls ``on_event``.

        With ``fields`` (a built-in resource of :data:`protowatch.MESSAGES`), the watch is
        streamed in protobuf and its objects hold those fields (and the common metadata,
        :mod:`opsuite_common.protowatch`); the handlers and the store's transform must read
        nothing else. Objects of its paged listings are whole JSON objects still."""
        if fields is not None:
            if group or plural not in protowatch.MESSAGES:
                raise ValueError(f"{plural}.{group}: only {sorted(protowatch.MESSAGES)} (core)")
            self._decoders[plural] = protowatch.decoder(plural, fields)

        def deliver(event: Mapping[str, Any]) -> None:
            obj: JSON = dict(event["object"])
            event_type: str | None = event["type"]
            if store is not None and store.outdated(obj):
                self._applied(plural, obj)  # the cache holds a newer version: nothing changed
                return
            previous = store.apply(event_type, obj) if store is not None else None
            if on_event is not None:
                on_event(event_type, obj, previous)
            self._applied(plural, obj)

        self._watched.append(plural)
        self._stores[plural] = (store, on_event)
        self._routes[(group, plural)] = deliver
        return deliver

    def decoder(self, url: str) -> protowatch.Decoder | None:
        """The protobuf decoder of a watch URL (:meth:`watch`'s ``fields``), None: JSON."""
        plural = protowatch.core_plural(url)
        return None if plural is None else self._decoders.get(plural)

    def route(self, group: str, plural: str) -> Deliver | None:
        """The function that takes the raw watch events of a resource :meth:`watch` watches."""
        return self._routes.get((group, plural))

    def store(self, plural: str) -> Store | None:
        """The store ``watch`` feeds for ``plural`` (None: not watched, or without a store)."""
        return self._stores.get(plural, (None, None))[0]

    def _has_listed(self, plural: str) -> bool:
        """Whether every watch stream of ``plural`` has listed."""
        streams = self._activity.streams(plural, self._namespaces)
        return all(self._activity.has_listed(stream) for stream in streams)

    def unlisted(self) -> list[str]:
        """The watched resources some watch stream of which has not listed yet."""
        return [plural for plural in self._watched if not self._has_listed(plural)]

    def silent(self, longer_than: float) -> list[str]:
        """The watch streams silent for longer than ``longer_than`` seconds, described."""
        return self._activity.silent(self._watched, self._namespaces, longer_than)

    def _listed(
        self,
        plural: str,
        namespace: str | None,
        keys: set[tuple[str, str]],
        resource_version: str | None,
    ) -> None:
        """A (re)listing ended: drop cached objects it no longer holds, but for the operator's
        own writes after its snapshot (:meth:`Store.prune`); maybe open the gate."""
        if plural not in self._stores:
            return
        store, on_event = self._stores[plural]
        if store is not None:
            for obj in store.prune(keep=keys, namespace=namespace, snapshot=resource_version):
                log.info("%s %s/%s vanished while the watch was down", plural, *object_key(obj))
                if on_event is not None:
                    on_event("DELETED", obj, obj)
        if not self.synced.is_set():
            self._unapplied[(plural, namespace)] = keys - self._applied_keys.get(plural, set())
            self._check_synced()

    def _applied(self, plural: str, obj: JSON) -> None:
        if self.synced.is_set():
            return
        key = object_key(obj)
        self._applied_keys.setdefault(plural, set()).add(key)
        emptied = False
        for (resource, namespace), pending in self._unapplied.items():
            if resource == plural and key in pending and (namespace is None or namespace == key[0]):
                pending.discard(key)
                emptied = emptied or not pending
        if emptied:  # else nothing the gate waits on changed (a listing's end checks itself)
            self._check_synced()

    def _check_synced(self) -> None:
        listed = all(self._has_listed(plural) for plural in self._watched)
        if listed and not any(self._unapplied.values()):
            self.synced.set()
            self._applied_keys.clear()
            self._unapplied.clear()
            log.info("caches synced: %s", ", ".join(self._watched))
            # What the process holds now (code, kopf, the initial listings) lives as long as
            # it does: keep it out of the collector's full passes, which scan every tracked
            # object each time (tens of ms of an operator's CPU at each one, #19).
            gc.freeze()
            gc.enable()  # off since the manager started leading, see there
