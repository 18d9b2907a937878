"""PodSet status: replica counts observed from pods, Ready/Progressing/Degraded conditions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from podset_operator.pod_state import Pod, is_available, is_ready, is_updated, pod_name
from podset_operator.spec import Strategy

FAILED_CREATE = "FailedCreate"
FAILED_DELETE = "FailedDelete"
INVALID_SPEC = "InvalidSpec"


@dataclass(frozen=True)
class Failure:
    """Why the PodSet cannot make progress, e.g. FailedCreate with the API error message."""

    reason: str
    message: str


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
    observed_generation: int | None = None


def _progressing(desired: int, active: int, updated: int, strategy: Strategy) -> str | None:
    if updated < active and strategy == "RollingUpdate":
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
    strategy: Strategy,
    min_ready_seconds: int,
    now: datetime,
    generation: int | None = None,
) -> PodSetStatus:
    """Count the active replicas ``managed`` by a PodSet."""
    updated = sum(is_updated(p, template_hash) for p in managed)
    return PodSetStatus(
        desired=desired,
        replicas=len(managed),
        ready_replicas=sum(is_ready(p) for p in managed),
        available_replicas=sum(is_available(p, min_ready_seconds, now) for p in managed),
        updated_replicas=updated,
        pod_names=tuple(sorted(pod_name(p) for p in managed)),
        progressing=_progressing(desired, len(managed), updated, strategy),
        observed_generation=generation,
    )


def _conditions(status: PodSetStatus, failure: Failure | None) -> list[tuple[str, bool, str, str]]:
    counts = (
        f"{status.available_replicas}/{status.desired} available, "
        f"{status.updated_replicas}/{status.replicas} updated"
    )
    all_updated = status.updated_replicas == status.replicas
    if status.available_replicas < status.desired:
        ready = (False, "ReplicasUnavailable")
    elif not all_updated:
        ready = (False, "OutdatedReplicas")
    else:
        ready = (True, "AllReplicasAvailable")
    progressing = (True, status.progressing) if status.progressing else (False, "Complete")
    degraded = (True, failure.reason, failure.message) if failure else (False, "AsExpected", "")
    return [
        ("Ready", *ready, counts),
        ("Progressing", *progressing, counts),
        ("Degraded", *degraded),
    ]


def _timestamp(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_patch(
    current: Mapping[str, Any], status: PodSetStatus, failure: Failure | None, now: datetime
) -> dict[str, Any] | None:
    """The status fields to write, or None when ``current`` already says the same.

    A condition keeps its lastTransitionTime while its status is unchanged.
    """
    previous = {c.get("type"): c for c in current.get("conditions") or () if isinstance(c, Mapping)}
    conditions = []
    for type_, flag, reason, message in _conditions(status, failure):
        value = "True" if flag else "False"
        before = previous.get(type_, {})
        since = before.get("lastTransitionTime") if before.get("status") == value else None
        conditions.append(
            {
                "type": type_,
                "status": value,
                "reason": reason,
                "message": message,
                "lastTransitionTime": since or _timestamp(now),
            }
        )
    desired: dict[str, Any] = {
        "replicas": status.replicas,
        "readyReplicas": status.ready_replicas,
        "availableReplicas": status.available_replicas,
        "updatedReplicas": status.updated_replicas,
        "podNames": list(status.pod_names),
        "conditions": conditions,
    }
    if status.observed_generation is not None:
        desired["observedGeneration"] = status.observed_generation
    if all(current.get(k) == v for k, v in desired.items()):
        return None
    return desired
