"""Per-sync target gauges and the propagation latency of each kind, next to the common metrics.

Each kind has its own series (``opsuite_configmapsync_*``, ``opsuite_secretsync_*``), so that
ConfigMapSync's dashboards and alerts keep their meaning; labels are names only, never a value.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from prometheus_client import Gauge, Histogram

from configmapsync_operator.kinds import CONFIGMAPS, SECRETS, SyncKind
from opsuite_common.metrics import register
from opsuite_common.store import ObjectKey


@dataclass(frozen=True)
class SyncMetrics:
    """The series of one kind of sync."""

    synced: Gauge
    failed: Gauge
    propagation: Histogram

    def observe_targets(self, key: ObjectKey, synced: int, failed: int) -> None:
        """Set the gauges of the sync ``key``."""
        self.synced.labels(*key).set(synced)
        self.failed.labels(*key).set(failed)

    def observe_propagation(self, seconds: float, copies: int) -> None:
        """``copies`` copies were written ``seconds`` after the source change was seen."""
        for _ in range(copies):
            self.propagation.observe(max(seconds, 0.0))

    def forget(self, key: ObjectKey) -> None:
        """Remove the series of a deleted sync."""
        for gauge in (self.synced, self.failed):
            with contextlib.suppress(KeyError):  # never observed
                gauge.remove(*key)


def _series(kind: SyncKind) -> SyncMetrics:
    name = kind.kind.lower()
    return SyncMetrics(
        synced=register(
            Gauge(
                f"opsuite_{name}_synced_targets",
                f"Destination namespaces of a {kind.kind} holding a current copy",
                ["namespace", name],
                registry=None,
            )
        ),
        failed=register(
            Gauge(
                f"opsuite_{name}_failed_targets",
                f"Destination namespaces of a {kind.kind} without a current copy (conflict, "
                "missing namespace, write error...)",
                ["namespace", name],
                registry=None,
            )
        ),
        propagation=register(
            Histogram(
                f"opsuite_{name}_propagation_seconds",
                f"Time from a change of a source {kind.object_kind} seen by the watch to a "
                "copy written",
                buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
                registry=None,
            )
        ),
    )


BY_KIND = {kind.kind: _series(kind) for kind in (CONFIGMAPS, SECRETS)}
"""The series of each kind, by the sync's kind."""
