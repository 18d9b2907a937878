"""ReplicaSet-style expectations: do not act again until earlier creates/deletes are observed.

Mirrors k8s controller.UIDTrackingControllerExpectations: record what a reconcile is about to
do, count it down from watch events, and treat a record older than the TTL as satisfied so a
missed event cannot wedge a PodSet.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

EXPECTATIONS_TTL = timedelta(minutes=5)


@dataclass
class _Record:
    creates: int
    deletes: set[str]
    recorded_at: datetime


class Expectations:
    """Expected pod creates and deletes per PodSet key (e.g. "namespace/name"); thread-safe."""

    def __init__(self, ttl: timedelta = EXPECTATIONS_TTL) -> None:
        self._ttl = ttl
        self._records: dict[str, _Record] = {}
        self._lock = threading.Lock()

    def expect(self, key: str, *, creates: int, deletes: Iterable[str], now: datetime) -> None:
        """Record, before acting, ``creates`` pods to be created and pod names to be deleted."""
        with self._lock:
            self._records[key] = _Record(creates, set(deletes), now)

    def creation_observed(self, key: str, count: int = 1) -> None:
        """A pod of ``key`` was seen created, or ``count`` planned creates were skipped/failed."""
        with self._lock:
            record = self._records.get(key)
            if record is not None:
                record.creates -= count

    def deletion_observed(self, key: str, pod_name: str) -> None:
        """A pod was seen deleted or terminating, or its delete call failed."""
        with self._lock:
            record = self._records.get(key)
            if record is not None:
                record.deletes.discard(pod_name)

    def satisfied(self, key: str, now: datetime) -> bool:
        """True when nothing is outstanding, nothing was recorded, or the record expired."""
        return self.pending_for(key, now) is None

    def pending_for(self, key: str, now: datetime) -> float | None:
        """Seconds until the outstanding record of ``key`` expires; None when satisfied."""
        with self._lock:
            record = self._records.get(key)
            if record is None or (record.creates <= 0 and not record.deletes):
                return None
            left = (record.recorded_at + self._ttl - now).total_seconds()
            return left if left >= 0 else None

    def forget(self, key: str) -> None:
        """Drop the record of a deleted PodSet so a same-named successor starts clean."""
        with self._lock:
            self._records.pop(key, None)
