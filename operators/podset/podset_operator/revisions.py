"""A PodSet's pod templates kept as ControllerRevisions (apps/v1), as a StatefulSet keeps them.

Each template the PodSet has had is one revision named ``<podset>-<template hash>``, with the
template as ``data.template``, controlled by the PodSet (so garbage-collected with it) and
labelled with the hash and, when the name fits a label value, ``apps.opsuite.dev/podset``. Only
revisions whose controller ownerReference carries the PodSet's uid are its own: one someone else
made under the same name or label is never renumbered, deleted or read. Nothing is ever read
from a revision's data either: going back to an earlier template goes through the spec (see
docs/podset.md), which admission checks like any other template change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from podset_operator.models import GROUP, KIND, NAME_LABEL
from podset_operator.pod_state import TEMPLATE_HASH_LABEL
from podset_operator.template import HASH_LENGTH, owner_reference

MAX_NAME = 253
_MAX_LABEL_VALUE = 63


@dataclass(frozen=True)
class Revision:
    """The fields of one of the PodSet's own ControllerRevisions that the planner reads."""

    name: str
    uid: str
    number: int
    hash: str
    template: Mapping[str, Any] | None = None
    """The template it keeps (``data.template``); what a paused PodSet's new pods get."""


@dataclass(frozen=True)
class RevisionWrites:
    """What one reconcile writes to the PodSet's ControllerRevisions; ``empty`` once kept."""

    create: Mapping[str, Any] | None = None
    """ControllerRevision manifest of a template not kept yet."""
    renumber: tuple[str, str, int] | None = None
    """(name, uid, revision): an earlier template in use again becomes the newest revision."""
    delete: tuple[tuple[str, str], ...] = ()
    """(name, uid) of old revisions beyond revisionHistoryLimit, oldest first."""

    @property
    def empty(self) -> bool:
        """Nothing is created, renumbered or deleted."""
        return self.create is None and self.renumber is None and not self.delete


_SLIM_METADATA = ("name", "namespace", "uid", "labels", "ownerReferences", "deletionTimestamp")


def _podset_controlled(meta: Mapping[str, Any]) -> bool:
    return any(
        r.get("controller") and r.get("kind") == KIND and str(r.get("apiVersion")).startswith(GROUP)
        for r in meta.get("ownerReferences") or ()
    )


def slim_revision(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What the revision cache keeps: the fields :func:`owned_revisions` reads, and the data
    only of PodSets' revisions (every StatefulSet's and DaemonSet's revisions in the served
    namespaces are cached too)."""
    meta = obj.get("metadata") or {}
    record = {
        "metadata": {k: meta[k] for k in _SLIM_METADATA if k in meta},
        "revision": obj.get("revision"),
    }
    if _podset_controlled(meta) and isinstance(obj.get("data"), Mapping):
        record["data"] = obj["data"]
    return record


def revision_name(podset_name: str, hash_: str) -> str:
    """``<podset>-<hash>``, the PodSet's name cut so that the whole is a valid object name."""
    return f"{podset_name[: MAX_NAME - HASH_LENGTH - 1]}-{hash_}"


def _controlled_by(obj: Mapping[str, Any], uid: str) -> bool:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("controller") and r.get("uid") == uid for r in refs)


def owned_revisions(revisions: Sequence[Mapping[str, Any]], uid: str) -> list[Revision]:
    """The revisions controlled by the PodSet of ``uid`` that carry a hash label."""
    owned = []
    for obj in revisions:
        meta = obj.get("metadata") or {}
        hash_ = (meta.get("labels") or {}).get(TEMPLATE_HASH_LABEL)
        number = obj.get("revision")
        if (
            _controlled_by(obj, uid)
            and isinstance(hash_, str)
            and isinstance(number, int)
            and not meta.get("deletionTimestamp")
        ):
            template = (obj.get("data") or {}).get("template")
            kept = template if isinstance(template, Mapping) else None
            owned.append(Revision(meta["name"], meta["uid"], number, hash_, kept))
    return owned


def revision_manifest(
    podset: Mapping[str, Any], template: Mapping[str, Any], hash_: str, number: int
) -> dict[str, Any]:
    """The ControllerRevision keeping ``template`` (as the spec holds it) as ``number``."""
    meta = podset["metadata"]
    labels = {TEMPLATE_HASH_LABEL: hash_}
    if len(meta["name"]) <= _MAX_LABEL_VALUE:
        labels[NAME_LABEL] = meta["name"]
    return {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": revision_name(meta["name"], hash_),
            "namespace": meta["namespace"],
            "labels": labels,
            "ownerReferences": [owner_reference(podset)],
        },
        "data": {"template": dict(template)},
        "revision": number,
    }


def plan_revisions(
    podset: Mapping[str, Any],
    template: Mapping[str, Any],
    hash_: str,
    owned: Sequence[Revision],
    history_limit: int,
    pod_hashes: frozenset[str],
) -> RevisionWrites:
    """The writes that make the current template (of hash ``hash_``) the newest revision and
    keep at most ``history_limit`` old ones besides those of active pods (``pod_hashes``), as
    a Deployment keeps its old ReplicaSets: the oldest go first.
    """
    newest = max((r.number for r in owned), default=0)
    update = next((r for r in owned if r.hash == hash_), None)
    create = None
    renumber = None
    if update is None:
        create = revision_manifest(podset, template, hash_, newest + 1)
    elif update.number < newest:
        renumber = (update.name, update.uid, newest + 1)
    old = sorted(
        (r for r in owned if r.hash != hash_ and r.hash not in pod_hashes),
        key=lambda r: r.number,
    )
    expired = old[: max(0, len(old) - history_limit)]
    return RevisionWrites(create, renumber, tuple((r.name, r.uid) for r in expired))
