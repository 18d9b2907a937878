"""When a pod event reconciles its PodSet: at once if the PodSet is idle, else once per window.

A scale-up of 500 pods sends thousands of pod events; reconciling the PodSet for each would
spend CPU and status writes for nothing, so the events of one window share one reconcile. The
first event after a quiet spell is not delayed: a lone pod turning Ready or being deleted is
acted on at once, and the last event of a burst waits at most one window (half on average),
not a whole window after every event.

A PodSet's window widens with what its reconciles cost: at least ``cost_factor`` times the last
one's CPU time. A reconcile reads every pod of the namespace, so with many pods it is costly,
and a fixed window under a steady flood of pod events (every pod annotated) kept a core busy
reconciling (bench/README.md); widened, reconciles take at most about a
``cost_factor``-th of the time.
"""

from __future__ import annotations

from collections.abc import Hashable


class EventWindow:
    """Reconcile times for event bursts: at most one per window per key, leading edge first."""

    def __init__(self, seconds: float, cost_factor: float = 10.0) -> None:
        self.seconds = seconds
        self.cost_factor = cost_factor
        self._slots: dict[Hashable, float] = {}
        self._costs: dict[Hashable, float] = {}

    def width(self, key: Hashable) -> float:
        """``key``'s window: ``seconds``, or ``cost_factor`` times its last reconcile's cost."""
        return max(self.seconds, self.cost_factor * self._costs.get(key, 0.0))

    def spent(self, key: Hashable, seconds: float) -> None:
        """Record the CPU time ``key``'s last reconcile took."""
        self._costs[key] = seconds

    def delay(self, key: Hashable, now: float) -> float:
        """Seconds from ``now`` until ``key`` should be reconciled for an event seen at ``now``."""
        slot = self._slots.get(key)
        if slot is not None and slot > now:
            return slot - now  # a reconcile is already planned for this window
        width = self.width(key)
        if slot is None or now >= slot + width:
            slot = now
        else:
            slot += width
        self._slots[key] = slot
        return slot - now

    def forget(self, key: Hashable) -> None:
        """Drop ``key``'s window (its object is gone)."""
        self._slots.pop(key, None)
        self._costs.pop(key, None)
