"""Consent in both directions and the key allowlists (pure): patterns where ``*`` is the wildcard.

A source ConfigMap is copied only into the namespaces its annotation
``sync.opsuite.dev/allowed-namespaces`` names: a comma-separated list of namespace names and
patterns, where ``*`` matches any run of characters and nothing else is special (``*`` alone
allows every namespace). And a namespace receives copies only from the source namespaces its
Namespace object's annotation ``sync.opsuite.dev/accept-from`` names, in the same form; a
protected namespace (``kube-*``, ``openshift-*``, the operator's own) only from those it names
literally. The first is the consent of whoever may edit the source, the second of whoever may
edit the Namespace: a tenant holding ``edit`` in one namespace can give the first for its own
ConfigMaps, never the second for a namespace it does not administer.

Globs rather than regular expressions: a namespace name has no characters
a regular expression would need, and an unanchored regular expression (``team``
also matching ``not-my-team``) is the classic mistake of replicators (kubernetes-replicator #7).
The same patterns select the labels and annotations a copy carries (``copyLabels``,
``copyAnnotations``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any

from configmapsync_operator.models import (
    ACCEPT_FROM_ANNOTATION,
    ALLOWED_NAMESPACES_ANNOTATION,
    PROTECTED_NAMESPACES,
)


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")))


def matches(patterns: Iterable[str], value: str) -> bool:
    """Whether ``value`` equals a pattern, ``*`` in a pattern matching any run of characters."""
    return any(_compiled(p).fullmatch(value) is not None for p in patterns)


def _patterns(obj: Mapping[str, Any], annotation: str) -> tuple[str, ...] | None:
    annotations = (obj.get("metadata") or {}).get("annotations")
    value = annotations.get(annotation) if isinstance(annotations, Mapping) else None
    if not isinstance(value, str):
        return None
    return tuple(p for p in (part.strip() for part in value.split(",")) if p)


def allowed_namespaces(source: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The patterns of the source's consent annotation; None when it has none (no consent)."""
    return _patterns(source, ALLOWED_NAMESPACES_ANNOTATION)


def accepted_sources(namespace: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The patterns of a Namespace's consent annotation; None when it has none (no consent)."""
    return _patterns(namespace, ACCEPT_FROM_ANNOTATION)


def protected(namespace: str, own: str | None) -> bool:
    """Whether ``namespace`` accepts copies only from sources it names literally."""
    return namespace == own or matches(PROTECTED_NAMESPACES, namespace)


def accepts(namespace: Mapping[str, Any], source_namespace: str, own: str | None) -> bool:
    """Whether the Namespace record consents to copies from ``source_namespace``."""
    patterns = accepted_sources(namespace)
    if patterns is None:
        return False
    name = str((namespace.get("metadata") or {}).get("name"))
    if protected(name, own):
        return source_namespace in patterns
    return matches(patterns, source_namespace)
