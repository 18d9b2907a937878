"""ReplicaSet-style scaling: replica diff, burst cap and slow-start creation batches."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from podset_operator.pod_ranking import select_victims
from podset_operator.pod_state import Pod

BURST_REPLICAS = 500
"""Most pods created or deleted in one reconcile (k8s replicaset.BurstReplicas)."""
SLOW_START_INITIAL_BATCH_SIZE = 1


@dataclass(frozen=True)
class Step:
    """Pod changes for one reconcile: how many new-template pods to create, which to delete."""

    creates: int = 0
    deletes: tuple[Pod, ...] = ()


def slow_start_batches(count: int, initial: int = SLOW_START_INITIAL_BATCH_SIZE) -> Iterator[int]:
    """Batch sizes initial, 2*initial, 4*initial, ... summing to ``count``.

    The executor runs one batch at a time and stops after a batch with a failure
    (k8s slowStartBatch); creations it never attempted must be un-expected.
    """
    remaining = count
    size = min(remaining, initial)
    while size > 0:
        yield size
        remaining -= size
        size = min(2 * size, remaining)


def replica_set_step(
    managed: Sequence[Pod], deletable: Sequence[Pod], replicas: int, template_hash: str
) -> Step:
    """Create or delete toward ``replicas`` active pods, at most BURST_REPLICAS at a time.

    Victims come from ``deletable`` by deletion rank, outdated-template pods first.
    """
    diff = replicas - len(managed)
    if diff > 0:
        return Step(creates=min(diff, BURST_REPLICAS))
    victims = select_victims(deletable, min(-diff, BURST_REPLICAS), managed, template_hash)
    return Step(deletes=victims)
