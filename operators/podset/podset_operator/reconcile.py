"""Pure PodSet planning: the PodSet + the cached pods of its namespace -> one :class:`Plan`.

:func:`plan` parses the spec (an invalid one only reports InvalidSpec), claims pods as the
ReplicaSet controller does (:mod:`podset_operator.ownership`: adopt orphans the selector
matches, release owned pods it no longer matches), counts the status, follows the progress
deadline (:func:`rollout_progress`), and picks the creates and deletes of this pass: a rolling
update step (:mod:`podset_operator.rollout`) or a scale step (:mod:`podset_operator.scaling`).
Nothing is created or deleted while expectations are unsatisfied, the PodSet is being deleted
or its requester is not allowed. The Plan is carried out by :mod:`podset_operator.actions`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from opsuite_common.conditions import get_condition, parse_timestamp, timestamp
from opsuite_common.requester import REQUESTER_NOT_ALLOWED
from podset_operator.ownership import Claim, claim_pods, is_controlled_by
from podset_operator.pod_state import (
    TEMPLATE_HASH_LABEL,
    Pod,
    is_active,
    is_available,
    is_ready,
    metadata,
    pod_labels,
    pod_name,
    ready_since,
)
from podset_operator.revisions import (
    RevisionWrites,
    owned_revisions,
    plan_revisions,
    revision_name,
)
from podset_operator.rollout import resolve_fenceposts, rolling_update_step
from podset_operator.scaling import Step, replica_set_step
from podset_operator.spec import InvalidSpecError, ParsedSpec, parse_spec
from podset_operator.status import (
    COMPLETE,
    INVALID_SPEC,
    PAUSED,
    PROGRESS_DEADLINE_EXCEEDED,
    PROGRESSING,
    Failure,
    PodSetStatus,
    Progress,
    counts_message,
    observe,
    status_patch,
)
from podset_operator.template import render_pod, template_hash


@dataclass(frozen=True)
class Plan:
    """Actions for one reconcile of one PodSet; ``is_empty`` in steady state."""

    status: PodSetStatus
    pods_to_create: int = 0
    pod_manifest: Mapping[str, Any] | None = None
    """Manifest to create ``pods_to_create`` times (generateName gives each its name)."""
    pods_to_delete: tuple[str, ...] = ()
    """Pod names, most-deletable first."""
    pods_to_adopt: tuple[str, ...] = ()
    pods_to_release: tuple[str, ...] = ()
    status_patch: Mapping[str, Any] | None = None
    """Status fields to write, None when unchanged."""
    requeue_after: float | None = None
    """Seconds until a ready pod turns available (minReadySeconds) or the progress deadline of
    a rollout in flight passes, whichever comes first; None when nothing is waited for."""
    revisions: RevisionWrites = field(default_factory=RevisionWrites)
    """ControllerRevision writes: the current template kept, old ones beyond the limit gone."""

    @property
    def is_empty(self) -> bool:
        """Nothing to create, delete, adopt, release, write or wait for."""
        return not (
            self.pods_to_create
            or self.pods_to_delete
            or self.pods_to_adopt
            or self.pods_to_release
            or self.status_patch is not None
            or self.requeue_after is not None
            or not self.revisions.empty
        )


def _as_utc(now: datetime) -> datetime:
    return now if now.tzinfo else now.replace(tzinfo=UTC)


def _names(pods: Sequence[Pod]) -> tuple[str, ...]:
    return tuple(sorted(pod_name(p) for p in pods))


def _step(spec: ParsedSpec, claim: Claim, outdated: bool, hash_: str, now: datetime) -> Step:
    managed = claim.managed
    if not spec.rolls_out or not outdated:
        return replica_set_step(managed, claim.owned, spec.replicas, hash_, now)
    fenceposts = resolve_fenceposts(spec.max_surge, spec.max_unavailable, spec.replicas)
    return rolling_update_step(
        managed, claim.owned, spec.replicas, fenceposts, hash_, spec.min_ready_seconds, now
    )


def _requeue_after(managed: Sequence[Pod], min_ready_seconds: int, now: datetime) -> float | None:
    if not min_ready_seconds:  # a ready pod is available at once
        return None
    waits = [
        (since + timedelta(seconds=min_ready_seconds) - now).total_seconds()
        for p in managed
        if is_ready(p)
        and not is_available(p, min_ready_seconds, now)
        and (since := ready_since(p)) is not None
    ]
    return min(waits, default=None)


def _count(status: Mapping[str, Any], key: str) -> int:
    value = status.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _progressed(observed: PodSetStatus, previous: Mapping[str, Any]) -> bool:
    """Whether ``observed`` is further along than the ``previous`` status says, as the
    Deployment controller's DeploymentProgressing decides (more updated pods, fewer old
    ones, more ready, more available), plus a changed spec and a scale closer to its target.
    """
    if previous.get("observedGeneration") != observed.observed_generation:
        return True
    replicas, updated = _count(previous, "replicas"), _count(previous, "updatedReplicas")
    return (
        observed.updated_replicas > updated
        or observed.replicas - observed.updated_replicas < replicas - updated
        or observed.ready_replicas > _count(previous, "readyReplicas")
        or observed.available_replicas > _count(previous, "availableReplicas")
        or abs(observed.replicas - observed.desired) < abs(replicas - observed.desired)
    )


def _deadline_message(observed: PodSetStatus, deadline_seconds: int) -> str:
    desired = observed.desired
    return (
        f"no progress for {deadline_seconds}s (progressDeadlineSeconds): "
        f"{observed.updated_replicas}/{desired} updated, "
        f"{observed.available_replicas}/{desired} available, {observed.replicas} pods"
    )


def rollout_progress(
    observed: PodSetStatus, previous: Mapping[str, Any], deadline_seconds: int, now: datetime
) -> Progress:
    """The Progressing condition of a PodSet with the Deployment's progress deadline.

    ``observed`` are the counts now, ``previous`` the status as last written (its counts,
    ``lastProgressTime`` and Progressing condition). A PodSet is in flight while
    ``observed.progressing`` names a reason (a rolling update, a scale up or down). The clock
    starts when it goes in flight and restarts on every progress (see :func:`_progressed`),
    completion included; once ``deadline_seconds`` pass without progress, Progressing is
    False with reason ProgressDeadlineExceeded until the next progress. ``requeue_after`` is
    the time left, so that the deadline is noticed when no event comes (pods that stay
    unready). Steady state writes nothing: the progress time only moves on progress, the
    condition only on a change.
    """
    now = _as_utc(now)
    stored = previous.get("lastProgressTime")
    stored_time = stored if isinstance(stored, str) else None
    condition = get_condition(previous.get("conditions"), PROGRESSING)
    was_in_flight = condition is not None and (
        condition.get("status") == "True" or condition.get("reason") == PROGRESS_DEADLINE_EXCEEDED
    )
    if observed.progressing is None:  # done: completing was the last progress
        done_at = timestamp(now) if was_in_flight else stored_time
        return Progress("False", COMPLETE, counts_message(observed), done_at, None)
    last = parse_timestamp(stored_time)
    if not was_in_flight or last is None or _progressed(observed, previous):
        last = now.replace(microsecond=0)  # what the stored timestamp says
        stored_time = timestamp(last)
    left = deadline_seconds - max(0.0, (now - last).total_seconds())
    if left <= 0:
        message = _deadline_message(observed, deadline_seconds)
        return Progress("False", PROGRESS_DEADLINE_EXCEEDED, message, stored_time, None)
    return Progress("True", observed.progressing, counts_message(observed), stored_time, left)


def paused_progress(observed: PodSetStatus, previous: Mapping[str, Any]) -> Progress:
    """The Progressing condition of a paused PodSet: Unknown, reason Paused, as a paused
    Deployment's (DeploymentPaused). No deadline runs; the last progress time is kept, and
    resuming (a new generation) restarts the clock in :func:`rollout_progress`."""
    stored = previous.get("lastProgressTime")
    message = f"paused: {counts_message(observed)}"
    return Progress("Unknown", PAUSED, message, stored if isinstance(stored, str) else None, None)


def _min_available(spec: ParsedSpec) -> int:
    if not spec.rolling_update:
        return spec.replicas
    _, unavailable = resolve_fenceposts(spec.max_surge, spec.max_unavailable, spec.replicas)
    return max(0, spec.replicas - unavailable)


def _current_revision(
    observed: PodSetStatus, previous: Mapping[str, Any], update: str
) -> str | None:
    """The update revision once every pod is updated, until then the one the status named."""
    if observed.updated_replicas == observed.replicas:
        return update
    named = previous.get("currentRevision")
    return named if isinstance(named, str) else None


def _earliest(*delays: float | None) -> float | None:
    return min((d for d in delays if d is not None), default=None)


def _generation(podset: Mapping[str, Any]) -> int:
    return int(podset["metadata"].get("generation") or 0)


def _held_template(
    podset: Mapping[str, Any], status: PodSetStatus, revisions: Sequence[Mapping[str, Any]]
) -> tuple[ParsedSpec, str] | None:
    """The spec with the current revision's template, and its hash: what a paused PodSet's new
    pods get while its template waits (a paused Deployment scales its existing ReplicaSets).
    Only a template that hashes to its revision's name, so one the PodSet's spec once held and
    admission checked then (a revision's data cannot change). None when the current revision
    is the update revision, or no such revision is in the cache."""
    if status.current_revision in (None, status.update_revision):
        return None
    uid = podset["metadata"]["uid"]
    for revision in owned_revisions(revisions, uid):
        if (
            revision.name == status.current_revision
            and revision.template is not None
            and template_hash(revision.template) == revision.hash
        ):
            held = {**podset, "spec": {**podset["spec"], "template": revision.template}}
            try:
                return parse_spec(held), revision.hash
            except InvalidSpecError:
                return None
    return None


def _invalid_plan(
    podset: Mapping[str, Any], pods: Sequence[Pod], hash_: str, error: str, now: datetime
) -> Plan:
    meta = podset["metadata"]
    owned = [p for p in pods if is_active(p) and is_controlled_by(p, meta["uid"])]
    observed = observe(owned, len(owned), hash_, False, 0, now, _generation(podset), None)
    status = replace(observed, progressing=None)
    failure = Failure(INVALID_SPEC, error)
    return Plan(status, status_patch=status_patch(podset.get("status") or {}, status, failure, now))


def plan(
    podset: Mapping[str, Any],
    pods: Sequence[Pod],
    now: datetime,
    expectations_satisfied: bool,
    failure: Failure | None = None,
    requester: str | None = None,
    revisions: Sequence[Mapping[str, Any]] | None = None,
) -> Plan:
    """Plan one reconcile of ``podset`` given the pods in its namespace at ``now``.

    ``revisions``: the ControllerRevisions of the namespace (:mod:`podset_operator.revisions`
    keeps the current template and trims the history among the PodSet's own); None leaves
    them alone (a plan about pods only).

    No pods are created or deleted while expectations are unsatisfied or the PodSet is being
    deleted; pods of other controllers are never touched and only already-owned pods are
    deleted. ``failure`` (e.g. FailedCreate from the last attempt) sets Degraded.
    ``requester``: why the operator may not act for the PodSet's requester
    (:meth:`~opsuite_common.requester.RequesterReviews.problem`): no pod is created, deleted
    or adopted, and Degraded says why (RequesterNotAllowed).
    """
    if requester is not None:
        failure = Failure(REQUESTER_NOT_ALLOWED, requester)
    now = _as_utc(now)
    meta = podset["metadata"]
    pods = [p for p in pods if metadata(p).get("namespace") in (None, meta["namespace"])]
    raw_spec = podset.get("spec")
    raw_template = raw_spec.get("template") if isinstance(raw_spec, Mapping) else None
    hash_ = template_hash(raw_template if isinstance(raw_template, Mapping) else {})
    try:
        spec = parse_spec(podset)
    except InvalidSpecError as error:
        return _invalid_plan(podset, pods, hash_, str(error), now)

    deleting = meta.get("deletionTimestamp") is not None
    claim = claim_pods(pods, meta["uid"], spec.selector, owner_deleting=deleting)
    status = observe(
        claim.managed,
        spec.replicas,
        hash_,
        spec.rolls_out,
        spec.min_ready_seconds,
        now,
        _generation(podset),
        spec.selector.selector_string(),
    )
    previous = podset.get("status") or {}
    progress = (
        paused_progress(status, previous)
        if spec.paused
        else rollout_progress(status, previous, spec.progress_deadline_seconds, now)
    )
    update_revision = revision_name(meta["name"], hash_)
    status = replace(
        status,
        progress=progress,
        min_available=_min_available(spec),
        update_revision=update_revision,
        current_revision=_current_revision(status, previous, update_revision),
    )
    writes = RevisionWrites()
    if revisions is not None and not deleting:
        writes = plan_revisions(
            podset,
            raw_template if isinstance(raw_template, Mapping) else {},
            hash_,
            owned_revisions(revisions, meta["uid"]),
            spec.revision_history_limit,
            frozenset(pod_labels(p).get(TEMPLATE_HASH_LABEL, "") for p in claim.managed),
        )
    outdated = status.updated_replicas < status.replicas
    acting = expectations_satisfied and not deleting and requester is None
    step = _step(spec, claim, outdated, hash_, now) if acting else Step()
    created = (spec, hash_)
    if spec.paused and revisions is not None and step.creates:
        created = _held_template(podset, status, revisions) or created
    return Plan(
        status=status,
        pods_to_create=step.creates,
        pod_manifest=render_pod(podset, *created) if step.creates else None,
        pods_to_delete=tuple(pod_name(p) for p in step.deletes),
        pods_to_adopt=_names(claim.adopt) if requester is None else (),
        pods_to_release=_names(claim.release),
        status_patch=status_patch(previous, status, failure, now),
        requeue_after=_earliest(
            _requeue_after(claim.managed, spec.min_ready_seconds, now), progress.requeue_after
        ),
        revisions=writes,
    )
