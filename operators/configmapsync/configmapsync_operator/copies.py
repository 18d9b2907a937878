"""Copies as plain dicts (pure): rendering, the ownership mark, and the slim cache records.

The operator caches every ConfigMap it can see, but only as a *slim record*: name, namespace,
uid, resourceVersion, ``immutable`` and, for ConfigMaps carrying an ownership mark, the mark, a
digest of the content (data + binaryData) and a digest of each label and annotation value. A
copy is current when its content, ``immutable`` and the labels and annotations the operator owns
equal those of the copy it would render now, so the cache never holds a second full copy of any
data; only the sources are cached in full (:mod:`configmapsync_operator.sources`).

The operator owns a copy's data and binaryData, its own marks (:data:`MARK_LABELS`,
:data:`MARK_ANNOTATIONS`) and the keys the ConfigMapSync's allowlists name; every other label or
annotation belongs to someone else (an admission webhook, a policy engine, a person) and is left
alone: copies are updated with a patch of the owned keys only (:func:`update_patch`).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from configmapsync_operator.consent import matches
from configmapsync_operator.models import (
    BOOKKEEPING_PREFIX,
    DELETION_POLICY_ANNOTATION,
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


def owner_key(obj: Mapping[str, Any]) -> ObjectKey | None:
    """(namespace, name) of the owning ConfigMapSync, from the owner annotation."""
    annotation = _strings(_meta(obj).get("annotations")).get(OWNER_ANNOTATION)
    if not isinstance(annotation, str) or annotation.count("/") != 2:
        return None
    namespace, name, _ = annotation.split("/")
    return namespace, name


def deletion_policy(obj: Mapping[str, Any]) -> str | None:
    """The deletion policy a copy records (None for copies of earlier versions)."""
    value = _strings(_meta(obj).get("annotations")).get(DELETION_POLICY_ANNOTATION)
    return value if value in ("Delete", "Orphan") else None


def owner_description(obj: Mapping[str, Any]) -> str:
    """The owner annotation (namespace/name/uid), or the bare owner uid."""
    annotation = _strings(_meta(obj).get("annotations")).get(OWNER_ANNOTATION)
    return annotation or f"uid {owner_uid(obj)}"


def is_bookkeeping(key: str) -> bool:
    """A label or annotation the operator or kubectl keeps about an object: never copied."""
    return key.startswith(BOOKKEEPING_PREFIX) or key == LAST_APPLIED


MARK_LABELS = (OWNER_LABEL,)
"""Labels the operator sets on every copy."""
MARK_ANNOTATIONS = (OWNER_ANNOTATION, SOURCE_ANNOTATION, DELETION_POLICY_ANNOTATION)
"""Annotations the operator sets on every copy."""


@dataclass(frozen=True)
class Allowlist:
    """The source's labels and annotations a copy carries (spec.copyLabels, copyAnnotations)."""

    labels: tuple[str, ...] = ()
    annotations: tuple[str, ...] = ()


def _owns(key: str, marks: tuple[str, ...], patterns: tuple[str, ...]) -> bool:
    return key in marks or (not is_bookkeeping(key) and matches(patterns, key))


def copied(entries: object, patterns: tuple[str, ...]) -> dict[str, str]:
    """Labels or annotations of the source that a copy carries: those ``patterns`` match."""
    return {k: v for k, v in _strings(entries).items() if _owns(k, (), patterns)}


def render_copy(
    sync: Mapping[str, Any],
    source: Mapping[str, Any],
    namespace: str,
    allow: Allowlist = Allowlist(),
) -> JSON:
    """The copy of ``source`` that ``sync`` keeps in ``namespace`` (no resourceVersion)."""
    meta = _meta(sync)
    source_namespace, name = key_of(source)
    source_meta = _meta(source)
    labels = copied(source_meta.get("labels"), allow.labels)
    labels[OWNER_LABEL] = str(meta["uid"])
    annotations = copied(source_meta.get("annotations"), allow.annotations)
    annotations[OWNER_ANNOTATION] = f"{meta['namespace']}/{meta['name']}/{meta['uid']}"
    annotations[SOURCE_ANNOTATION] = f"{source_namespace}/{name}"
    annotations[DELETION_POLICY_ANNOTATION] = str(
        (sync.get("spec") or {}).get("deletionPolicy") or "Delete"
    )
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


@functools.lru_cache(maxsize=8)
def _wanted_digest(data: tuple[tuple[str, str], ...], binary: tuple[tuple[str, str], ...]) -> str:
    """:func:`content_digest` of a rendered copy: every copy of a sync wants the same content,
    so a pass over its destinations digests it once (a few entries: the syncs reconciled at
    once; the strings are the source cache's own)."""
    return _digest([dict(data), dict(binary)])


@functools.lru_cache(maxsize=256)
def _value_digest(value: str) -> str:
    """Digest of one label or annotation value; the marks every copy of a sync carries (its
    owner, source and policy) are digested once."""
    return _digest(value)[:16]


_DIGESTS = {"labels": "labelDigests", "annotations": "annotationDigests"}
"""Where a record keeps the digest of each label and annotation value."""
_MARKS = {"labels": MARK_LABELS, "annotations": MARK_ANNOTATIONS}


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
        # the marks: owner (messages, finding a gone owner's copies), source (exact copies),
        # deletion policy
        kept = {k: annotations[k] for k in MARK_ANNOTATIONS if k in annotations}
        if kept:
            record_meta["annotations"] = kept
        record["contentDigest"] = content_digest(obj)
        for field in ("labels", "annotations"):
            entries = _strings(meta.get(field)).items()
            record[_DIGESTS[field]] = {k: _value_digest(v) for k, v in entries}
    return record


def _metadata_changes(
    record: Mapping[str, Any], desired: Mapping[str, Any], allow: Allowlist
) -> dict[str, dict[str, str | None]]:
    """Per field (labels, annotations): the owned keys to set, and to remove (None)."""
    changes: dict[str, dict[str, str | None]] = {}
    for field, marks in _MARKS.items():
        patterns: tuple[str, ...] = getattr(allow, field)
        digests = _strings(record.get(_DIGESTS[field]))
        wanted = _strings(_meta(desired).get(field))
        change: dict[str, str | None] = {
            k: v for k, v in wanted.items() if digests.get(k) != _value_digest(v)
        }
        change.update((k, None) for k in digests if k not in wanted and _owns(k, marks, patterns))
        if change:
            changes[field] = change
    return changes


def is_current(record: Mapping[str, Any], desired: Mapping[str, Any], allow: Allowlist) -> bool:
    """The cached copy ``record`` already equals the rendered ``desired`` copy in everything
    the operator owns (keys others added are not compared)."""
    return content_is_current(record, desired) and not _metadata_changes(record, desired, allow)


def update_patch(record: Mapping[str, Any], desired: Mapping[str, Any], allow: Allowlist) -> JSON:
    """A strategic merge patch making the copy ``record`` current: the owned labels and
    annotations that differ (removed ones as null), and data and binaryData replaced whole when
    the content differs; uid and resourceVersion preconditions. Other keys are left alone."""
    meta = record["metadata"]
    patch_meta: JSON = {"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]}
    patch_meta.update(_metadata_changes(record, desired, allow))
    patch: JSON = {"metadata": patch_meta}
    if not content_is_current(record, desired):
        for field in ("data", "binaryData"):
            patch[field] = {"$patch": "replace", **_strings(desired.get(field))}
        if desired.get("immutable") is True:
            patch["immutable"] = True
    return patch


def content_is_current(record: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """Data, binaryData and ``immutable`` are as desired (only metadata may differ)."""
    wanted = _wanted_digest(
        tuple(_strings(desired.get("data")).items()),
        tuple(_strings(desired.get("binaryData")).items()),
    )
    return record.get("contentDigest") == wanted and record.get("immutable") is (
        desired.get("immutable") is True
    )


def is_terminating(obj: Mapping[str, Any]) -> bool:
    """The object has a deletionTimestamp."""
    return _meta(obj).get("deletionTimestamp") is not None
