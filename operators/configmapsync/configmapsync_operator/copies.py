"""Copies as plain dicts (pure): rendering, the ownership mark, and the slim cache records.

The operator caches every ConfigMap (and, for SecretSyncs, every Secret) it can see, but only
as a *slim record*: name, namespace, uid, resourceVersion, ``immutable``, a Secret's ``type``
and, for objects carrying an ownership mark, the mark, a digest of the content (data +
binaryData) and a digest of each label and annotation value. A copy is current when its
content, ``immutable``, type and the labels and annotations the operator owns equal those of the
copy it would render now, so the cache never holds a second full copy of any data (nor a
Secret's value); only the sources are cached in full (:mod:`configmapsync_operator.sources`).

The operator owns a copy's data and binaryData (the source's, as the key filter of
:mod:`configmapsync_operator.keys` selects them), its own marks (:data:`MARK_LABELS`,
:data:`MARK_ANNOTATIONS`) and the keys the ConfigMapSync's allowlists name; every other label or
annotation belongs to someone else (an admission webhook, a policy engine, a person) and is left
alone: copies are updated with a patch of the owned keys only (:func:`update_patch`).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from configmapsync_operator.consent import matches
from configmapsync_operator.keys import ALL_KEYS, KeyFilter
from configmapsync_operator.kinds import CONFIGMAPS, SyncKind
from configmapsync_operator.models import (
    BOOKKEEPING_PREFIX,
    DELETION_POLICY_ANNOTATION,
    LAST_APPLIED,
    OWNER_ANNOTATION,
    OWNER_LABEL,
    SOURCE_ANNOTATION,
)
from opsuite_common.store import JSON

ObjectKey = tuple[str, str]


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _strings(obj.get("metadata"))


def _strings(value: object) -> Mapping[str, Any]:
    """``value`` when it is a mapping (read, never changed), else an empty one. A plain dict
    is told apart without the ABC check, which cost more than the rest of a copy's check."""
    if isinstance(value, (dict, Mapping)):
        return value
    return {}


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


def _digest(value: object) -> str:
    # The same bytes as json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False),
    # made several times faster: a copy's digest is taken for each of the 20,000 copies an
    # operator lists at start (#19).
    canonical = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canonical).hexdigest()[:32]


CONTENT_FIELDS = ("data", "binaryData")
"""The fields holding a copy's content (what the key filter selects from)."""


def contents(obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The content maps of ``obj`` by field (empty when absent)."""
    return {field: _strings(obj.get(field)) for field in CONTENT_FIELDS}


def content_digest(obj: Mapping[str, Any]) -> str:
    """Digest of data and binaryData (what ``immutable`` freezes)."""
    return _digest([dict(_strings(obj.get("data"))), dict(_strings(obj.get("binaryData")))])


@functools.lru_cache(maxsize=8)
def _wanted_digest(data: tuple[tuple[str, str], ...], binary: tuple[tuple[str, str], ...]) -> str:
    """:func:`content_digest` of a rendered copy: the passes of the syncs reading one source
    digest its content once (a few entries: the syncs reconciled at once; the strings are the
    source cache's own)."""
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
    if isinstance(obj.get("type"), str):  # a Secret's, kept by its copies
        record["type"] = obj["type"]
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


class Desired:
    """The copy a sync keeps of its source, the same in every destination but for its
    namespace: rendered, and its digests taken, once per pass (a pass checks hundreds of
    destinations against it). A Secret's copy has its type."""

    def __init__(
        self,
        sync: Mapping[str, Any],
        source: Mapping[str, Any],
        allow: Allowlist = Allowlist(),
        keys: KeyFilter = ALL_KEYS,
        kind: SyncKind = CONFIGMAPS,
    ) -> None:
        meta = _meta(sync)
        self.kind = kind
        source_type = source.get("type")
        self.type = source_type if kind.typed and isinstance(source_type, str) else None
        source_namespace, self.name = key_of(source)
        source_meta = _meta(source)
        self.allow = allow
        labels = copied(source_meta.get("labels"), allow.labels)
        labels[OWNER_LABEL] = str(meta["uid"])
        annotations = copied(source_meta.get("annotations"), allow.annotations)
        annotations[OWNER_ANNOTATION] = f"{meta['namespace']}/{meta['name']}/{meta['uid']}"
        annotations[SOURCE_ANNOTATION] = f"{source_namespace}/{self.name}"
        annotations[DELETION_POLICY_ANNOTATION] = str(
            (sync.get("spec") or {}).get("deletionPolicy") or "Delete"
        )
        self.metadata = {"labels": labels, "annotations": annotations}
        selected = {f: keys.select(entries) for f, entries in contents(source).items()}
        self.content = {f: entries for f, entries in selected.items() if entries}
        self.immutable = source.get("immutable") is True
        self.content_digest = _wanted_digest(
            tuple(selected["data"].items()), tuple(selected["binaryData"].items())
        )
        self._digests = {
            field: {k: _value_digest(v) for k, v in values.items()}
            for field, values in self.metadata.items()
        }

    def manifest(self, namespace: str) -> JSON:
        """The copy in ``namespace`` (no uid, no resourceVersion)."""
        copy: JSON = {
            "apiVersion": "v1",
            "kind": self.kind.object_kind,
            "metadata": {
                "name": self.name,
                "namespace": namespace,
                **{field: dict(values) for field, values in self.metadata.items()},
            },
        }
        if self.type is not None:
            copy["type"] = self.type
        copy.update((field, dict(values)) for field, values in self.content.items())
        if self.immutable:
            copy["immutable"] = True
        return copy

    def content_is_current(self, record: Mapping[str, Any]) -> bool:
        """The cached ``record`` has this data, binaryData, ``immutable`` and type (only
        metadata may differ)."""
        return (
            record.get("contentDigest") == self.content_digest
            and record.get("immutable") is self.immutable
            and not self.retypes(record)
        )

    def retypes(self, record: Mapping[str, Any]) -> bool:
        """The cached ``record`` is of another type than the copy (which only a new object
        can change)."""
        return record.get("type") != self.type

    def is_current(self, record: Mapping[str, Any]) -> bool:
        """The cached copy ``record`` already equals this one in everything the operator owns
        (keys others added are not compared)."""
        return self.content_is_current(record) and not self._metadata_changes(record)

    def update_patch(self, record: Mapping[str, Any]) -> JSON:
        """A strategic merge patch making the copy ``record`` current: the owned labels and
        annotations that differ (removed ones as null), and data and binaryData replaced whole
        when the content differs; uid and resourceVersion preconditions. Other keys are left
        alone."""
        meta = record["metadata"]
        patch_meta: JSON = {"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]}
        patch_meta.update(self._metadata_changes(record))
        patch: JSON = {"metadata": patch_meta}
        if not self.content_is_current(record):
            for field in self.kind.content_fields:
                patch[field] = {"$patch": "replace", **self.content.get(field, {})}
            if self.immutable:
                patch["immutable"] = True
        return patch

    def _metadata_changes(self, record: Mapping[str, Any]) -> dict[str, dict[str, str | None]]:
        """Per field (labels, annotations): the owned keys to set, and to remove (None)."""
        changes: dict[str, dict[str, str | None]] = {}
        for field, marks in _MARKS.items():
            have = _strings(record.get(_DIGESTS[field]))
            want = self._digests[field]
            if have == want:
                continue
            values = self.metadata[field]
            change: dict[str, str | None] = {
                k: values[k] for k, digest in want.items() if have.get(k) != digest
            }
            patterns: tuple[str, ...] = getattr(self.allow, field)
            change.update((k, None) for k in have if k not in want and _owns(k, marks, patterns))
            if change:
                changes[field] = change
        return changes


def is_terminating(obj: Mapping[str, Any]) -> bool:
    """The object has a deletionTimestamp."""
    return _meta(obj).get("deletionTimestamp") is not None
