"""metav1.Condition semantics on ``status.conditions`` as plain dicts (pure, no I/O).

Functions never mutate their input: they return a new list and whether it differs, so callers
can skip the status patch when nothing changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from opsuite_common.kube_model import Condition, ConditionStatus

MAX_MESSAGE_LENGTH = 32768

READY = "Ready"
"""The condition every opsuite custom resource reports: its desired state is reached."""
DEGRADED = "Degraded"
"""True when something keeps the resource from its desired state (a message says what)."""
AS_EXPECTED = "AsExpected"
"""The reason of Degraded=False."""

ConditionDicts = Sequence[Mapping[str, Any]] | None


def timestamp(now: datetime | None = None) -> str:
    """RFC3339 UTC at second precision with a ``Z`` suffix (metav1.Time); ``now`` must be aware."""
    moment = datetime.now(UTC) if now is None else now
    if moment.tzinfo is None:
        raise ValueError("timestamps need a timezone-aware datetime")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(value: object) -> datetime | None:
    """An RFC3339 API timestamp as an aware datetime; None when absent or invalid."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def get_condition(conditions: ConditionDicts, type: str) -> dict[str, Any] | None:
    """A copy of the condition of ``type``, or ``None``."""
    for condition in conditions or ():
        if condition.get("type") == type:
            return dict(condition)
    return None


def is_true(conditions: ConditionDicts, type: str) -> bool:
    """Whether the condition of ``type`` exists with status ``"True"``."""
    condition = get_condition(conditions, type)
    return condition is not None and condition.get("status") == "True"


def set_condition(
    conditions: ConditionDicts,
    type: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    observed_generation: int,
    now: datetime | None = None,
) -> tuple[list[dict[str, Any]], bool]:
    """Add or update the condition of ``type`` (meta.SetStatusCondition).

    ``lastTransitionTime`` is ``now`` for a new condition or a status change and is kept
    otherwise. The message is truncated to the API limit; the other values are validated
    against :class:`~opsuite_common.kube_model.Condition` (``ValueError`` when invalid).
    Duplicate entries of ``type`` are dropped. Returns ``(new_list, changed)``.
    """
    current = get_condition(conditions, type)
    if (
        current is not None
        and current.get("status") == status
        and current.get("lastTransitionTime")
    ):
        since = current["lastTransitionTime"]
    else:
        since = timestamp(now)
    new = Condition(
        type=type,
        status=status,
        observed_generation=observed_generation,
        last_transition_time=since,
        reason=reason,
        message=message[:MAX_MESSAGE_LENGTH],
    ).to_kube()
    result = [dict(c) for c in conditions or () if c.get("type") != type]
    position = next(
        (i for i, c in enumerate(conditions or ()) if c.get("type") == type), len(result)
    )
    result.insert(position, new)
    return result, result != [dict(c) for c in conditions or ()]


def remove_condition(conditions: ConditionDicts, type: str) -> tuple[list[dict[str, Any]], bool]:
    """Drop every condition of ``type``; returns ``(new_list, changed)``."""
    original = [dict(c) for c in conditions or ()]
    result = [c for c in original if c.get("type") != type]
    return result, len(result) != len(original)
