"""Per-PodSet replica gauges, next to the common controller-runtime reconcile metrics."""

from __future__ import annotations

import contextlib

from prometheus_client import Gauge

from opsuite_common.metrics import register
from opsuite_common.store import ObjectKey
from podset_operator.status import PodSetStatus

KINDS = ("desired", "current", "ready")

REPLICAS = register(
    Gauge(
        "opsuite_podset_replicas",
        "Pods of a PodSet: desired (spec.replicas), current (active pods) and ready",
        ["namespace", "podset", "kind"],
        registry=None,
    )
)


def observe(key: ObjectKey, status: PodSetStatus) -> None:
    """Set the gauges of the PodSet ``key`` from the counts of its latest reconcile."""
    namespace, name = key
    values = (status.desired, status.replicas, status.ready_replicas)
    for kind, value in zip(KINDS, values, strict=True):
        REPLICAS.labels(namespace, name, kind).set(value)


def forget(key: ObjectKey) -> None:
    """Remove the series of a deleted PodSet."""
    namespace, name = key
    for kind in KINDS:
        with contextlib.suppress(KeyError):  # never observed
            REPLICAS.remove(namespace, name, kind)
