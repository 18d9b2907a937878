"""RollingUpdate math (k8s deployment rolling.go and util.ResolveFenceposts / NewRSNewReplicas).

Updated pods play the Deployment's new ReplicaSet and outdated pods the old ones; one step
combines reconcileNewReplicaSet and reconcileOldReplicaSets, counting the pods about to be
created as unavailable new replicas, exactly as the Deployment's next sync would.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from podset_operator.models import IntOrPercent
from podset_operator.pod_ranking import select_victims
from podset_operator.pod_state import Pod, is_available, is_updated, pod_name
from podset_operator.scaling import BURST_REPLICAS, Step
from podset_operator.spec import scaled_value


def resolve_fenceposts(
    max_surge: IntOrPercent, max_unavailable: IntOrPercent, desired: int
) -> tuple[int, int]:
    """(surge, unavailable): surge rounds up, unavailable down; both zero gives unavailable 1."""
    surge = scaled_value(max_surge, desired, round_up=True)
    unavailable = scaled_value(max_unavailable, desired, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def rolling_update_step(
    managed: Sequence[Pod],
    deletable: Sequence[Pod],
    replicas: int,
    fenceposts: tuple[int, int],
    template_hash: str,
    min_ready_seconds: int,
    now: datetime,
) -> Step:
    """One rolling-update step that never exceeds replicas+surge active pods and never takes
    available pods below replicas-unavailable (nor lower than they already are).

    ``managed`` are the active replicas; victims are only picked from ``deletable``.
    """
    surge, unavailable = fenceposts
    names = {pod_name(p) for p in deletable}
    new = [p for p in managed if is_updated(p, template_hash)]
    old = [p for p in managed if not is_updated(p, template_hash)]
    if len(new) > replicas:
        extra = min(len(new) - replicas, BURST_REPLICAS)
        candidates = [p for p in new if pod_name(p) in names]
        return Step(deletes=select_victims(candidates, extra, managed, now))

    creates = max(0, min(replicas + surge - len(managed), replicas - len(new), BURST_REPLICAS))
    available = {pod_name(p) for p in managed if is_available(p, min_ready_seconds, now)}
    new_available = sum(pod_name(p) in available for p in new)
    min_available = replicas - unavailable
    new_unavailable = len(new) + creates - new_available
    max_scaled_down = min(len(managed) + creates - min_available - new_unavailable, BURST_REPLICAS)
    if max_scaled_down <= 0:
        return Step(creates=creates)

    # Unhealthy old pods go first: deleting them cannot reduce availability.
    unhealthy = [p for p in old if pod_name(p) in names and pod_name(p) not in available]
    cleanup = select_victims(unhealthy, max_scaled_down, managed, now)
    cleaned = {pod_name(p) for p in cleanup}
    remaining = [p for p in old if pod_name(p) in names and pod_name(p) not in cleaned]
    scale_down = min(len(available) - min_available, BURST_REPLICAS - len(cleanup))
    victims = select_victims(remaining, scale_down, managed, now)
    return Step(creates=creates, deletes=cleanup + victims)
