"""Full copies of the ConfigMaps some ConfigMapSync reads, within a budget of bytes.

The ConfigMap watch sees every ConfigMap; only sources are kept in full, the rest as slim
records, whatever annotations they carry: a tenant's many large ConfigMaps that allow copies
cost the operator nothing until a ConfigMapSync reads them. A ConfigMap becomes a source when
a ConfigMapSync starts referencing it, after the watch may already have delivered it: the
reconciler then reads it once with a GET and :meth:`SourceCache.fill` stores the answer, unless
the watch delivered an event for it in the meantime (the watch is then at least as recent, and
authoritative from there on).

The sources held are bounded by :data:`MAX_SOURCE_BYTES` (their data and binaryData): past it
the least recently used are forgotten, and the next pass that needs one reads it again, so many
large sources slow their own ConfigMapSyncs down instead of exhausting the operator's memory.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from configmapsync_operator.copies import ObjectKey, key_of
from opsuite_common.store import JSON

_CONTENT = ("data", "binaryData", "immutable")
MAX_SOURCE_BYTES = 64 * 2**20
"""The data and binaryData of the sources held at once (the chart's memory limit is 256 MiB)."""


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


def _size(obj: Mapping[str, Any]) -> int:
    """The bytes of ``obj``'s data and binaryData (keys and values)."""
    return sum(
        len(key) + len(value)
        for field in ("data", "binaryData")
        for key, value in (obj.get(field) or {}).items()
        if isinstance(value, str)
    )


class SourceCache:
    """Source ConfigMaps by key, fed by the ConfigMap watch and by one-off GETs, at most
    ``max_bytes`` of them (least recently used first out; one larger alone is still held)."""

    def __init__(self, max_bytes: int = MAX_SOURCE_BYTES) -> None:
        self._objects: OrderedDict[ObjectKey, JSON] = OrderedDict()
        self._sizes: dict[ObjectKey, int] = {}
        self._bytes = 0
        self._max_bytes = max_bytes
        self._known: set[ObjectKey] = set()
        self._epochs: dict[ObjectKey, int] = {}

    def __len__(self) -> int:
        return len(self._objects)

    def held_bytes(self) -> int:
        """The data and binaryData of the sources held."""
        return self._bytes

    def _store(self, key: ObjectKey, obj: JSON) -> None:
        self._drop(key)
        self._objects[key] = obj
        self._sizes[key] = _size(obj)
        self._bytes += self._sizes[key]
        while self._bytes > self._max_bytes and len(self._objects) > 1:
            oldest = next(iter(self._objects))
            self._drop(oldest)
            self._known.discard(oldest)

    def _drop(self, key: ObjectKey) -> None:
        if self._objects.pop(key, None) is not None:
            self._bytes -= self._sizes.pop(key)

    def observe(self, event_type: str | None, obj: JSON) -> bool:
        """Apply a watch event for a source; True when what copies take from it changed."""
        key = key_of(obj)
        previous = self._objects.get(key)
        if event_type == "DELETED":
            self._drop(key)
            current = None
        else:
            current = _trimmed(obj)
            self._store(key, current)
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
        self._known.add(key)
        if obj is not None:
            self._store(key, _trimmed(obj))

    def get(self, key: ObjectKey) -> JSON | None:
        """The source ConfigMap, or None (absent, or not known yet)."""
        if key in self._objects:
            self._objects.move_to_end(key)
        return self._objects.get(key)

    def forget(self, key: ObjectKey) -> None:
        """No ConfigMapSync reads ``key`` any more: drop it."""
        self._drop(key)
        self._known.discard(key)
        self._epochs.pop(key, None)
