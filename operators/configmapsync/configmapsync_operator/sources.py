"""Full copies of the ConfigMaps some ConfigMapSync reads, or that allow copies.

The ConfigMap watch sees every ConfigMap; only sources are kept in full (the rest as slim
records), and so are the ConfigMaps whose consent annotation allows copies somewhere: they are
there to be sources (copies never carry the annotation), and a ConfigMapSync created later
reads them from here. Any other ConfigMap becomes a source when a ConfigMapSync starts
referencing it, after the watch may already have delivered it: the reconciler then reads it
once with a GET and :meth:`SourceCache.fill` stores the answer, unless the watch delivered an
event for it in the meantime (the watch is then at least as recent, and authoritative from
there on).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from configmapsync_operator.copies import JSON, ObjectKey, key_of

_CONTENT = ("data", "binaryData", "immutable")


def _trimmed(obj: JSON) -> JSON:
    """The object without metadata.managedFields (often larger than the data; never copied)."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


def _content(obj: Mapping[str, Any] | None) -> object:
    """What a copy takes from its source: data, binaryData, immutable, labels, annotations."""
    if obj is None:
        return None
    meta = obj.get("metadata") or {}
    return (
        [obj.get(k) for k in _CONTENT],
        meta.get("labels"),
        meta.get("annotations"),
        meta.get("uid"),
    )


class SourceCache:
    """Source ConfigMaps by key, fed by the ConfigMap watch and by one-off GETs."""

    def __init__(self) -> None:
        self._objects: dict[ObjectKey, JSON] = {}
        self._known: set[ObjectKey] = set()
        self._epochs: dict[ObjectKey, int] = {}

    def __len__(self) -> int:
        return len(self._objects)

    def observe(self, event_type: str | None, obj: JSON) -> bool:
        """Apply a watch event for a source; True when what copies take from it changed."""
        key = key_of(obj)
        previous = self._objects.get(key)
        if event_type == "DELETED":
            self._objects.pop(key, None)
            current = None
        else:
            current = self._objects[key] = _trimmed(obj)
        self._known.add(key)
        self._epochs[key] = self._epochs.get(key, 0) + 1
        return _content(previous) != _content(current)

    def known(self, key: ObjectKey) -> bool:
        """Whether the cache is authoritative for ``key`` (present or known absent)."""
        return key in self._known

    def epoch(self, key: ObjectKey) -> int:
        """A counter of watch events for ``key``; pass it back to :meth:`fill`."""
        return self._epochs.get(key, 0)

    def fill(self, key: ObjectKey, obj: JSON | None, epoch: int) -> None:
        """Store a GET's answer for ``key`` unless a watch event arrived since ``epoch``."""
        if key in self._known or self._epochs.get(key, 0) != epoch:
            return
        if obj is not None:
            self._objects[key] = _trimmed(obj)
        self._known.add(key)

    def get(self, key: ObjectKey) -> JSON | None:
        """The source ConfigMap, or None (absent, or not known yet)."""
        return self._objects.get(key)

    def forget(self, key: ObjectKey) -> None:
        """No ConfigMapSync reads ``key`` any more: drop it."""
        self._objects.pop(key, None)
        self._known.discard(key)
        self._epochs.pop(key, None)
