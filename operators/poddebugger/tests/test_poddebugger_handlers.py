"""PodDebugger's watch wiring without a cluster: what a relisting that misses pods does.

kopf sends no DELETED event for a pod deleted while the watch was down (a relist after
"410 Gone"); the manager prunes every cache given to ``manager.watch`` after each listing and
hands the pruned objects to the handler as DELETED events (issue #16, item 1).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from opsuite_common.manager import Manager
from opsuite_common.store import JSON, ObjectKey
from opsuite_testkit import WiredOperator, offline_manager
from poddebugger_operator.actions import Injector
from poddebugger_operator.handlers import setup
from poddebugger_operator.models import GROUP, PLURAL

DEBUGGER: ObjectKey = ("work", "dbg")


class Wired(WiredOperator):
    """The PodDebugger wired onto an offline manager; forgotten pods recorded too."""

    def __init__(self, manager: Manager, forgotten: list[str]) -> None:
        super().__init__(manager)
        self.forgotten = forgotten


def _pod(namespace: str, name: str, labels: dict[str, str]) -> JSON:
    return {
        "metadata": {
            "namespace": namespace,
            "name": name,
            "uid": f"uid-{name}",
            "labels": labels,
            "managedFields": [{}],
        },
        "spec": {"containers": [{"name": "app", "image": "busybox"}]},
        "status": {"phase": "Running"},
    }


@pytest.fixture
def wired(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Wired:
    forgotten: list[str] = []
    original = Injector.forget_pod

    def forget_pod(self: Injector, uid: str) -> None:
        forgotten.append(uid)
        original(self, uid)

    monkeypatch.setattr(Injector, "forget_pod", forget_pod)
    manager = offline_manager("pod-debugger-operator", ("work", "other"), tmp_path, monkeypatch)
    setup(manager)
    wired = Wired(manager, forgotten)
    debugger = {
        "metadata": {"namespace": DEBUGGER[0], "name": DEBUGGER[1], "uid": "d", "generation": 1},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "image": "busybox",
            "command": ["sleep", "3600"],
            "maxPods": 1,
        },
    }
    wired.event(GROUP, PLURAL, None, debugger)
    for name in ("web-1", "web-2"):
        wired.event("", "pods", None, _pod("work", name, {"app": "web"}))
    wired.event("", "pods", None, _pod("other", "web-3", {"app": "web"}))
    wired.enqueued.clear()
    return wired


def test_a_pod_a_relisting_no_longer_holds_leaves_the_cache_enqueues_and_is_forgotten(
    wired: Wired,
) -> None:
    assert wired.cached("pods", "work", "web-1") is not None
    wired.manager.activity.listed("pods", "work", {("work", "web-2")})
    assert wired.cached("pods", "work", "web-1") is None
    assert wired.cached("pods", "work", "web-2") is not None
    assert wired.cached("pods", "other", "web-3") is not None  # another namespace's listing
    assert DEBUGGER in wired.enqueued
    assert wired.forgotten == ["uid-web-1"]


def test_a_relisting_holding_every_pod_enqueues_nothing(wired: Wired) -> None:
    wired.manager.activity.listed("pods", "work", {("work", "web-1"), ("work", "web-2")})
    assert wired.enqueued == []
    assert wired.forgotten == []


def test_the_cached_pod_is_the_slim_record(wired: Wired) -> None:
    record = wired.cached("pods", "work", "web-1")
    assert record is not None
    assert "managedFields" not in record["metadata"]
    assert record["spec"]["containers"] == [{"name": "app"}]  # names only
    assert record["status"]["phase"] == "Running"
