"""Which pods to delete first (k8s controller.ActivePodsWithRanks, without log-scale jitter)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta

from podset_operator.pod_state import (
    Pod,
    creation_time,
    deletion_cost,
    is_active,
    is_ready,
    is_updated,
    max_restarts,
    metadata,
    node_name,
    phase,
    pod_name,
    ready_since,
)

DeletionKey = tuple[int, int, int, int, int, tuple[int, int], int, tuple[int, int], str, str]

_PHASE_ORDINAL = {"Pending": 0, "Unknown": 1, "Running": 2}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def _newest_first(moment: datetime | None) -> tuple[int, int]:
    """Missing times sort first, then newer before older (k8s afterOrZero)."""
    if moment is None:
        return (0, 0)
    return (1, -((moment - _EPOCH) // _MICROSECOND))


def colocation_counts(related: Iterable[Pod]) -> Counter[str]:
    """Active related pods per node name (k8s getPodsRankedByRelatedPodsOnSameNode)."""
    return Counter(node_name(p) for p in related if is_active(p))


def deletion_key(pod: Pod, colocated: int) -> DeletionKey:
    """Sort key; smaller means delete sooner. ``colocated`` counts related pods on its node.

    Order: unassigned < assigned; Pending < Unknown < Running; not ready < ready; lower
    pod-deletion-cost; more colocated pods; ready more recently; more restarts; created more
    recently; then name and uid so the order is total.
    """
    ready = is_ready(pod)
    return (
        1 if node_name(pod) else 0,
        _PHASE_ORDINAL.get(phase(pod), 0),
        1 if ready else 0,
        deletion_cost(pod),
        -colocated,
        _newest_first(ready_since(pod)) if ready else (0, 0),
        -max_restarts(pod),
        _newest_first(creation_time(pod)),
        pod_name(pod),
        str(metadata(pod).get("uid", "")),
    )


def rank_for_deletion(
    pods: Iterable[Pod], related: Iterable[Pod], template_hash: str | None = None
) -> list[Pod]:
    """``pods`` ordered most-deletable first; with ``template_hash``, outdated pods go first."""
    counts = colocation_counts(related)

    def key(pod: Pod) -> tuple[bool, DeletionKey]:
        updated = template_hash is not None and is_updated(pod, template_hash)
        return (updated, deletion_key(pod, counts[node_name(pod)]))

    return sorted(pods, key=key)


def select_victims(
    candidates: Iterable[Pod], count: int, related: Sequence[Pod], template_hash: str | None = None
) -> tuple[Pod, ...]:
    """The ``count`` best pods to delete among ``candidates`` (fewer if there are not enough)."""
    if count <= 0:
        return ()
    return tuple(rank_for_deletion(candidates, related, template_hash)[:count])
