"""Which keys of the source's content a copy carries (pure): spec.includeKeys or excludeKeys.

The filter is part of the desired copy (:class:`~configmapsync_operator.copies.Desired`), so a
copy's content digest is compared with the digest of the *filtered* source: a key dropped from
the selection is removed from the copies, and a steady state writes nothing. Patterns are those
of the consent annotations and allowlists (:func:`~configmapsync_operator.consent.matches`).
Nothing here knows what kind of object holds the content, only its key-value maps.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from configmapsync_operator.consent import matches
from configmapsync_operator.models import SyncSpec


@dataclass(frozen=True)
class KeyFilter:
    """The keys selected: those ``include`` matches (None: every key), less those ``exclude``
    matches."""

    include: tuple[str, ...] | None = None
    exclude: tuple[str, ...] = ()

    def selects(self, key: str) -> bool:
        """Whether a copy carries ``key``."""
        if self.include is not None and not matches(self.include, key):
            return False
        return not matches(self.exclude, key)

    def select(self, entries: Mapping[str, str]) -> dict[str, str]:
        """The selected entries of one content map (data, binaryData)."""
        if self.include is None and not self.exclude:
            return dict(entries)
        return {k: v for k, v in entries.items() if self.selects(k)}

    def missing(self, contents: Iterable[Mapping[str, str]]) -> tuple[str, ...]:
        """The keys ``include`` names literally (not patterns) that no content map has."""
        present = {key for entries in contents for key in entries}
        return tuple(k for k in self.include or () if "*" not in k and k not in present)


ALL_KEYS = KeyFilter()
"""The filter of a spec with neither includeKeys nor excludeKeys."""


def key_filter(spec: SyncSpec) -> KeyFilter:
    """The spec's key filter (includeKeys and excludeKeys are never both set)."""
    include = tuple(spec.include_keys) if spec.include_keys is not None else None
    return KeyFilter(include, tuple(spec.exclude_keys or ()))
