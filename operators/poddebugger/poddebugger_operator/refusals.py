"""Injections the API server refused, and when to try again: after a backoff
(:func:`refusal_backoff`: 1 minute, doubling with each refusal in a row, at most 1,000 s, the
work queue's longest), counted from the refusal's lastAttemptTime, so a refusal that a later
change lifts (a namespace's Pod Security level relaxed) ends without a change to the debugger or
the pod; a new pod uid or a new container is tried at once."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from opsuite_common.conditions import parse_timestamp

REJECTED = "Rejected"
TARGET_NOT_FOUND = "TargetContainerNotFound"
"""The pod has no container of spec.targetContainer's name: nothing is sent (the API server
would refuse it), nor tried again (a pod's containers never change)."""


@dataclass(frozen=True)
class Failure:
    """The API server refused an injection, ``attempts`` times in a row, last at
    ``last_attempt`` (None: unknown, as in a status written before it was recorded)."""

    pod: str
    uid: str
    container: str
    message: str
    reason: str = REJECTED
    attempts: int = 1
    last_attempt: datetime | None = None


REFUSAL_RETRY_AFTER = 60.0
MAX_REFUSAL_RETRY_AFTER = 1000.0


def refusal_backoff(attempts: int) -> float:
    """Seconds between a refusal and the next attempt, after ``attempts`` refusals in a row."""
    doublings = min(max(attempts - 1, 0), 16)  # past 2^4 minutes the cap holds anyway
    return min(REFUSAL_RETRY_AFTER * 2.0**doublings, MAX_REFUSAL_RETRY_AFTER)


def retry_in(failure: Failure, now: datetime) -> float:
    """Seconds until ``failure``'s pod may be tried again (0: now)."""
    if failure.last_attempt is None:
        return 0.0
    due = failure.last_attempt.timestamp() + refusal_backoff(failure.attempts)
    return max(due - now.timestamp(), 0.0)


def known_failures(debugger: Mapping[str, Any], current: Collection[str]) -> dict[str, Failure]:
    """Refusals recorded in the status for the current container (any of its ``current``
    names), by pod uid."""
    found: dict[str, Failure] = {}
    for entry in (debugger.get("status") or {}).get("failedPods") or ():
        if isinstance(entry, Mapping) and entry.get("container") in current:
            attempts = entry.get("attempts")
            failure = Failure(
                str(entry.get("pod")),
                str(entry.get("uid")),
                str(entry.get("container")),
                str(entry.get("message") or ""),
                str(entry.get("reason") or REJECTED),
                attempts if isinstance(attempts, int) and attempts > 0 else 1,
                parse_timestamp(entry.get("lastAttemptTime")),
            )
            found[failure.uid] = failure
    return found
