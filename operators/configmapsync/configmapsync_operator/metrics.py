"""Per-ConfigMapSync target gauges and the propagation latency, next to the common metrics."""

from __future__ import annotations

import contextlib

from prometheus_client import Gauge, Histogram

from opsuite_common.metrics import register
from opsuite_common.store import ObjectKey

SYNCED_TARGETS = register(
    Gauge(
        "opsuite_configmapsync_synced_targets",
        "Destination namespaces of a ConfigMapSync holding a current copy",
        ["namespace", "configmapsync"],
        registry=None,
    )
)
FAILED_TARGETS = register(
    Gauge(
        "opsuite_configmapsync_failed_targets",
        "Destination namespaces of a ConfigMapSync without a current copy (conflict, missing "
        "namespace, write error...)",
        ["namespace", "configmapsync"],
        registry=None,
    )
)
PROPAGATION_SECONDS = register(
    Histogram(
        "opsuite_configmapsync_propagation_seconds",
        "Time from a change of a source ConfigMap seen by the watch to a copy written",
        buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
        registry=None,
    )
)


def observe_targets(key: ObjectKey, synced: int, failed: int) -> None:
    """Set the gauges of the ConfigMapSync ``key``."""
    SYNCED_TARGETS.labels(*key).set(synced)
    FAILED_TARGETS.labels(*key).set(failed)


def observe_propagation(seconds: float, copies: int) -> None:
    """``copies`` copies were written ``seconds`` after the source change was seen."""
    for _ in range(copies):
        PROPAGATION_SECONDS.observe(max(seconds, 0.0))


def forget(key: ObjectKey) -> None:
    """Remove the series of a deleted ConfigMapSync."""
    for gauge in (SYNCED_TARGETS, FAILED_TARGETS):
        with contextlib.suppress(KeyError):  # never observed
            gauge.remove(*key)
