"""Containers added but not yet shown by the watch are filled into stale pod records."""

from __future__ import annotations

from opsuite_common.store import JSON
from opsuite_testkit import FakeClock
from poddebugger_operator.injected import Injected


def _record(uid: str, *names: str) -> JSON:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": uid},
        "spec": {"ephemeralContainers": [{"name": n, "image": "busybox"} for n in names]},
        "status": {"phase": "Running"},
    }


def test_a_stale_record_gets_the_added_container_until_the_watch_shows_it() -> None:
    injected = Injected(ttl=60, clock=FakeClock(0.0))
    injected.add("u1", {"name": "dbg", "image": "busybox", "command": ["sh"]})
    stale = _record("u1", "old")
    filled = injected.fill(stale)
    assert [c["name"] for c in filled["spec"]["ephemeralContainers"]] == ["old", "dbg"]
    assert filled["spec"]["ephemeralContainers"][1] == {"name": "dbg", "image": "busybox"}
    assert stale["spec"]["ephemeralContainers"] == [{"name": "old", "image": "busybox"}]
    assert injected.fill(_record("u2")) == _record("u2")  # another pod: untouched
    shown = _record("u1", "old", "dbg")
    assert injected.fill(shown) is shown
    assert len(injected) == 0  # the watch confirmed it: forgotten
    assert injected.fill(stale) is stale


def test_entries_expire_and_go_with_their_pod() -> None:
    clock = FakeClock(0.0)
    injected = Injected(ttl=60, clock=clock)
    injected.add("u1", {"name": "a", "image": "busybox"})
    injected.add("u2", {"name": "b", "image": "busybox"})
    injected.forget("u2")
    assert injected.fill(_record("u2")) == _record("u2")
    clock.now = 61
    assert injected.fill(_record("u1")) == _record("u1")
    assert len(injected) == 0
