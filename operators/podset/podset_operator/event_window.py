"""When a pod event reconciles its PodSet: at once if the PodSet is idle, else once per window.

A scale-up of 500 pods sends thousands of pod events; reconciling the PodSet for each would
spend CPU and status writes for nothing, so the events of one window share one reconcile. The
first event after a quiet spell is not delayed: a lone pod turning Ready or being deleted is
acted on at once, and the last event of a burst waits at most one window (half on average),
not a whole window after every event.
"""

from __future__ import annotations

from collections.abc import Hashable


class EventWindow:
    """Reconcile times for event bursts: at most one per ``seconds`` per key, leading edge first."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._slots: dict[Hashable, float] = {}

    def delay(self, key: Hashable, now: float) -> float:
        """Seconds from ``now`` until ``key`` should be reconciled for an event seen at ``now``."""
        slot = self._slots.get(key)
        if slot is not None and slot > now:
            return slot - now  # a reconcile is already planned for this window
        if slot is None or now >= slot + self.seconds:
            slot = now
        else:
            slot += self.seconds
        self._slots[key] = slot
        return slot - now

    def forget(self, key: Hashable) -> None:
        """Drop ``key``'s window (its object is gone)."""
        self._slots.pop(key, None)
