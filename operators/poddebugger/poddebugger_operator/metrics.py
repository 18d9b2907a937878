"""PodDebugger injection counters and latency, next to the common reconcile metrics."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from opsuite_common.metrics import register

INJECTIONS = register(
    Counter(
        "opsuite_poddebugger_injections_total",
        "Ephemeral debug containers added to pods",
        registry=None,
    )
)
FAILURES = register(
    Counter(
        "opsuite_poddebugger_injection_failures_total",
        "Ephemeral debug containers the API server refused or that failed to be added",
        registry=None,
    )
)
LATENCY_SECONDS = register(
    Histogram(
        "opsuite_poddebugger_injection_latency_seconds",
        "Time from a pod first seen matching a PodDebugger to its debug container added",
        buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
        registry=None,
    )
)


def observe_injection(seconds: float) -> None:
    """One debug container was added ``seconds`` after its pod was seen matching."""
    INJECTIONS.inc()
    LATENCY_SECONDS.observe(max(seconds, 0.0))


def observe_failures(count: int) -> None:
    """``count`` injections failed."""
    if count:
        FAILURES.inc(count)
