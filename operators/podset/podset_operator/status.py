"""PodSet status: replica counts observed from pods, Ready/Available/Progressing/Degraded
conditions, the revisions of the templates."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from opsuite_common.conditions import AS_EXPECTED, DEGRADED, READY, set_condition
from opsuite_common.kube_model import ConditionStatus
from podset_operator import models
from podset_operator.pod_state import Pod, is_available, is_ready, is_updated, pod_name

PROGRESSING = "Progressing"
AVAILABLE = "Available"
MINIMUM_AVAILABLE = "MinimumReplicasAvailable"
MINIMUM_UNAVAILABLE = "MinimumReplicasUnavailable"

FAILED_CREATE = "FailedCreate"
FAILED_DELETE = "FailedDelete"
FAILED_REVISION = "FailedRevision"
INVALID_SPEC = "InvalidSpec"
COMPLETE = "Complete"
PROGRESS_DEADLINE_EXCEEDED = "ProgressDeadlineExceeded"
PAUSED = "Paused"


@dataclass(frozen=True)
class Failure:
    """Why the PodSet cannot make progress, e.g. FailedCreate with the API error message."""

    reason: str
    message: str


@dataclass(frozen=True)
class Progress:
    """The Progressing condition and the last progress time (reconcile.rollout_progress)."""

    status: ConditionStatus
    reason: str
    message: str
    last_progress_time: str | None
    """``status.lastProgressTime`` to write (None: leave it as it is)."""
    requeue_after: float | None
    """Seconds until the progress deadline passes, while a rollout is in flight within it."""


@dataclass(frozen=True)
class PodSetStatus:
    """Replica counts observed for one PodSet at one instant."""

    desired: int
    replicas: int
    ready_replicas: int
    available_replicas: int
    updated_replicas: int
    pod_names: tuple[str, ...]
    progressing: str | None
    """Reason a rollout or scale is in flight (RollingUpdate, ScalingUp, ScalingDown), or None."""
    selector: str | None
    """The effective label selector in string form; None when the spec is invalid."""
    observed_generation: int
    """The metadata.generation these counts were observed for."""
    progress: Progress | None = None
    """The Progressing condition against the progress deadline; None: from ``progressing``
    alone (True while in flight, else False/Complete), with no progress time."""
    min_available: int = 0
    """Available pods below which Available is False: replicas - maxUnavailable during a
    rolling update (as a Deployment's MinimumReplicasAvailable), else replicas."""
    update_revision: str | None = None
    """ControllerRevision name of the current template (None: leave the status's)."""
    current_revision: str | None = None
    """ControllerRevision name of the template the pods ran before (None: leave it)."""


def _progressing(desired: int, active: int, updated: int, rolling_update: bool) -> str | None:
    if updated < active and rolling_update:
        return "RollingUpdate"
    if active < desired:
        return "ScalingUp"
    if active > desired:
        return "ScalingDown"
    return None


def observe(
    managed: Sequence[Pod],
    desired: int,
    template_hash: str,
    rolling_update: bool,
    min_ready_seconds: int,
    now: datetime,
    generation: int,
    selector: str | None,
) -> PodSetStatus:
    """Count the active replicas ``managed`` by a PodSet."""
    updated = sum(is_updated(p, template_hash) for p in managed)
    ready = [p for p in managed if is_ready(p)]
    return PodSetStatus(
        desired=desired,
        replicas=len(managed),
        ready_replicas=len(ready),
        available_replicas=sum(is_available(p, min_ready_seconds, now) for p in ready),
        updated_replicas=updated,
        pod_names=tuple(sorted(pod_name(p) for p in managed)[: models.MAX_POD_NAMES]),
        progressing=_progressing(desired, len(managed), updated, rolling_update),
        selector=selector,
        observed_generation=generation,
    )


_Condition = tuple[str, ConditionStatus, str, str]


def counts_message(status: PodSetStatus) -> str:
    """``2/3 available, 3/3 updated``: the counts the conditions' messages give."""
    return (
        f"{status.available_replicas}/{status.desired} available, "
        f"{status.updated_replicas}/{status.replicas} updated"
    )


def _conditions(status: PodSetStatus, failure: Failure | None) -> list[_Condition]:
    """(type, status, reason, message) of Ready, Available, Progressing and Degraded."""
    if failure is not None and failure.reason == INVALID_SPEC:
        return [
            (READY, "False", INVALID_SPEC, failure.message),
            (AVAILABLE, "False", INVALID_SPEC, failure.message),
            (PROGRESSING, "False", INVALID_SPEC, failure.message),
            (DEGRADED, "True", INVALID_SPEC, failure.message),
        ]
    counts = counts_message(status)
    if status.available_replicas < status.desired:
        ready: tuple[ConditionStatus, str] = ("False", "ReplicasUnavailable")
    elif status.updated_replicas != status.replicas:
        ready = ("False", "OutdatedReplicas")
    else:
        ready = ("True", "AllReplicasAvailable")
    progressing: _Condition = (
        (PROGRESSING, status.progress.status, status.progress.reason, status.progress.message)
        if status.progress is not None
        else (PROGRESSING, "True", status.progressing, counts)
        if status.progressing
        else (PROGRESSING, "False", COMPLETE, counts)
    )
    degraded: _Condition = (
        (DEGRADED, "True", failure.reason, failure.message)
        if failure
        else (DEGRADED, "False", AS_EXPECTED, "")
    )
    available: tuple[ConditionStatus, str] = (
        ("True", MINIMUM_AVAILABLE)
        if status.available_replicas >= status.min_available
        else ("False", MINIMUM_UNAVAILABLE)
    )
    return [(READY, *ready, counts), (AVAILABLE, *available, counts), progressing, degraded]


def status_patch(
    current: Mapping[str, Any], status: PodSetStatus, failure: Failure | None, now: datetime
) -> dict[str, Any] | None:
    """The status fields to write, or None when ``current`` already says the same.

    Conditions follow metav1 semantics (opsuite_common.conditions): lastTransitionTime is
    kept while a condition's status holds, and each carries the observed generation.
    """
    previous = current.get("conditions")
    conditions: list[dict[str, Any]] = (
        [dict(c) for c in previous if isinstance(c, Mapping)] if isinstance(previous, list) else []
    )
    for type_, value, reason, message in _conditions(status, failure):
        conditions, _ = set_condition(
            conditions, type_, value, reason, message, status.observed_generation, now
        )
    desired = models.PodSetStatus(
        replicas=status.replicas,
        ready_replicas=status.ready_replicas,
        available_replicas=status.available_replicas,
        updated_replicas=status.updated_replicas,
        pod_names=list(status.pod_names),
        selector=status.selector,
        observed_generation=status.observed_generation,
        update_revision=status.update_revision,
        current_revision=status.current_revision,
        last_progress_time=status.progress.last_progress_time if status.progress else None,
        conditions=conditions,
    ).to_kube()
    if all(current.get(k) == v for k, v in desired.items()):
        return None
    return desired
