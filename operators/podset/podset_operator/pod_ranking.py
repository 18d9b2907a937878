"""Which pods to delete first (k8s controller.ActivePodsWithRanks, LogarithmicScaleDown on).

Upstream compares ready and creation times on a log2 scale measured back from now (feature
gate LogarithmicScaleDown, on by default since 1.22): pods whose times fall in the same
power-of-two bucket count as equally old, so a scale-down spreads over them pseudo-randomly
(by UID) instead of always taking the very newest.

One precise difference: upstream's ``Less`` orders two ready pods whose ready times differ but
share a bucket by UID at once, skipping the restart and creation rules, while two pods with
exactly equal ready times go on to those rules. That comparison is not transitive, so Go's
sort gives an order that depends on the input order. Here the key is total: within a bucket
the restart counts and the creation bucket come before the UID, for every pair.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime

from podset_operator.pod_state import (
    Pod,
    creation_time,
    deletion_cost,
    is_active,
    is_ready,
    is_updated,
    max_restarts,
    max_sidecar_restarts,
    metadata,
    node_name,
    phase,
    pod_name,
    ready_since,
)

TimeRank = tuple[int, int]
DeletionKey = tuple[int, int, int, int, int, TimeRank, int, int, TimeRank, str, str]

_PHASE_ORDINAL = {"Pending": 0, "Unknown": 1, "Running": 2}


def log_bucket(moment: datetime, now: datetime) -> int:
    """floor(log2(now - moment, in nanoseconds)); -1 when ``moment`` is not before ``now``
    (k8s logarithmicRankDiff)."""
    delta = now - moment
    nanoseconds = (delta.days * 86_400 + delta.seconds) * 10**9 + delta.microseconds * 1000
    return int(math.log2(nanoseconds)) if nanoseconds > 0 else -1


def _newest_first(moment: datetime | None, now: datetime) -> TimeRank:
    """Missing times sort first, then more recent log2 buckets before older ones."""
    return (0, 0) if moment is None else (1, log_bucket(moment, now))


def colocation_counts(related: Iterable[Pod]) -> Counter[str]:
    """Active related pods per node name (k8s getPodsRankedByRelatedPodsOnSameNode)."""
    return Counter(node_name(p) for p in related if is_active(p))


def deletion_key(pod: Pod, colocated: int, now: datetime) -> DeletionKey:
    """Sort key; smaller means delete sooner. ``colocated`` counts related pods on its node.

    Order: unassigned < assigned; Pending < Unknown < Running; not ready < ready; lower
    pod-deletion-cost; more colocated pods; ready more recently (log2 bucket); more restarts of
    regular containers, then of sidecars; created more recently (log2 bucket); then UID, and
    the name so the order is total.
    """
    ready = is_ready(pod)
    return (
        1 if node_name(pod) else 0,
        _PHASE_ORDINAL.get(phase(pod), 0),
        1 if ready else 0,
        deletion_cost(pod),
        -colocated,
        _newest_first(ready_since(pod), now) if ready else (0, 0),
        -max_restarts(pod),
        -max_sidecar_restarts(pod),
        _newest_first(creation_time(pod), now),
        str(metadata(pod).get("uid", "")),
        pod_name(pod),
    )


def rank_for_deletion(
    pods: Iterable[Pod], related: Iterable[Pod], now: datetime, template_hash: str | None = None
) -> list[Pod]:
    """``pods`` ordered most-deletable first; with ``template_hash``, outdated pods go first."""
    counts = colocation_counts(related)

    def key(pod: Pod) -> tuple[bool, DeletionKey]:
        updated = template_hash is not None and is_updated(pod, template_hash)
        return (updated, deletion_key(pod, counts[node_name(pod)], now))

    return sorted(pods, key=key)


def select_victims(
    candidates: Iterable[Pod],
    count: int,
    related: Sequence[Pod],
    now: datetime,
    template_hash: str | None = None,
) -> tuple[Pod, ...]:
    """The ``count`` best pods to delete among ``candidates`` (fewer if there are not enough)."""
    if count <= 0:
        return ()
    return tuple(rank_for_deletion(candidates, related, now, template_hash)[:count])
