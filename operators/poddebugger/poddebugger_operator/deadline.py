"""A PodDebugger's end: ``spec.activeDeadlineSeconds`` after its creation, as a Job's.

The clock starts at ``metadata.creationTimestamp`` (set by the API server, so neither the
author nor a spec change can move it back); raising the field moves the end later. After it
no container is added and Ready says DeadlineExceeded. Until then the planner asks to be run
again at the deadline (:func:`remaining`), so the status says so without a watch event; after
it nothing is asked, so the status is written once and the PodDebugger is quiet.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from opsuite_common.conditions import parse_timestamp, timestamp
from poddebugger_operator.models import PodDebuggerSpec
from poddebugger_operator.pods import object_meta

DEADLINE_EXCEEDED = "DeadlineExceeded"
_LONG_AGO = datetime.min.replace(tzinfo=UTC)


def deadline(debugger: Mapping[str, Any], spec: PodDebuggerSpec) -> datetime | None:
    """When ``debugger`` stops adding containers; None: never. One with a deadline whose
    creation time is unreadable has passed it (fails closed; the API server always sets it)."""
    if spec.active_deadline_seconds is None:
        return None
    created = parse_timestamp(object_meta(debugger).get("creationTimestamp"))
    if created is None:
        return _LONG_AGO
    return created + timedelta(seconds=spec.active_deadline_seconds)


def remaining(debugger: Mapping[str, Any], spec: PodDebuggerSpec, now: datetime) -> float | None:
    """Seconds until the deadline (0: passed); None when there is none."""
    end = deadline(debugger, spec)
    if end is None:
        return None
    return max((end - now).total_seconds(), 0.0)


def exceeded(debugger: Mapping[str, Any], spec: PodDebuggerSpec) -> str:
    """The Ready message once the deadline has passed."""
    end = deadline(debugger, spec)
    when = "its creation time is unknown" if end in (None, _LONG_AGO) else timestamp(end)
    return (
        f"activeDeadlineSeconds {spec.active_deadline_seconds} passed ({when}): no debug "
        "container is added any more; those added run until their process exits (an "
        "ephemeral container cannot be removed)"
    )
