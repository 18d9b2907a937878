"""Status writes are paced per object."""

from __future__ import annotations

from opsuite_common.status_pacer import StatusPacer
from opsuite_testkit import FakeClock


def test_a_write_waits_for_the_interval_since_the_last_one_of_the_same_object() -> None:
    clock = FakeClock()
    pacer = StatusPacer(interval=1.0, clock=clock)
    assert pacer.delay("a") == 0.0
    pacer.wrote("a")
    clock.now += 0.25
    assert pacer.delay("a") == 0.75
    assert pacer.delay("b") == 0.0  # per object
    clock.now += 0.75
    assert pacer.delay("a") == 0.0
    pacer.wrote("a")
    pacer.forget("a")
    assert pacer.delay("a") == 0.0
