"""Executing plans against a fake API: the subresource only, marks, refusals, backoff, status."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from opsuite_common.fence import WriteFenced
from opsuite_common.kube import ApiException
from opsuite_common.status_pacer import StatusPacer
from opsuite_common.store import JSON, ObjectKey, Store
from opsuite_testkit import FakeClock
from poddebugger_operator.actions import InjectionResult, Injector, slim_pod, write_status
from poddebugger_operator.injected import Injected
from poddebugger_operator.reconcile import plan

NOW = datetime(2026, 1, 1, tzinfo=UTC)
KEY: ObjectKey = ("ns", "dbg")
REFUSAL = 'pods "b" is forbidden: violates PodSecurity "restricted:latest": privileged'
DEBUGGER = {
    "metadata": {"name": "dbg", "namespace": "ns", "uid": "u", "generation": 1},
    "spec": {"selector": {"matchLabels": {"app": "w"}}, "image": "busybox"},
}


class FakeKube:
    """Records requests; pod subresource PATCHes answer once ``release`` is called: with the
    patched pod, a refusal (403) or a server error (500)."""

    def __init__(self, refuse: set[str] = frozenset(), fail: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.calls: list[tuple[str, Any]] = []
        self.refuse = refuse
        self.fail = fail
        self.open: list[tuple[str, asyncio.Future[JSON]]] = []

    def patch(self, path: str, patch: Any, *, patch_type: str = "merge") -> Any:
        assert patch_type == ("strategic" if "/pods/" in path else "merge")
        self.calls.append((path, patch))
        future: asyncio.Future[JSON] = asyncio.get_running_loop().create_future()
        if "/pods/" in path:
            self.open.append((path.split("/pods/")[1].split("/")[0], future))
        else:
            future.set_result({})
        return future

    async def release(self) -> None:
        for name, future in self.open:
            if name in self.refuse:
                exc = ApiException(status=403, reason="Forbidden")
                exc.body = json.dumps({"kind": "Status", "message": REFUSAL})
                future.set_exception(exc)
            elif name in self.fail:
                future.set_exception(ApiException(status=500, reason="Internal Server Error"))
            else:
                future.set_result({})
        self.open.clear()
        await asyncio.sleep(0)  # the done callbacks


def _pod(name: str) -> JSON:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "labels": {"app": "w"}},
        "spec": {"ephemeralContainers": []},
        "status": {"phase": "Running"},
    }


def _setup(
    kube: FakeKube, clock: FakeClock | None = None
) -> tuple[Store, Injected, Injector, list[InjectionResult]]:
    cache = Store("pods")
    for name in ("a", "b"):
        cache.apply("ADDED", slim_pod(_pod(name)))
    injected = Injected()
    results: list[InjectionResult] = []
    injector = Injector(
        kube,  # type: ignore[arg-type]
        cache,
        injected,
        lambda _key, r: results.append(r),
        clock=clock or FakeClock(0.0),
        now=lambda: NOW,
    )
    return cache, injected, injector, results


def _again(cache: Store, injector: Injector, status: JSON | None = None) -> Any:
    debugger = {**DEBUGGER, "status": status} if status else DEBUGGER
    return plan(
        debugger, cache.items(), NOW, refused=injector.refused(KEY), waiting=injector.waiting(KEY)
    )


async def test_each_patch_carries_the_pods_uid_as_a_precondition() -> None:
    """A pod deleted and re-created under its name between the plan and the PATCH is another
    pod: the API server refuses a PATCH whose metadata.uid differs (422, checked by hand on the
    local plane), instead of adding a container planned for the old pod to the new one."""
    kube = FakeKube()
    cache, _injected, injector, _results = _setup(kube)
    injector.send(KEY, plan(DEBUGGER, cache.items(), NOW).injections)
    assert sorted(body["metadata"]["uid"] for _, body in kube.calls) == ["uid-a", "uid-b"]
    await kube.release()


async def test_a_pass_sends_without_waiting_and_refusals_wait_out_their_backoff() -> None:
    kube = FakeKube(refuse={"b"})
    cache, injected, injector, results = _setup(kube)
    actions = plan(DEBUGGER, cache.items(), NOW)
    assert len(actions.injections) == 2
    injector.send(KEY, actions.injections)
    assert {path for path, _ in kube.calls} == {
        "/api/v1/namespaces/ns/pods/a/ephemeralcontainers",
        "/api/v1/namespaces/ns/pods/b/ephemeralcontainers",
    }
    # In flight: a pass now sends nothing again.
    assert _again(cache, injector).injections == ()
    await kube.release()
    assert [(r.injection.pod_name, r.failure is None) for r in results] == [
        ("a", True),
        ("b", False),
    ]
    assert results[1].failure is not None
    assert results[1].failure.message == REFUSAL
    # b's mark was taken back, yet it is not tried again: the refusal is remembered, and the
    # status the next pass writes reports it.
    again = _again(cache, injector)
    assert again.injections == ()
    assert again.status_patch is not None
    (failed,) = again.status_patch["failedPods"]
    assert failed["message"] == REFUSAL
    # The status records the refusal's time and count, from which the next attempt is due.
    assert (failed["attempts"], failed["lastAttemptTime"]) == (1, "2026-01-01T00:00:00Z")
    assert again.requeue_after == 60
    assert len(injected) == 1
    # A version of a older than the PATCH (kwok's status update), delivered by the watch
    # after it, does not bring the container back to the planner.
    stale = {**_pod("a"), "status": {"phase": "Running", "hostIP": "10.0.0.1"}}
    cache.apply("MODIFIED", injected.fill(slim_pod(stale)))
    assert _again(cache, injector).injections == ()


async def test_a_transient_failure_holds_the_pod_back_with_a_growing_backoff() -> None:
    kube = FakeKube(fail={"b"})
    clock = FakeClock(0.0)
    cache, injected, injector, results = _setup(kube, clock)
    injector.send(KEY, plan(DEBUGGER, cache.items(), NOW).injections)
    await kube.release()
    assert [r.retry_after for r in results] == [None, 1.0]
    assert injector.waiting(KEY) == {"uid-b"}
    assert _again(cache, injector).injections == ()  # b waits, a holds its container
    clock.now += 1.0  # the backoff ran out
    retry = _again(cache, injector).injections
    assert [i.pod_name for i in retry] == ["b"]
    injector.send(KEY, retry)
    await kube.release()
    assert results[-1].retry_after == 2.0
    injector.forget_pod("uid-b")
    assert injector.waiting(KEY) == set()
    assert len(injected) == 1  # a's container, until the watch shows it or a is gone
    injector.forget_pod("uid-a")
    assert len(injected) == 0


async def test_status_writes_are_paced() -> None:
    kube = FakeKube()
    pacer = StatusPacer(interval=60)
    assert await write_status(kube, pacer, KEY, {"matchedPods": 1}) is None  # type: ignore[arg-type]
    assert kube.calls == [
        (
            "/apis/debug.opsuite.dev/v1alpha1/namespaces/ns/poddebuggers/dbg/status",
            {"status": {"matchedPods": 1}},
        )
    ]
    delay = await write_status(kube, pacer, KEY, {"matchedPods": 2})  # type: ignore[arg-type]
    assert delay is not None
    assert 59 < delay <= 60
    assert len(kube.calls) == 1
    assert await write_status(kube, pacer, KEY, None) is None  # type: ignore[arg-type]


def test_slim_records_keep_what_the_status_reports_of_each_container_and_nothing_more() -> None:
    whole = _pod("a")
    whole["spec"]["containers"] = [{"name": "app", "image": "x", "env": [{"name": "A"}]}]
    whole["spec"]["initContainers"] = [{"name": "setup", "image": "x", "restartPolicy": "Always"}]
    whole["spec"]["ephemeralContainers"] = [
        {"name": n, "image": "busybox", "securityContext": {"runAsUser": 65532}}
        for n in ("w", "r", "t", "e")
    ]
    whole["status"]["ephemeralContainerStatuses"] = [
        {
            "name": "w",
            "image": "busybox",
            "imageID": "",
            "ready": False,
            "restartCount": 0,
            "state": {"waiting": {"reason": "CreateContainerConfigError", "message": "root"}},
        },
        {
            "name": "r",
            "containerID": "containerd://1",
            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
        },
        {
            "name": "t",
            "lastState": {},
            "state": {
                "terminated": {
                    "exitCode": 1,
                    "signal": 9,
                    "reason": "Error",
                    "message": "bye",
                    "startedAt": "2026-01-01T00:00:00Z",
                    "finishedAt": "2026-01-01T00:00:01Z",
                    "containerID": "containerd://2",
                }
            },
        },
        {"name": "e", "state": {}},
    ]
    assert slim_pod(whole)["status"] == {
        "phase": "Running",
        "ephemeralContainerStatuses": [
            {
                "name": "w",
                "state": {"waiting": {"reason": "CreateContainerConfigError", "message": "root"}},
            },
            {"name": "r", "state": {"running": {}}},
            {
                "name": "t",
                "state": {"terminated": {"exitCode": 1, "reason": "Error", "message": "bye"}},
            },
            {"name": "e", "state": {}},
        ],
    }
    assert slim_pod(whole)["spec"] == {
        "containers": [{"name": "app"}],  # a targetContainer must be one of these
        "initContainers": [{"name": "setup"}],
        "ephemeralContainers": [{"name": n, "image": "busybox"} for n in ("w", "r", "t", "e")],
    }
    # A running container's restart of its clock, or a new containerID, is not a change.
    later = json.loads(json.dumps(whole))
    later["status"]["ephemeralContainerStatuses"][1]["state"]["running"]["startedAt"] = "x"
    later["status"]["ephemeralContainerStatuses"][1]["containerID"] = "containerd://3"
    assert slim_pod(later) == slim_pod(whole)


async def test_an_injection_the_write_fence_refused_is_dropped_quietly() -> None:
    """Leadership ended: the fence refused the PATCHes, unsent (#16, item 9). No result,
    refusal or backoff is recorded; the process is on its way out."""
    kube = FakeKube()
    cache, _injected, injector, results = _setup(kube)
    injector.send(KEY, plan(DEBUGGER, cache.items(), NOW).injections)
    for _, future in kube.open:
        future.set_exception(WriteFenced("PATCH: refused, this process does not lead"))
    await asyncio.sleep(0)  # the done callbacks
    assert results == []
    assert injector.refused(KEY) == {}
    assert injector.waiting(KEY) == set()


async def test_a_refusal_is_tried_again_once_its_backoff_is_over_and_counted_again() -> None:
    """A refusal a later change may lift (a namespace's Pod Security level relaxed) is tried
    again a minute later, and if refused again, recorded as the second in a row."""
    kube = FakeKube(refuse={"b"})
    cache, _injected, injector, results = _setup(kube)
    injector.send(KEY, plan(DEBUGGER, cache.items(), NOW).injections)
    await kube.release()
    status = _again(cache, injector).status_patch
    later = NOW + timedelta(seconds=60)
    retry = plan({**DEBUGGER, "status": status}, cache.items(), later)
    assert [(i.pod_name, i.attempt) for i in retry.injections] == [("b", 2)]
    injector.send(KEY, retry.injections)
    await kube.release()
    assert results[-1].failure is not None
    assert results[-1].failure.attempts == 2


class CopyKube:
    """GETs answer with the full pod; POSTs (mode Copy) answer as ``answer`` says."""

    def __init__(self, pods: dict[str, JSON], answer: ApiException | None = None) -> None:
        self.pods = pods
        self.answer = answer
        self.created: list[JSON] = []

    def request(self, method: str, path: str) -> Any:
        assert method == "GET"
        future: asyncio.Future[JSON] = asyncio.get_running_loop().create_future()
        future.set_result(self.pods[path.rsplit("/", 1)[1]])
        return future

    def create(self, path: str, body: JSON) -> Any:
        assert path == "/api/v1/namespaces/ns/pods"
        self.created.append(body)
        future: asyncio.Future[JSON] = asyncio.get_running_loop().create_future()
        if self.answer is None:
            future.set_result(body)
        else:
            future.set_exception(self.answer)
        return future


async def test_a_copy_is_created_once_from_the_full_pod_and_its_record_stands_meanwhile() -> None:
    """Mode Copy: the POST carries the pod's whole spec (the cache is slim); until the watch
    brings the copy, its record in the cache keeps the next passes from creating it again; a
    refusal takes the record back and is reported."""
    debugger = json.loads(json.dumps(DEBUGGER))
    debugger["spec"]["mode"] = "Copy"
    full = {name: _pod(name) for name in ("a", "b")}
    for pod in full.values():
        pod["spec"]["containers"] = [{"name": "app", "image": "app:1", "env": [{"name": "X"}]}]
    kube = CopyKube(full)
    cache, _injected, injector, results = _setup(kube)  # type: ignore[arg-type]
    injector.send(KEY, plan(debugger, cache.items(), NOW).injections)
    assert plan(debugger, cache.items(), NOW).injections == ()  # in flight: not again
    for _ in range(3):
        await asyncio.sleep(0)
    assert sorted(
        c["metadata"]["annotations"]["debug.opsuite.dev/copy-of"] for c in kube.created
    ) == [
        "a",
        "b",
    ]
    assert all(c["spec"]["containers"][0]["env"] == [{"name": "X"}] for c in kube.created)
    assert [r.failure for r in results] == [None, None]
    assert plan(debugger, cache.items(), NOW).injections == ()

    refusing = CopyKube(full, ApiException(403, "Forbidden", json.dumps({"message": "no"})))
    cache, _injected, injector, results = _setup(refusing)  # type: ignore[arg-type]
    injector.send(KEY, plan(debugger, cache.items(), NOW).injections)
    for _ in range(3):
        await asyncio.sleep(0)
    assert sorted(r.failure.message for r in results if r.failure) == ["no", "no"]
    assert sorted(p["metadata"]["name"] for p in cache.items()) == ["a", "b"]
