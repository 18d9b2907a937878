"""Parsed specs of watched custom resources, parsed once per (uid, generation).

Pod events look up the selectors of every custom resource in the pod's namespace; validating
each spec with pydantic on every pod event would be wasted work, as the spec can only change
with metadata.generation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class SpecCache(Generic[T]):
    """``parse(obj)`` of each object, kept until its generation changes; None when invalid."""

    def __init__(self, parse: Callable[[Mapping[str, Any]], T], invalid: type[Exception]) -> None:
        self._parse = parse
        self._invalid = invalid
        self._entries: dict[str, tuple[object, T | None]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, obj: Mapping[str, Any]) -> T | None:
        """The parsed spec of ``obj``; None when ``parse`` raised the ``invalid`` error."""
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        generation = meta.get("generation")
        cached = self._entries.get(uid)
        if cached is not None and cached[0] == generation:
            return cached[1]
        try:
            parsed: T | None = self._parse(obj)
        except self._invalid:
            parsed = None
        self._entries[uid] = (generation, parsed)
        return parsed

    def forget(self, uid: str) -> None:
        """Drop the entry of a deleted object."""
        self._entries.pop(uid, None)
