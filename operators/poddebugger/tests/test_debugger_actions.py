"""Executing plans against a fake API: the subresource only, write-through, refusals."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

from opsuite_common.kube import ApiException
from opsuite_common.status_pacer import StatusPacer
from opsuite_common.store import Store
from poddebugger_operator.actions import execute, slim_pod
from poddebugger_operator.injected import Injected
from poddebugger_operator.reconcile import plan

JSON = dict[str, Any]
NOW = datetime(2026, 1, 1, tzinfo=UTC)
REFUSAL = 'pods "b" is forbidden: violates PodSecurity "restricted:latest": privileged'


class FakeKube:
    """Records requests; the pod subresource answers with the patched pod, or a refusal."""

    def __init__(self, pods: dict[str, JSON], refuse: set[str]) -> None:
        self.calls: list[tuple[str, str, Any, str]] = []
        self.pods = pods
        self.refuse = refuse

    def patch(self, path: str, patch: Any, *, patch_type: str = "merge") -> Any:
        self.calls.append(("PATCH", path, patch, patch_type))
        future: asyncio.Future[JSON] = asyncio.get_running_loop().create_future()
        name = path.split("/pods/")[-1].split("/")[0] if "/pods/" in path else ""
        if name in self.refuse:
            body = json.dumps({"kind": "Status", "message": REFUSAL})
            exc = ApiException(status=403, reason="Forbidden")
            exc.body = body
            future.set_exception(exc)
        elif name:
            pod = self.pods[name]
            added = patch["spec"]["ephemeralContainers"]
            spec = {
                **pod["spec"],
                "ephemeralContainers": [*pod["spec"]["ephemeralContainers"], *added],
            }
            future.set_result({**pod, "spec": spec})
        else:
            future.set_result({})
        return future


def _pod(name: str) -> JSON:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "labels": {"app": "w"}},
        "spec": {"ephemeralContainers": []},
        "status": {"phase": "Running"},
    }


def test_injections_patch_only_the_subresource_and_refusals_are_reported() -> None:
    debugger = {
        "metadata": {"name": "dbg", "namespace": "ns", "uid": "u", "generation": 1},
        "spec": {"selector": {"matchLabels": {"app": "w"}}, "image": "busybox"},
    }
    pods = {n: _pod(n) for n in ("a", "b")}
    cache = Store("pods")
    for p in pods.values():
        cache.apply("ADDED", slim_pod(p))
    kube = FakeKube(pods, refuse={"b"})
    actions = plan(debugger, cache.items(), NOW)
    assert len(actions.injections) == 2

    injected = Injected()
    done = asyncio.run(execute(kube, cache, injected, debugger, actions, StatusPacer(), NOW))  # type: ignore[arg-type]

    pod_calls = [c for c in kube.calls if "/pods/" in c[1]]
    assert {c[1] for c in pod_calls} == {
        "/api/v1/namespaces/ns/pods/a/ephemeralcontainers",
        "/api/v1/namespaces/ns/pods/b/ephemeralcontainers",
    }
    assert all(c[3] == "strategic" for c in pod_calls)
    assert [i.pod_name for i in done.injected] == ["a"]
    assert [(f.pod, f.message) for f in done.refused] == [("b", REFUSAL)]
    # Written through: the next pass plans nothing for a, and does not retry b.
    (status_call,) = [c for c in kube.calls if c[1].endswith("/status")]
    status = status_call[2]["status"]
    assert status["failedPods"][0]["message"] == REFUSAL
    again = plan({**debugger, "status": status}, cache.items(), NOW)
    assert again.injections == ()
    # A version of a older than the PATCH (kwok's status update), delivered by the watch after
    # it, does not bring the container back to the planner.
    stale = {**pods["a"], "status": {"phase": "Running", "hostIP": "10.0.0.1"}}
    cache.apply("MODIFIED", injected.fill(slim_pod(stale)))
    assert plan({**debugger, "status": status}, cache.items(), NOW).injections == ()


def test_status_writes_are_paced_but_refusals_are_written_at_once() -> None:
    debugger = {
        "metadata": {"name": "dbg", "namespace": "ns", "uid": "u", "generation": 1},
        "spec": {"selector": {"matchLabels": {"app": "w"}}, "image": "busybox"},
    }
    for refused, status_writes in ((set(), 0), ({"b"}, 1)):
        pods = {n: _pod(n) for n in ("a", "b")}
        cache = Store("pods")
        for p in pods.values():
            cache.apply("ADDED", slim_pod(p))
        kube = FakeKube(pods, refuse=refused)
        pacer = StatusPacer(interval=60)
        pacer.wrote(("ns", "dbg"))
        actions = plan(debugger, cache.items(), NOW)
        done = asyncio.run(execute(kube, cache, Injected(), debugger, actions, pacer, NOW))  # type: ignore[arg-type]
        assert len([c for c in kube.calls if c[1].endswith("/status")]) == status_writes
        if not refused:  # a pass comes when the write is due
            assert done.requeue_after is not None
            assert 59 < done.requeue_after <= 60
