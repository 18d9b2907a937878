"""Read-only caches of watched objects (controller-runtime's informer stores, in Python).

A :class:`Store` is fed by a kopf ``on.event`` handler: it keeps the raw dicts the watch
delivers, keyed by namespace and name, with optional secondary indexes (e.g. pods by owner
uid). Reconcilers read observed state from stores and never from the event that woke them,
so batched or dropped intermediate events (kopf #698) cannot mislead them.

Objects are kept without ``metadata.managedFields`` (as controller-runtime's
``cache.TransformStripManagedFields`` does): no reconciler reads it, and on pods that several
writers touched (creator, scheduler, kubelet, debugger) it is the largest part of the object.
A store may instead be given its own ``transform`` (controller-runtime's ``TransformFunc``)
that keeps only the fields its reconciler reads, which matters for thousands of pods.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable
from typing import Any

JSON = dict[str, Any]
"""A Kubernetes object or any other JSON object, as parsed; the one alias every package uses
(this module imports only the standard library, so each layer may import it)."""
ObjectKey = tuple[str, str]
"""(namespace, name); namespace is "" for cluster-scoped objects."""

Indexer = Callable[[JSON], Iterable[Hashable]]
Transform = Callable[[JSON], JSON]


def without_managed_fields(obj: JSON) -> JSON:
    """``obj`` itself when it has no managedFields, else a shallow copy without them."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


_BOOKKEEPING = ("resourceVersion", "managedFields")


def status_only(old: JSON | None, new: JSON) -> bool:
    """Whether ``new`` differs from ``old`` in its status alone (as after an operator's own
    status write): such an event needs no reconcile, the cache now holds the status written."""
    if old is None or old.get("spec") != new.get("spec"):
        return False
    old_meta, new_meta = (
        {k: v for k, v in obj.get("metadata", {}).items() if k not in _BOOKKEEPING}
        for obj in (old, new)
    )
    return old_meta == new_meta


def resource_version_order(a: str, b: str) -> int | None:
    """-1, 0 or 1 as resourceVersion ``a`` is older than, the same as or newer than ``b``; None
    when either is not a positive integer without leading zeros. Since Kubernetes 1.35 the
    resourceVersions of one resource are such integers and comparable (KEP-5504, client-go's
    ``CompareResourceVersion``); other API servers may still send opaque strings."""
    if not (a.isdigit() and b.isdigit()) or a[0] == "0" or b[0] == "0":
        return None
    ka, kb = (len(a), a), (len(b), b)
    return (ka > kb) - (ka < kb)


def _newer(obj: JSON, resource_version: str) -> bool:
    """Whether ``obj``'s resourceVersion is known to be newer than ``resource_version``."""
    version = obj.get("metadata", {}).get("resourceVersion")
    return isinstance(version, str) and resource_version_order(version, resource_version) == 1


def object_key(obj: JSON) -> ObjectKey:
    """The (namespace, name) of an object."""
    meta = obj.get("metadata", {})
    return meta.get("namespace", ""), meta["name"]


class Store:
    """Objects of one kind as last seen by the watch, with secondary indexes."""

    def __init__(
        self,
        kind: str,
        indexers: dict[str, Indexer] | None = None,
        transform: Transform = without_managed_fields,
    ) -> None:
        self.kind = kind
        self._transform = transform
        self._objects: dict[ObjectKey, JSON] = {}
        self._indexers = dict(indexers or {})
        self._indexes: dict[str, defaultdict[Hashable, set[ObjectKey]]] = {
            name: defaultdict(set) for name in self._indexers
        }

    def __len__(self) -> int:
        return len(self._objects)

    def apply(self, event_type: str | None, obj: JSON) -> JSON | None:
        """Apply one watch event (None = initial listing); return the previous object.

        The store keeps ``transform(obj)``, not ``obj``."""
        key = object_key(obj)
        old = self._objects.get(key)
        if old is not None:
            self._unindex(key, old)
        if event_type == "DELETED":
            self._objects.pop(key, None)
        else:
            obj = self._transform(obj)
            self._objects[key] = obj
            self._index(key, obj)
        return old

    def outdated(self, obj: JSON) -> bool:
        """Whether the cached object under ``obj``'s key is newer than ``obj``: a listing or
        event that was under way when the operator recorded its own write (a write-through),
        which must not take the cache back to what the operator just changed."""
        cached = self._objects.get(object_key(obj))
        version = obj.get("metadata", {}).get("resourceVersion")
        return cached is not None and isinstance(version, str) and _newer(cached, version)

    def record_write(self, answer: JSON) -> None:
        """The API server's answer to this operator's own write of a cached object (its status,
        say): keep it, unless the object left the cache or the watch already brought a newer
        version. The next pass then compares with what the server holds, even before the
        watch's event of the write arrives: a status computed equal to the stale one cached
        would otherwise not be written."""
        if "name" not in (answer.get("metadata") or {}):
            return  # not an object (an answer without a body)
        if self.get(*object_key(answer)) is not None and not self.outdated(answer):
            self.apply("MODIFIED", answer)

    def prune(
        self, keep: set[ObjectKey], namespace: str | None = None, snapshot: str | None = None
    ) -> list[JSON]:
        """Drop every object (of ``namespace``; None: of any) whose key is not in ``keep``
        (the objects of a listing), except those newer than the listing's ``snapshot``
        resourceVersion: only the operator's own writes (:meth:`record_write`, write-throughs)
        put such a version in the cache before the watch, which goes on from the snapshot,
        brings it. Versions that are not both integers (:func:`resource_version_order`) order
        nothing: such an object is dropped. Return the dropped objects."""
        gone = [
            key
            for key, obj in self._objects.items()
            if key not in keep
            and (namespace is None or key[0] == namespace)
            and (snapshot is None or not _newer(obj, snapshot))
        ]
        return [obj for key in gone if (obj := self._remove(key)) is not None]

    def _remove(self, key: ObjectKey) -> JSON | None:
        obj = self._objects.pop(key, None)
        if obj is not None:
            self._unindex(key, obj)
        return obj

    def get(self, namespace: str, name: str) -> JSON | None:
        """The cached object, or None."""
        return self._objects.get((namespace, name))

    def items(self) -> list[JSON]:
        """All cached objects (those of one namespace: an index, e.g. :func:`by_namespace`)."""
        return list(self._objects.values())

    def by_index(self, index: str, value: Hashable) -> list[JSON]:
        """Objects whose indexer ``index`` yielded ``value``."""
        return [self._objects[k] for k in sorted(self._indexes[index].get(value, ()))]

    def _index(self, key: ObjectKey, obj: JSON) -> None:
        for name, indexer in self._indexers.items():
            for value in indexer(obj):
                self._indexes[name][value].add(key)

    def _unindex(self, key: ObjectKey, obj: JSON) -> None:
        for name, indexer in self._indexers.items():
            index = self._indexes[name]
            for value in indexer(obj):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]


def by_controller_uid(obj: JSON) -> list[Hashable]:
    """Indexer: the uid of the object's controller ownerReference, if any."""
    return [
        ref["uid"]
        for ref in obj.get("metadata", {}).get("ownerReferences", [])
        if ref.get("controller")
    ]


def by_namespace(obj: JSON) -> list[Hashable]:
    """Indexer: the object's namespace."""
    return [obj.get("metadata", {}).get("namespace", "")]
