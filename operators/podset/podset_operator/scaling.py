"""ReplicaSet-style scaling: replica diff, burst cap and the slow-start creation window."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from podset_operator.pod_ranking import select_victims
from podset_operator.pod_state import Pod

BURST_REPLICAS = 500
"""Most pods created or deleted in one reconcile (k8s replicaset.BurstReplicas)."""
CREATE_WINDOW = 64
"""Most pod creates in flight at once for one PodSet (as many as the operator's request pool)."""


@dataclass(frozen=True)
class Step:
    """Pod changes for one reconcile: how many new-template pods to create, which to delete."""

    creates: int = 0
    deletes: tuple[Pod, ...] = ()


@dataclass
class SlowStart:
    """How many of ``count`` creates may be in flight: 1 at first, one more per success.

    k8s slowStartBatch doubles its batch after each fully successful batch, so a template or
    a quota the API server refuses costs one failed request, not hundreds. Growing the window
    by one per success doubles it per round trip just the same, without waiting for a batch's
    slowest request; after a failure nothing more is issued (``allowed`` is 0), so at most
    the window's worth of requests fail.
    """

    count: int
    limit: int = CREATE_WINDOW
    issued: int = 0
    in_flight: int = 0
    window: int = 1
    failed: bool = False

    def allowed(self) -> int:
        """How many more creates to issue now."""
        if self.failed:
            return 0
        return max(0, min(self.count - self.issued, self.window - self.in_flight))

    def issue(self, n: int) -> None:
        """``n`` creates were sent."""
        self.issued += n
        self.in_flight += n

    def complete(self, ok: bool) -> None:
        """One create came back, successful or not."""
        self.in_flight -= 1
        if ok:
            self.window = min(self.window + 1, self.limit)
        else:
            self.failed = True


def replica_set_step(
    managed: Sequence[Pod],
    deletable: Sequence[Pod],
    replicas: int,
    template_hash: str,
    now: datetime,
) -> Step:
    """Create or delete toward ``replicas`` active pods, at most BURST_REPLICAS at a time.

    Victims come from ``deletable`` by deletion rank, outdated-template pods first.
    """
    diff = replicas - len(managed)
    if diff > 0:
        return Step(creates=min(diff, BURST_REPLICAS))
    victims = select_victims(deletable, min(-diff, BURST_REPLICAS), managed, now, template_hash)
    return Step(deletes=victims)
