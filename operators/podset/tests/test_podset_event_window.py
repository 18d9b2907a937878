"""The pod-event window: leading edge when idle, at most one reconcile per window in a burst."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from podset_operator.event_window import EventWindow

KEY = ("ns", "web")


def test_the_first_event_after_a_quiet_spell_is_not_delayed() -> None:
    window = EventWindow(0.25)
    assert window.delay(KEY, 10.0) == 0.0
    assert window.delay(KEY, 20.0) == 0.0


def test_events_of_a_burst_share_the_next_slot() -> None:
    window = EventWindow(0.25)
    assert window.delay(KEY, 0.0) == 0.0
    assert window.delay(KEY, 0.1) == 0.25 - 0.1
    assert window.delay(KEY, 0.2) == 0.25 - 0.2
    assert window.delay(KEY, 0.3) == 0.5 - 0.3  # the 0.25 slot has passed: the next window's
    assert window.delay(KEY, 1.0) == 0.0  # quiet for a window: at once again


def test_keys_have_their_own_windows_and_forget_resets_one() -> None:
    window = EventWindow(0.25)
    assert window.delay(KEY, 0.0) == 0.0
    assert window.delay(("ns", "other"), 0.1) == 0.0
    window.forget(KEY)
    assert window.delay(KEY, 0.1) == 0.0


@given(st.lists(st.floats(min_value=0, max_value=5, allow_nan=False), min_size=1, max_size=60))
def test_at_most_one_reconcile_per_window_and_none_later_than_a_window(times: list[float]) -> None:
    """Over any burst, planned reconciles are a window apart, and no event waits more than one."""
    window = EventWindow(0.25)
    slots = []
    for now in sorted(times):
        delay = window.delay(KEY, now)
        assert 0.0 <= delay <= 0.25 + 1e-9
        slots.append(now + delay)
    distinct = sorted(set(slots))
    assert all(b - a >= 0.25 - 1e-9 for a, b in itertools.pairwise(distinct))


def test_a_costly_reconcile_widens_its_own_window_only() -> None:
    """With 20,000 pods a reconcile costs tens of ms: its PodSet's window grows to ten times
    that, so that a steady flood of pod events keeps at most a tenth of a core reconciling."""
    window = EventWindow(0.1)
    window.spent(KEY, 0.08)
    assert window.delay(KEY, 0.0) == 0.0
    assert abs(window.delay(KEY, 0.05) - 0.75) < 1e-9  # next slot: 0.8 s after the first
    assert window.delay(("ns", "small"), 0.0) == 0.0
    assert abs(window.delay(("ns", "small"), 0.05) - 0.05) < 1e-9
    window.spent(KEY, 0.001)  # cheap again: back to the base window
    assert abs(window.delay(KEY, 0.9) - 0.0) < 1e-9
    window.forget(KEY)
    assert window.width(KEY) == 0.1
