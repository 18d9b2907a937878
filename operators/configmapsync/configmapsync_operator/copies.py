"""Copies as plain dicts (pure): rendering, the ownership mark, and the slim cache records.

The operator caches every ConfigMap it can see, but only as a *slim record*: name, namespace,
uid, resourceVersion, ``immutable`` and, for ConfigMaps carrying an ownership mark, the mark and
two digests (content: data + binaryData; metadata: labels + annotations). A copy is current when
its digests and ``immutable`` equal those of the copy the operator would render now, so the
cache never holds a second full copy of any data; only the sources are cached in full
(:mod:`configmapsync_operator.sources`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from configmapsync_operator.models import (
    BOOKKEEPING_PREFIX,
    LAST_APPLIED,
    OWNER_ANNOTATION,
    OWNER_LABEL,
    SOURCE_ANNOTATION,
)

JSON = dict[str, Any]
ObjectKey = tuple[str, str]


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _strings(value: object) -> dict[str, str]:
    return dict(value) if isinstance(value, Mapping) else {}


def key_of(obj: Mapping[str, Any]) -> ObjectKey:
    """(namespace, name) of an object."""
    meta = _meta(obj)
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


def owner_uid(obj: Mapping[str, Any] | None) -> str | None:
    """The uid in the ownership label, or None for a ConfigMap no ConfigMapSync owns."""
    if obj is None:
        return None
    value = _strings(_meta(obj).get("labels")).get(OWNER_LABEL)
    return value if isinstance(value, str) else None


def is_exact_copy(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` is a copy as the operator wrote it: named like the source its source
    annotation names. A copy someone saved under another name keeps the ownership label and
    annotations, but is theirs: never updated or deleted."""
    source = _strings(_meta(obj).get("annotations")).get(SOURCE_ANNOTATION)
    return isinstance(source, str) and source.rpartition("/")[2] == _meta(obj).get("name")


def owner_description(obj: Mapping[str, Any]) -> str:
    """The owner annotation (namespace/name/uid), or the bare owner uid."""
    annotation = _strings(_meta(obj).get("annotations")).get(OWNER_ANNOTATION)
    return annotation or f"uid {owner_uid(obj)}"


def is_bookkeeping(key: str) -> bool:
    """A label or annotation the operator or kubectl keeps about an object: never copied."""
    return key.startswith(BOOKKEEPING_PREFIX) or key == LAST_APPLIED


def copied(entries: object) -> dict[str, str]:
    """Labels or annotations of the source that a copy carries."""
    return {k: v for k, v in _strings(entries).items() if not is_bookkeeping(k)}


def render_copy(sync: Mapping[str, Any], source: Mapping[str, Any], namespace: str) -> JSON:
    """The copy of ``source`` that ``sync`` keeps in ``namespace`` (no resourceVersion)."""
    meta = _meta(sync)
    source_namespace, name = key_of(source)
    source_meta = _meta(source)
    labels = copied(source_meta.get("labels"))
    labels[OWNER_LABEL] = str(meta["uid"])
    annotations = copied(source_meta.get("annotations"))
    annotations[OWNER_ANNOTATION] = f"{meta['namespace']}/{meta['name']}/{meta['uid']}"
    annotations[SOURCE_ANNOTATION] = f"{source_namespace}/{name}"
    copy: JSON = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations,
        },
    }
    for field in ("data", "binaryData"):
        if source.get(field):
            copy[field] = dict(source[field])
    if source.get("immutable") is True:
        copy["immutable"] = True
    return copy


def _digest(value: object) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def content_digest(obj: Mapping[str, Any]) -> str:
    """Digest of data and binaryData (what ``immutable`` freezes)."""
    return _digest([_strings(obj.get("data")), _strings(obj.get("binaryData"))])


def metadata_digest(obj: Mapping[str, Any]) -> str:
    """Digest of labels and annotations."""
    meta = _meta(obj)
    return _digest([_strings(meta.get("labels")), _strings(meta.get("annotations"))])


KEPT_ANNOTATIONS = (OWNER_ANNOTATION, SOURCE_ANNOTATION)
"""Annotations a copy's cache record keeps: its owner (for messages) and its source (to tell
an exact copy, :func:`is_exact_copy`)."""


def slim(obj: Mapping[str, Any]) -> JSON:
    """The cache record of a ConfigMap (see the module docstring)."""
    meta = _meta(obj)
    record_meta: JSON = {
        key: meta[key]
        for key in ("name", "namespace", "uid", "resourceVersion", "deletionTimestamp")
        if meta.get(key) is not None
    }
    record: JSON = {"metadata": record_meta, "immutable": obj.get("immutable") is True}
    owner = owner_uid(obj)
    if owner is not None:
        record_meta["labels"] = {OWNER_LABEL: owner}
        annotations = _strings(meta.get("annotations"))
        kept = {k: annotations[k] for k in KEPT_ANNOTATIONS if k in annotations}
        if kept:
            record_meta["annotations"] = kept
        record["contentDigest"] = content_digest(obj)
        record["metadataDigest"] = metadata_digest(obj)
    return record


def is_current(record: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """The cached copy ``record`` already equals the rendered ``desired`` copy."""
    return (
        record.get("contentDigest") == content_digest(desired)
        and record.get("metadataDigest") == metadata_digest(desired)
        and record.get("immutable") is (desired.get("immutable") is True)
    )


def content_is_current(record: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """Data, binaryData and ``immutable`` are as desired (only metadata may differ)."""
    return record.get("contentDigest") == content_digest(desired) and record.get("immutable") is (
        desired.get("immutable") is True
    )


def is_terminating(obj: Mapping[str, Any]) -> bool:
    """The object has a deletionTimestamp."""
    return _meta(obj).get("deletionTimestamp") is not None
