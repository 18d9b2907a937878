"""A sync's spec as the planner reads it, and cheap reads of raw objects for indexes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from configmapsync_operator.kinds import CONFIGMAPS, SyncKind
from configmapsync_operator.models import SyncSpec

ObjectKey = tuple[str, str]


class InvalidSpecError(ValueError):
    """The spec cannot be acted upon; the message is user-facing."""


def parse_spec(sync: Mapping[str, Any], kind: SyncKind = CONFIGMAPS) -> SyncSpec:
    """Validate ``sync["spec"]`` as ``kind``'s spec (strictly, as the API server's schema);
    InvalidSpecError else.

    Repeats the CRD's CEL rules (some destination is given, no namespace both listed and
    excluded, not both includeKeys and excludeKeys); the source namespace among the
    destinations is reported per target by the planner (the CRD cannot see the default).
    """
    raw = sync.get("spec")
    if not isinstance(raw, Mapping):
        raise InvalidSpecError("spec: Field required")
    try:
        spec = kind.spec_model.model_validate(raw, strict=True)
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        path = ".".join(str(part) for part in ("spec", *first["loc"]))
        raise InvalidSpecError(f"{path}: {first['msg'].removeprefix('Value error, ')}") from None
    if not spec.destination_namespaces and spec.namespace_selector is None:
        raise InvalidSpecError("spec: set destinationNamespaces, namespaceSelector or both")
    if set(spec.destination_namespaces or ()) & set(spec.exclude_namespaces or ()):
        raise InvalidSpecError(
            "spec.excludeNamespaces: a namespace cannot be both listed in "
            "destinationNamespaces and excluded by name"
        )
    if spec.include_keys is not None and spec.exclude_keys is not None:
        raise InvalidSpecError("spec.includeKeys: set includeKeys or excludeKeys, not both")
    return spec


def _spec(sync: Mapping[str, Any] | None) -> Mapping[str, Any]:
    raw = (sync or {}).get("spec")
    return raw if isinstance(raw, Mapping) else {}


def source_key(sync: Mapping[str, Any] | None, kind: SyncKind = CONFIGMAPS) -> ObjectKey | None:
    """(namespace, name) of the source, straight from the raw object."""
    if sync is None:
        return None
    spec = _spec(sync)
    name = spec.get(kind.name_field)
    if not isinstance(name, str) or not name:
        return None
    namespace = spec.get("sourceNamespace") or (sync.get("metadata") or {}).get("namespace", "")
    return str(namespace), name


def source_name(sync: Mapping[str, Any], kind: SyncKind = CONFIGMAPS) -> list[str]:
    """Indexer: the name every copy (and the source) has."""
    key = source_key(sync, kind)
    return [key[1]] if key else []


def listed_namespaces(sync: Mapping[str, Any]) -> list[str]:
    """Indexer: spec.destinationNamespaces."""
    listed = _spec(sync).get("destinationNamespaces")
    return [n for n in listed if isinstance(n, str)] if isinstance(listed, list) else []


def has_selector(sync: Mapping[str, Any]) -> list[bool]:
    """Indexer: [True] for syncs with a namespaceSelector."""
    return [True] if isinstance(_spec(sync).get("namespaceSelector"), Mapping) else []


def source_index(sync: Mapping[str, Any], kind: SyncKind = CONFIGMAPS) -> list[ObjectKey]:
    """Indexer: the source's key."""
    key = source_key(sync, kind)
    return [key] if key else []


def uid_index(sync: Mapping[str, Any]) -> list[str]:
    """Indexer: the object's uid."""
    uid = (sync.get("metadata") or {}).get("uid")
    return [uid] if isinstance(uid, str) else []
