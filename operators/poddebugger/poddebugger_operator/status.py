"""A PodDebugger's status from an :class:`~poddebugger_operator.outcome.Outcome`: each container
as the kubelet reports it (status.ephemeralContainerStatuses); Ready True only when every
container of the current spec is Running or Terminated with exit code 0: Starting while some
are created or not reported yet, ContainerFailed (and Degraded) when one waits with an error
reason or exited non-zero; status.debuggedPods lists at most :data:`MAX_DEBUGGED_PODS`
containers (current spec first) and status.debuggedPodsTotal counts them all."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from opsuite_common.conditions import AS_EXPECTED, DEGRADED, READY, set_condition, timestamp
from opsuite_common.kube_model import ConditionStatus
from opsuite_common.store import JSON
from poddebugger_operator.deadline import DEADLINE_EXCEEDED
from poddebugger_operator.models import (
    MAX_FAILED_PODS,
    MAX_PODS_LIMIT,
    DebuggedPod,
    FailedPod,
    PodDebuggerStatus,
)
from poddebugger_operator.outcome import Outcome
from poddebugger_operator.pods import failed, object_meta, up
from poddebugger_operator.refusals import REJECTED, Failure

DEBUGGED = "Debugged"
STARTING = "Starting"
CONTAINER_FAILED = "ContainerFailed"
NO_MATCHING_PODS = "NoMatchingPods"
INJECTION_FAILED = "InjectionFailed"
MAX_MESSAGE = 1024
MAX_DEBUGGED_PODS = 2 * MAX_PODS_LIMIT
"""status.debuggedPods' bound (containers of the current spec are listed first); the status
counts them all in debuggedPodsTotal."""
SHOWN = 3
"""Pods named in a condition message."""


_Condition = tuple[str, ConditionStatus, str, str]


def _describe(entry: DebuggedPod) -> str:
    """``pod/container: reason: message`` of a container that failed."""
    if entry.state == "Terminated":
        code = "?" if entry.exit_code is None else entry.exit_code
        what = f"Terminated with exit code {code}" + (f" ({entry.reason})" if entry.reason else "")
    else:
        what = entry.reason or entry.state
    return f"{entry.pod}/{entry.container}: {what}" + (
        f": {entry.message}" if entry.message else ""
    )


def _listed(items: Sequence[str], more: int) -> str:
    return "; ".join(items[:SHOWN]) + (f"; and {more - SHOWN} more" if more > SHOWN else "")


def _conditions(outcome: Outcome) -> list[_Condition]:
    if outcome.blocked is not None:
        reason, message = outcome.blocked
        return [(READY, "False", reason, message), (DEGRADED, "True", reason, message)]
    if outcome.expired is not None:
        # Degraded still says whether the containers added are well.
        degraded = _conditions(replace(outcome, expired=None))[1]
        done = f"{len(outcome.debugged)} of {len(outcome.matched)} matching pods debugged"
        message = f"{outcome.expired}; {done}"[:MAX_MESSAGE]
        return [(READY, "False", DEADLINE_EXCEEDED, message), degraded]
    over = f"; {outcome.skipped} more matching pods over maxPods" if outcome.skipped else ""
    current = sorted(
        (c for c in outcome.containers if c.container in outcome.current),
        key=lambda c: c.pod,
    )
    broken = [c for c in current if failed(c)]
    if outcome.failures or broken:
        parts = []
        if outcome.failures:
            shown = [f"{f.pod}: {f.message}" for f in outcome.failures]
            parts.append(
                f"{len(shown)} pods could not be given the debug container: "
                f"{_listed(shown, len(shown))}"
            )
        if broken:
            shown = [_describe(c) for c in broken]
            parts.append(f"{len(shown)} debug containers failed: {_listed(shown, len(shown))}")
        room = MAX_MESSAGE // len(parts) - 2  # each part keeps its share of the message
        message = ". ".join(p[:room] for p in parts)
        reason = INJECTION_FAILED if outcome.failures else CONTAINER_FAILED
        return [(READY, "False", reason, message), (DEGRADED, "True", reason, message)]
    healthy: _Condition = (DEGRADED, "False", AS_EXPECTED, "")
    if not outcome.matched:
        return [(READY, "True", NO_MATCHING_PODS, "no pod matches the selector"), healthy]
    pending = [c for c in current if not up(c)]
    if pending or outcome.retrying:
        parts = []
        if pending:
            shown = [f"{c.pod} ({c.reason or c.state})" for c in pending]
            shown = [s.replace("(Unknown)", "(not reported yet)") for s in shown]
            parts.append(
                f"{len(current) - len(pending)} of {len(current)} debug containers running; "
                f"starting: {_listed(shown, len(shown))}"
            )
        if outcome.retrying:
            retrying = list(outcome.retrying)
            parts.append(f"injection to be retried: {_listed(retrying, len(retrying))}")
        return [(READY, "False", STARTING, ("; ".join(parts) + over)[:MAX_MESSAGE]), healthy]
    count = f"{len(outcome.debugged)} of {len(outcome.matched)} matching pods debugged{over}"
    return [(READY, "True", DEBUGGED, count), healthy]


def _bounded(containers: Iterable[DebuggedPod], current: Collection[str]) -> list[DebuggedPod]:
    """The first :data:`MAX_DEBUGGED_PODS` entries: those of the ``current`` container first,
    then by pod and container (the order of the list)."""
    ordered = sorted(containers, key=lambda d: (d.container not in current, d.pod, d.container))
    return sorted(ordered[:MAX_DEBUGGED_PODS], key=lambda d: (d.pod, d.container))


def status_patch(debugger: Mapping[str, Any], outcome: Outcome, now: datetime) -> JSON | None:
    """The status fields to write, or None when the current status already says the same."""
    now = now if now.tzinfo else now.replace(tzinfo=UTC)
    current = debugger.get("status") or {}
    generation = int(object_meta(debugger).get("generation") or 0)
    previous = current.get("conditions")
    conditions: list[dict[str, Any]] = (
        [dict(c) for c in previous if isinstance(c, Mapping)] if isinstance(previous, list) else []
    )
    for type_, value, reason, message in _conditions(outcome):
        conditions, _ = set_condition(conditions, type_, value, reason, message, generation, now)
    failures: Sequence[Failure] = sorted(outcome.failures, key=lambda f: f.pod)
    desired = PodDebuggerStatus(
        matched_pods=len(outcome.matched),
        debugged_count=len(outcome.debugged),
        skipped_pods=outcome.skipped,
        debugged_pods=_bounded(outcome.containers, outcome.current),
        debugged_pods_total=len(outcome.containers),
        failed_pods=[
            FailedPod(
                pod=f.pod,
                uid=f.uid,
                container=f.container,
                reason=f.reason,
                message=f.message[:MAX_MESSAGE],
                attempts=f.attempts if f.reason == REJECTED else None,
                last_attempt_time=None if f.last_attempt is None else timestamp(f.last_attempt),
            )
            for f in failures[:MAX_FAILED_PODS]
        ],
        observed_generation=generation,
        conditions=conditions,
    ).to_kube()
    if all(current.get(k) == v for k, v in desired.items()):
        return None
    return desired
