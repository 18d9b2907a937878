"""A sync's status (either kind): what one reconcile found (:class:`Outcome`: its destinations,
which hold a current copy, which do not and why) as the conditions and counts a user reads.

Ready names the worst issue present (:data:`SEVERITY`); Degraded is True only for issues that
need a person (:data:`DEGRADING`) or for keys includeKeys names that the source lacks;
lastSyncTime moves when copies were written, or the first time every destination is found
current.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from configmapsync_operator.models import MAX_FAILED_TARGETS, FailedTarget, SyncStatus
from opsuite_common.conditions import AS_EXPECTED, DEGRADED, READY, set_condition, timestamp
from opsuite_common.kube_model import ConditionStatus
from opsuite_common.store import JSON

SYNCED = "Synced"
SYNCING = "Syncing"
INVALID_SPEC = "InvalidSpec"
SOURCE_NOT_FOUND = "SourceNotFound"
SOURCE_NOT_WATCHED = "SourceNotWatched"
CONFLICT = "Conflict"
WRITE_FAILED = "WriteFailed"
SOURCE_NAMESPACE = "SourceNamespace"
NAMESPACE_NOT_WATCHED = "NamespaceNotWatched"
TERMINATING = "Terminating"
NAMESPACE_MISSING = "NamespaceMissing"
NOT_ALLOWED_BY_SOURCE = "NotAllowedBySource"
NOT_ACCEPTED_BY_NAMESPACE = "NotAcceptedByNamespace"
KEYS_MISSING = "KeysMissing"
SECRET_TYPE_NOT_COPIED = "SecretTypeNotCopied"
SECRETS_NOT_ENABLED = "SecretsNotEnabled"

SEVERITY = (
    NOT_ALLOWED_BY_SOURCE,
    NOT_ACCEPTED_BY_NAMESPACE,
    CONFLICT,
    WRITE_FAILED,
    SOURCE_NAMESPACE,
    NAMESPACE_NOT_WATCHED,
    TERMINATING,
    NAMESPACE_MISSING,
)
"""Target issue reasons, worst first: the Ready condition names the worst present."""
DEGRADING = frozenset(SEVERITY) - {TERMINATING, NAMESPACE_MISSING}
"""Issues that need a person (Degraded=True); the others resolve by themselves."""
MAX_ISSUE_MESSAGE = 1024


@dataclass(frozen=True)
class Issue:
    """A destination without a current copy, and why."""

    namespace: str
    reason: str
    message: str


@dataclass(frozen=True)
class Outcome:
    """What the status reports: targets, which hold a current copy, which failed and why."""

    source: str = ""
    """namespace/name of the source; "" when the spec is invalid."""
    object_kind: str = "ConfigMap"
    """What the source is (ConfigMap, Secret), for the messages."""
    source_found: bool = False
    blocked: tuple[str, str] | None = None
    """(reason, message) when nothing can be synced at all (InvalidSpec, SourceNotWatched)."""
    targets: tuple[str, ...] = ()
    """Every destination namespace, failing ones included, sorted."""
    synced: frozenset[str] = frozenset()
    issues: tuple[Issue, ...] = ()
    missing_keys: tuple[str, ...] = ()
    """Keys includeKeys names that the source lacks (the copies carry those it has)."""

    def with_failures(self, failures: Iterable[Issue]) -> Outcome:
        """The outcome once some planned writes failed."""
        failed = list(failures)
        if not failed:
            return self
        names = {i.namespace for i in failed}
        return replace(self, synced=self.synced - names, issues=(*self.issues, *failed))


def as_utc(now: datetime) -> datetime:
    """``now``, in UTC when it has no zone."""
    return now if now.tzinfo else now.replace(tzinfo=UTC)


_Condition = tuple[str, ConditionStatus, str, str]


def _summary(outcome: Outcome, issues: Sequence[Issue]) -> str:
    shown = ", ".join(f"{i.namespace} ({i.reason})" for i in issues[:5])
    more = f" and {len(issues) - 5} more" if len(issues) > 5 else ""
    return (
        f"{len(outcome.synced)} of {len(outcome.targets)} destinations in sync; "
        f"not in sync: {shown}{more}"
    )


def _conditions(outcome: Outcome, issues: Sequence[Issue]) -> list[_Condition]:
    """(type, status, reason, message) of Ready and Degraded; keys the source lacks make a
    Degraded that nothing worse already explains (they do not stop the copies)."""
    ready, degraded = _by_destinations(outcome, issues)
    if outcome.missing_keys and degraded[1] == "False":
        missing = ", ".join(outcome.missing_keys)
        message = (
            f"the source {outcome.source} has no key {missing[:512]} that includeKeys names; "
            "the copies carry the selected keys it has"
        )
        degraded = (DEGRADED, "True", KEYS_MISSING, message)
    return [ready, degraded]


def _by_destinations(outcome: Outcome, issues: Sequence[Issue]) -> tuple[_Condition, _Condition]:
    """Ready and Degraded as the source and the destinations say."""
    if outcome.blocked is not None:
        reason, message = outcome.blocked
        return (READY, "False", reason, message), (DEGRADED, "True", reason, message)
    if not outcome.source_found:
        message = (
            f"{outcome.object_kind} {outcome.source} not found; "
            f"the {len(outcome.synced)} existing copies are kept"
        )
        return (
            (READY, "False", SOURCE_NOT_FOUND, message),
            (DEGRADED, "True", SOURCE_NOT_FOUND, message),
        )
    if issues:
        worst = min(issues, key=lambda i: SEVERITY.index(i.reason))
        summary = _summary(outcome, issues)
        degrading = [i for i in issues if i.reason in DEGRADING]
        degraded: _Condition = (DEGRADED, "False", AS_EXPECTED, "")
        if degrading:
            cause = min(degrading, key=lambda i: SEVERITY.index(i.reason))
            degraded = (DEGRADED, "True", cause.reason, summary)
        return (READY, "False", worst.reason, summary), degraded
    count = f"{len(outcome.synced)} of {len(outcome.targets)} destinations in sync"
    if len(outcome.synced) < len(outcome.targets):
        return (READY, "False", SYNCING, count), (DEGRADED, "False", AS_EXPECTED, "")
    return (READY, "True", SYNCED, count), (DEGRADED, "False", AS_EXPECTED, "")


def _failed(issues: Iterable[Issue]) -> list[Issue]:
    """One issue per namespace (the first reported), sorted by namespace."""
    first: dict[str, Issue] = {}
    for issue in issues:
        first.setdefault(issue.namespace, issue)
    return [first[ns] for ns in sorted(first)]


def status_patch(
    sync: Mapping[str, Any], outcome: Outcome, now: datetime, *, wrote: bool
) -> JSON | None:
    """The status fields to write, or None when the current status already says the same.

    ``wrote``: copies were created or updated, so lastSyncTime moves to ``now`` (it is also
    set the first time every destination is found current). Conditions follow metav1
    semantics: lastTransitionTime is kept while a condition's status holds.
    """
    now = as_utc(now)
    current = sync.get("status") or {}
    generation = int(sync["metadata"].get("generation") or 0)
    issues = _failed(outcome.issues)
    previous = current.get("conditions")
    conditions: list[dict[str, Any]] = (
        [dict(c) for c in previous if isinstance(c, Mapping)] if isinstance(previous, list) else []
    )
    for type_, value, reason, message in _conditions(outcome, issues):
        conditions, _ = set_condition(conditions, type_, value, reason, message, generation, now)
    last_sync = current.get("lastSyncTime")
    complete = (
        outcome.blocked is None
        and outcome.source_found
        and not issues
        and len(outcome.synced) == len(outcome.targets)
    )
    if wrote or (last_sync is None and complete):
        last_sync = timestamp(now)
    desired = SyncStatus(
        source=outcome.source or None,
        target_namespaces=len(outcome.targets),
        synced_namespaces=len(outcome.synced),
        failed_namespaces=len(issues),
        failed_targets=[
            FailedTarget(
                namespace=i.namespace, reason=i.reason, message=i.message[:MAX_ISSUE_MESSAGE]
            )
            for i in issues[:MAX_FAILED_TARGETS]
        ],
        last_sync_time=last_sync,
        observed_generation=generation,
        conditions=conditions,
    ).to_kube()
    if all(current.get(k) == v for k, v in desired.items()):
        return None
    return desired
