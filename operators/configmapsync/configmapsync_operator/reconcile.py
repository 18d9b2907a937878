"""Pure ConfigMapSync planning: spec + cached state -> the writes that make copies current.

Inputs are what the caches hold: the ConfigMapSync, its source ConfigMap (full, or None when it
does not exist), the namespaces, and slim records (:mod:`configmapsync_operator.copies`) of the
ConfigMaps named like the source (``occupants``, by namespace) and of the copies this
ConfigMapSync owns anywhere (``owned``). Rules:

* consent comes first, in both directions (:mod:`configmapsync_operator.destinations`): a
  destination the source's ``sync.opsuite.dev/allowed-namespaces`` annotation does not allow
  (NotAllowedBySource), or whose Namespace's ``sync.opsuite.dev/accept-from`` annotation does
  not accept the source's namespace (NotAcceptedByNamespace), gets nothing written, and the
  copy this ConfigMapSync owns there is deleted; without the annotation at all (say, before
  the upgrade that introduced it) nothing is written either, but existing copies are kept
  (frozen, like the copies of a deleted source);
* the source and every ConfigMap not marked with this ConfigMapSync's uid are never updated or
  deleted; the exceptions are taking over an *unmarked* ConfigMap under
  ``conflictPolicy: Overwrite``, and a copy whose owner is gone (its uid is no ConfigMapSync's),
  never a ConfigMap that some ConfigMapSync reads as its source;
* the source namespace is never a destination;
* a copy is patched (only the keys the operator owns) with its cached uid and resourceVersion as
  preconditions, replaced (delete + create) when it is immutable and its data must change, and
  deleted (uid + resourceVersion preconditions) when its namespace is no longer a destination;
* when the source is gone, nothing is created or updated and the copies are kept;
* a ConfigMapSync carries no finalizer (the one of earlier versions is removed where found):
  once it is gone, :func:`collect` plans for its copies what their deletion policy says (delete,
  or unmark for Orphan), as Kubernetes' garbage collector does for dependents whose owner is
  gone. A deleting ConfigMapSync that still has the earlier finalizer is cleaned up first, then
  the finalizer removed.

The writes a Plan lists are made by :mod:`configmapsync_operator.actions`; their outcome, with
the failures, becomes the status through :func:`configmapsync_operator.status.status_patch`.
"""

from __future__ import annotations

from collections.abc import Collection, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from configmapsync_operator.copies import (
    Allowlist,
    Desired,
    contents,
    deletion_policy,
    is_exact_copy,
    is_terminating,
    key_of,
    owner_description,
    owner_uid,
)
from configmapsync_operator.destinations import consented
from configmapsync_operator.keys import key_filter
from configmapsync_operator.kinds import CONFIGMAPS, SyncKind
from configmapsync_operator.models import FINALIZER, SyncSpec
from configmapsync_operator.spec import InvalidSpecError, ObjectKey, parse_spec, source_key
from configmapsync_operator.status import (
    CONFLICT,
    INVALID_SPEC,
    SECRET_TYPE_NOT_COPIED,
    SOURCE_NOT_WATCHED,
    TERMINATING,
    Issue,
    Outcome,
    as_utc,
    status_patch,
)
from opsuite_common.requester import REQUESTER_NOT_ALLOWED
from opsuite_common.store import JSON


@dataclass(frozen=True)
class Write:
    """Create, update or replace the copy in one namespace."""

    namespace: str
    manifest: JSON
    """The desired copy; for a take-over it carries the observed uid and resourceVersion."""
    observed: Mapping[str, Any] | None = None
    """The cached slim record the decision rests on (the cache's own object, so that the
    executor can tell whether the watch replaced it meanwhile); None when nothing is there."""
    replace: bool = False
    """Delete ``observed`` (immutable, data changed) first, then create ``manifest``."""
    patch: JSON | None = None
    """For an update of an own copy: the strategic merge patch of the owned keys (else the
    update is a take-over that writes ``manifest`` whole)."""

    @property
    def verb(self) -> str:
        """create, update or replace."""
        if self.replace:
            return "replace"
        return "create" if self.observed is None else "update"


@dataclass(frozen=True)
class Plan:
    """Actions for one reconcile of one ConfigMapSync; ``is_empty`` in steady state."""

    outcome: Outcome
    writes: tuple[Write, ...] = ()
    deletes: tuple[Mapping[str, Any], ...] = ()
    """Slim records of owned copies to delete."""
    unmarks: tuple[Mapping[str, Any], ...] = ()
    """Slim records of owned copies to release (deletionPolicy Orphan)."""
    strip_finalizer: bool = False
    """Remove the finalizer of earlier versions from a live ConfigMapSync, before the writes."""
    remove_finalizer: bool = False
    """After the deletes/unmarks succeed (a ConfigMapSync with that finalizer is being
    deleted)."""
    status_patch: JSON | None = None
    """Status fields to write if every write succeeds; None when unchanged."""

    @property
    def is_empty(self) -> bool:
        """Nothing to write, delete, unmark, finalize or report."""
        return not (
            self.writes
            or self.deletes
            or self.unmarks
            or self.strip_finalizer
            or self.remove_finalizer
            or self.status_patch is not None
        )


def _must_replace(desired: Desired, observed: Mapping[str, Any]) -> bool:
    """Whether only a new object can make ``observed`` current: it is immutable and its content
    must change, or it is of another type (a Secret's type cannot change)."""
    if desired.retypes(observed):
        return True
    return observed.get("immutable") is True and not desired.content_is_current(observed)


def _overwrite(namespace: str, desired: Desired, observed: Mapping[str, Any]) -> Write:
    """Update ``observed`` to ``desired``, or replace it when only a new object can do."""
    manifest = desired.manifest(namespace)
    if _must_replace(desired, observed):
        return Write(namespace, manifest, observed, replace=True)
    meta = observed["metadata"]
    manifest["metadata"].update(uid=meta["uid"], resourceVersion=meta["resourceVersion"])
    return Write(namespace, manifest, observed)


def _update(namespace: str, desired: Desired, observed: Mapping[str, Any]) -> Write:
    """Patch the own copy ``observed`` to ``desired`` (owned keys only), or replace it when
    only a new object can do."""
    manifest = desired.manifest(namespace)
    if _must_replace(desired, observed):
        return Write(namespace, manifest, observed, replace=True)
    return Write(namespace, manifest, observed, patch=desired.update_patch(observed))


def _owner_is_served(record: Mapping[str, Any], served: Collection[str]) -> bool:
    """Whether the ConfigMapSync that marked ``record`` lived in a served namespace (so that
    its absence from the cache means it is gone, not merely unwatched)."""
    if not served:
        return True
    return owner_description(record).split("/")[0] in served


def _cleanup(
    sync: Mapping[str, Any], owned: Sequence[Mapping[str, Any]], source: ObjectKey | None
) -> Plan:
    meta = sync["metadata"]
    if FINALIZER not in (meta.get("finalizers") or ()):
        return Plan(Outcome())
    spec = sync.get("spec") or {}
    copies = tuple(c for c in owned if key_of(c) != source)
    orphan = isinstance(spec, Mapping) and spec.get("deletionPolicy") == "Orphan"
    return Plan(
        Outcome(),
        deletes=() if orphan else copies,
        unmarks=copies if orphan else (),
        remove_finalizer=True,
    )


def _blocked(
    source_namespace: str, served: Collection[str], requester: str | None
) -> tuple[str, str] | None:
    """(reason, message) when nothing may be synced at all, else None."""
    if served and source_namespace not in served:
        return (
            SOURCE_NOT_WATCHED,
            f"the operator does not watch namespace {source_namespace}, so it cannot "
            "follow the source",
        )
    if requester is not None:
        return (REQUESTER_NOT_ALLOWED, requester)
    return None


@dataclass(frozen=True)
class _Context:
    """What deciding one destination needs of the whole reconcile."""

    name: str
    uid: str
    spec: SyncSpec
    kind: SyncKind
    desired: Desired | None
    live_owners: Container[str]
    served: Collection[str]
    sources_in_use: Collection[ObjectKey]


def _decide(ns: str, occupant: Mapping[str, Any] | None, c: _Context) -> Write | Issue | bool:
    """One consenting destination: the write it needs, the issue that stops it, or whether it
    holds a current copy already (True) or simply waits for the source (False)."""
    if occupant is not None and key_of(occupant) != (ns, c.name):
        occupant = None
    if occupant is None:
        return False if c.desired is None else Write(ns, c.desired.manifest(ns))
    where = f"{c.kind.object_kind} {ns}/{c.name}"
    owner = owner_uid(occupant)
    if is_terminating(occupant):
        return Issue(ns, TERMINATING, f"{where} is being deleted; a copy follows")
    if owner == c.uid:
        if c.desired is None or c.desired.is_current(occupant):
            return True  # current, or kept while the source is gone
        return _update(ns, c.desired, occupant)
    if (
        owner is not None
        and owner not in c.live_owners
        and _owner_is_served(occupant, c.served)
        and is_exact_copy(occupant)
        and (ns, c.name) not in c.sources_in_use
    ):
        # A copy whose ConfigMapSync is gone (deleted while the operator was away).
        return False if c.desired is None else _overwrite(ns, c.desired, occupant)
    if owner is not None:
        return Issue(
            ns, CONFLICT, f"{where} belongs to {c.kind.kind} {owner_description(occupant)}"
        )
    if c.spec.conflict_policy == "Skip":
        return Issue(
            ns,
            CONFLICT,
            f"{where} exists and is not managed by this {c.kind.kind}; "
            "conflictPolicy Skip leaves it untouched",
        )
    if (ns, c.name) in c.sources_in_use:
        return Issue(ns, CONFLICT, f"{where} is the source of a {c.kind.kind}; not overwritten")
    if c.desired is not None and c.desired.retypes(occupant):
        return Issue(
            ns,
            CONFLICT,
            f"{where} is of type {occupant.get('type')}, the source of type "
            f"{c.desired.type}; its type cannot change, so it is not taken over",
        )
    return False if c.desired is None else _overwrite(ns, c.desired, occupant)


def plan(
    sync: Mapping[str, Any],
    source: Mapping[str, Any] | None,
    namespaces: Iterable[Mapping[str, Any]],
    occupants: Mapping[str, Mapping[str, Any]],
    owned: Iterable[Mapping[str, Any]],
    now: datetime,
    *,
    served: Collection[str] = (),
    sources_in_use: Collection[ObjectKey] = (),
    live_owners: Container[str] = (),
    own_namespace: str | None = None,
    requester: str | None = None,
    kind: SyncKind = CONFIGMAPS,
) -> Plan:
    """Plan one reconcile of ``sync``, a sync of ``kind``.

    ``occupants`` maps a namespace to the slim record of the ConfigMap there named like the
    source; ``owned`` are slim records of ConfigMaps marked with the sync's uid; ``served``
    are the namespaces the operator watches (empty: all); ``sources_in_use`` are the keys of
    ConfigMaps some ConfigMapSync reads (never taken over); ``live_owners`` holds the uids of
    the existing ConfigMapSyncs (a copy marked with another uid has lost its owner);
    ``own_namespace`` is the operator's (protected, as ``kube-*``). ``requester``: why the
    operator may not act for the sync's requester
    (:meth:`~opsuite_common.requester.RequesterReviews.problem`): nothing is written or
    deleted, the copies stay as they are, and the status says why (RequesterNotAllowed).
    """
    now = as_utc(now)
    meta = sync["metadata"]
    uid = meta["uid"]
    src_key = source_key(sync, kind)
    live_owned = [
        c for c in owned if owner_uid(c) == uid and is_exact_copy(c) and not is_terminating(c)
    ]
    if meta.get("deletionTimestamp"):
        return _cleanup(sync, live_owned, src_key)
    strip_finalizer = FINALIZER in (meta.get("finalizers") or ())
    try:
        spec = parse_spec(sync, kind)
    except InvalidSpecError as error:
        outcome = Outcome(blocked=(INVALID_SPEC, str(error)))
        return Plan(
            outcome,
            strip_finalizer=strip_finalizer,
            status_patch=status_patch(sync, outcome, now, wrote=False),
        )
    source_namespace = spec.source_namespace or meta["namespace"]
    name = spec.source_name
    reference = f"{source_namespace}/{name}"
    if source is not None and key_of(source) != (source_namespace, name):
        source = None
    blocked = _blocked(source_namespace, served, requester)
    refusal = None if source is None else kind.refusal(source)
    if blocked is None and refusal is not None:
        blocked = (SECRET_TYPE_NOT_COPIED, refusal)
    if blocked is not None:
        outcome = Outcome(source=reference, object_kind=kind.object_kind, blocked=blocked)
        return Plan(
            outcome,
            strip_finalizer=strip_finalizer,
            status_patch=status_patch(sync, outcome, now, wrote=False),
        )
    by_name = {str((ns.get("metadata") or {}).get("name")): ns for ns in namespaces}
    writable, kept, issues = consented(
        spec,
        source,
        f"{kind.object_kind} {reference}",
        source_namespace,
        by_name,
        served,
        own_namespace,
    )
    allow = Allowlist(tuple(spec.copy_labels or ()), tuple(spec.copy_annotations or ()))
    keys = key_filter(spec)
    desired = Desired(sync, source, allow, keys, kind) if source is not None else None
    context = _Context(name, uid, spec, kind, desired, live_owners, served, sources_in_use)
    writes: list[Write] = []
    synced: set[str] = set()
    for ns in writable:
        decision = _decide(ns, occupants.get(ns), context)
        if isinstance(decision, Write):
            writes.append(decision)
        elif isinstance(decision, Issue):
            issues.append(decision)
        elif decision:
            synced.add(ns)
    wanted = {(ns, name) for ns in (*writable, *kept)}
    deletes = tuple(
        c
        for c in live_owned
        if key_of(c) not in wanted
        and key_of(c) != src_key
        and key_of(c)[0] in by_name
        and (not served or key_of(c)[0] in served)
        and not is_terminating(by_name[key_of(c)[0]])
    )
    synced.update(w.namespace for w in writes)
    outcome = Outcome(
        source=reference,
        object_kind=kind.object_kind,
        source_found=source is not None,
        targets=tuple(sorted({*writable, *(i.namespace for i in issues)})),
        synced=frozenset(synced),
        issues=tuple(issues),
        missing_keys=(() if source is None else keys.missing(contents(source).values())),
    )
    return Plan(
        outcome,
        writes=tuple(writes),
        deletes=deletes,
        strip_finalizer=strip_finalizer,
        status_patch=status_patch(sync, outcome, now, wrote=bool(writes)),
    )


def collect(
    orphans: Iterable[Mapping[str, Any]], policies: Mapping[str, str] | None = None
) -> Plan:
    """Plan the end of the copies whose ConfigMapSync is gone (slim records marked with a uid
    no ConfigMapSync has): exact copies only, deleted or unmarked as the owner's deletion
    policy says: from ``policies`` (by owner uid: the final state the watch delivered), else as
    the copy records it, else Delete (copies of earlier versions, whose default it was)."""
    deletes: list[Mapping[str, Any]] = []
    unmarks: list[Mapping[str, Any]] = []
    for record in orphans:
        if not is_exact_copy(record) or is_terminating(record):
            continue
        owner = owner_uid(record) or ""
        policy = (policies or {}).get(owner) or deletion_policy(record) or "Delete"
        (unmarks if policy == "Orphan" else deletes).append(record)
    return Plan(Outcome(), deletes=tuple(deletes), unmarks=tuple(unmarks))
