"""The source owner's consent and the key allowlists (pure): patterns where ``*`` is the wildcard.

A source ConfigMap is copied only into the namespaces its annotation
``sync.opsuite.dev/allowed-namespaces`` names: a comma-separated list of namespace names and
patterns, where ``*`` matches any run of characters and nothing else is special (``*`` alone
allows every namespace). Globs rather than regular expressions: a namespace name has no
characters a regular expression would need, and an unanchored regular expression (``team``
also matching ``not-my-team``) is the classic mistake of replicators (kubernetes-replicator #7).
The same patterns select the labels and annotations a copy carries (``copyLabels``,
``copyAnnotations``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any

from configmapsync_operator.models import ALLOWED_NAMESPACES_ANNOTATION


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")))


def matches(patterns: Iterable[str], value: str) -> bool:
    """Whether ``value`` equals a pattern, ``*`` in a pattern matching any run of characters."""
    return any(_compiled(p).fullmatch(value) is not None for p in patterns)


def allowed_namespaces(source: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The patterns of the source's consent annotation; None when it has none (no consent)."""
    annotations = (source.get("metadata") or {}).get("annotations")
    value = (
        annotations.get(ALLOWED_NAMESPACES_ANNOTATION) if isinstance(annotations, Mapping) else None
    )
    if not isinstance(value, str):
        return None
    return tuple(p for p in (part.strip() for part in value.split(",")) if p)
