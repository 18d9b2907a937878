"""Executing plans against a fake API: order, preconditions, write-through, failures, sources."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from configmapsync_operator.actions import Execution, execute, release
from configmapsync_operator.copies import owner_uid, slim
from configmapsync_operator.models import FINALIZER
from configmapsync_operator.reconcile import Plan, plan
from configmapsync_operator.sources import SourceCache
from configmapsync_operator.status import Outcome
from opsuite_common.kube import ApiException
from opsuite_common.store import JSON, Store
from opsuite_testkit.configmapsync import (
    NAME,
    World,
    configmap,
    namespace,
    strategic_merge,
    sync_object,
)


class FakeKube:
    """Records requests; answers with the body (or the exception queued for a path+verb)."""

    def __init__(
        self,
        failures: Mapping[tuple[str, str], int] | None = None,
        stored: Mapping[tuple[str, str], JSON] | None = None,
    ) -> None:
        """``stored``: the ConfigMaps a PATCH applies to (else an empty one)."""
        self.calls: list[tuple[str, str, Any]] = []
        self.failures = dict(failures or {})
        self.patch_types: list[str] = []
        self.stored = dict(stored or {})

    def request(self, method: str, path: str, *, body: object = None, **_: Any) -> Any:
        self.calls.append((method, path, body))
        future: asyncio.Future[JSON] = asyncio.get_running_loop().create_future()
        status = self.failures.get((method, path))
        if status is not None:
            future.set_exception(ApiException(status=status, reason="Injected"))
        elif method == "PATCH" and "/configmaps/" in path and isinstance(body, dict):
            parts = path.split("/")  # /api/v1/namespaces/<ns>/configmaps/<name>
            empty = {"metadata": {"name": parts[6], "namespace": parts[4], "labels": {}}}
            answer = strategic_merge(self.stored.get((parts[4], parts[6]), empty), body)
            answer["metadata"]["resourceVersion"] = "999"
            future.set_result(answer)
        elif method == "PATCH" and path.endswith("/status") and isinstance(body, dict):
            future.set_result({"metadata": {"resourceVersion": "1000"}, **body})
        elif isinstance(body, dict) and body.get("kind") == "ConfigMap":
            answer = {**body, "metadata": {**body["metadata"], "resourceVersion": "999"}}
            answer["metadata"].setdefault("uid", "new-uid")
            future.set_result(answer)
        else:
            future.set_result({})
        return future

    def create(self, path: str, body: Mapping[str, Any]) -> Any:
        return self.request("POST", path, body=dict(body))

    def patch(self, path: str, patch: object, *, patch_type: str = "merge") -> Any:
        self.patch_types.append(patch_type)
        return self.request("PATCH", path, body=patch)

    def delete(self, path: str, **kwargs: Any) -> Any:
        return self.request("DELETE", path, body=kwargs)


def cache_of(world: World) -> Store:
    """The ConfigMap cache as the operator builds it: the store's transform slims."""
    cache = Store("configmaps", {"name": lambda r: [r["metadata"]["name"]]}, transform=slim)
    for obj in world.configmaps.values():
        cache.apply("ADDED", obj)
    return cache


def world_with(*dest: str, **spec: Any) -> World:
    world = World(sync_object({"configMapName": NAME, "destinationNamespaces": list(dest), **spec}))
    for ns in ("src", *dest):
        world.namespaces[ns] = namespace(ns)
    world.add(configmap("src", allowed="*", data={"k": "v"}))
    return world


async def run(world: World, kube: FakeKube, cache: Store) -> tuple[Plan, Execution]:
    occupants = {r["metadata"]["namespace"]: r for r in cache.by_index("name", NAME)}
    owned = [r for r in cache.items() if owner_uid(r) == world.sync["metadata"]["uid"]]
    actions = plan(
        world.sync,
        world.configmaps.get(world.source_key),
        list(world.namespaces.values()),
        occupants,
        owned,
        datetime.now(UTC),
    )
    return actions, await execute(kube, cache, world.sync, actions)  # type: ignore[arg-type]


async def test_strips_the_old_finalizer_creates_in_parallel_write_through_and_status() -> None:
    world = world_with("a", "b")
    world.sync["metadata"]["finalizers"] = ["example.com/theirs", FINALIZER]
    kube, cache = FakeKube(), cache_of(world)
    _, done = await run(world, kube, cache)
    verbs = [(m, p) for m, p, _ in kube.calls]
    assert verbs[0] == (
        "PATCH",
        "/apis/sync.opsuite.dev/v1alpha1/namespaces/src/configmapsyncs/sync",
    )
    assert kube.calls[0][2]["metadata"]["finalizers"] == ["example.com/theirs"]
    assert kube.calls[0][2]["metadata"]["resourceVersion"] == "1"
    assert ("POST", "/api/v1/namespaces/a/configmaps") in verbs
    assert ("POST", "/api/v1/namespaces/b/configmaps") in verbs
    assert verbs[-1][1].endswith("/configmapsyncs/sync/status")
    assert done.written == 2
    # The copies are in the cache at once: the next plan creates nothing.
    assert owner_uid(cache.get("a", NAME)) == world.sync["metadata"]["uid"]
    world.sync["metadata"]["finalizers"] = ["example.com/theirs"]
    world.sync["status"] = kube.calls[-1][2]["status"]
    again, _ = await run(world, FakeKube(), cache)
    assert again.is_empty


async def test_the_answer_to_the_status_write_is_handed_on() -> None:
    """The handlers keep it in the ConfigMapSync cache: a next pass before the watch's event of
    this write compares with the status the server holds (#19)."""
    world = world_with("a")
    kube, cache = FakeKube(), cache_of(world)
    answers: list[JSON] = []
    actions = plan(
        world.sync,
        world.configmaps.get(world.source_key),
        list(world.namespaces.values()),
        {},
        [],
        datetime.now(UTC),
    )
    await execute(kube, cache, world.sync, actions, on_status=answers.append)  # type: ignore[arg-type]
    [answer] = answers
    assert answer["status"] == kube.calls[-1][2]["status"]


async def test_conflicting_create_requeues_without_a_status_write() -> None:
    world = world_with("a")
    kube = FakeKube({("POST", "/api/v1/namespaces/a/configmaps"): 409})
    _, done = await run(world, kube, cache_of(world))
    assert done.requeue_after is not None
    assert not [c for c in kube.calls if c[1].endswith("/status")]


async def test_failed_write_is_reported_in_the_status() -> None:
    world = world_with("a", "b")
    kube = FakeKube({("POST", "/api/v1/namespaces/a/configmaps"): 422})
    _, done = await run(world, kube, cache_of(world))
    assert done.failed
    status = kube.calls[-1][2]["status"]
    assert status["failedTargets"][0]["namespace"] == "a"
    assert status["failedTargets"][0]["reason"] == "WriteFailed"
    assert status["syncedNamespaces"] == 1


async def test_replace_deletes_with_preconditions_then_creates() -> None:
    world = world_with("a")
    world.add(configmap("src", allowed="*", data={"k": "v2"}, immutable=True))
    old = world.add(
        configmap("a", data={"k": "v1"}, owner=world.sync["metadata"]["uid"], immutable=True)
    )
    kube = FakeKube()
    _, done = await run(world, kube, cache_of(world))
    method, path, options = kube.calls[0]
    assert (method, path) == ("DELETE", "/api/v1/namespaces/a/configmaps/cfg")
    assert options["preconditions"] == {
        "uid": old["metadata"]["uid"],
        "resourceVersion": old["metadata"]["resourceVersion"],
    }
    assert kube.calls[1][:2] == ("POST", "/api/v1/namespaces/a/configmaps")
    assert done.written == 1


async def test_an_own_copy_is_updated_by_a_strategic_patch_of_the_owned_keys() -> None:
    world = world_with("a")
    uid = world.sync["metadata"]["uid"]
    world.add(configmap("a", data={"k": "old"}, owner=uid, labels={"injected": "by-a-webhook"}))
    kube, cache = FakeKube(stored=world.configmaps), cache_of(world)
    _, done = await run(world, kube, cache)
    assert done.written == 1
    ((method, path, body), status) = kube.calls
    assert (method, path) == ("PATCH", "/api/v1/namespaces/a/configmaps/cfg")
    assert kube.patch_types[0] == "strategic"
    assert body["data"] == {"$patch": "replace", "k": "v"}
    assert "injected" not in body["metadata"].get("labels", {})
    # The answer is in the cache at once: a pass before the watch brings it writes nothing.
    world.sync["status"] = status[2]["status"]
    again, _ = await run(world, FakeKube(), cache)
    assert again.is_empty, again


async def test_cleanup_removes_the_old_finalizer_only_after_the_copies() -> None:
    world = world_with("a")
    world.sync["metadata"]["finalizers"] = [FINALIZER]
    world.add(configmap("a", data={"k": "v"}, owner=world.sync["metadata"]["uid"]))
    world.sync["metadata"]["deletionTimestamp"] = "2025-01-01T12:00:00Z"
    kube = FakeKube({("DELETE", "/api/v1/namespaces/a/configmaps/cfg"): 500})
    _, done = await run(world, kube, cache_of(world))
    assert done.failed
    assert [c[0] for c in kube.calls] == ["DELETE"]
    kube = FakeKube()
    await run(world, kube, cache_of(world))
    assert [c[0] for c in kube.calls] == ["DELETE", "PATCH"]
    assert kube.calls[1][2]["metadata"]["finalizers"] == []


def test_source_cache_prefers_the_watch_over_a_racing_get() -> None:
    sources = SourceCache()
    key = ("src", NAME)
    epoch = sources.epoch(key)
    newer = configmap("src", allowed="*", data={"k": "watch"})
    assert sources.observe("MODIFIED", newer)
    sources.fill(key, configmap("src", allowed="*", data={"k": "get"}), epoch)
    assert sources.get(key) == newer
    sources.forget(key)
    assert not sources.known(key)
    sources.fill(key, None, sources.epoch(key))
    assert sources.known(key)
    assert sources.get(key) is None
    assert not sources.observe("DELETED", newer)  # absent before and after: nothing changed
    managed = configmap("src", allowed="*", data={"k": "v"})
    managed["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    sources.observe("ADDED", managed)
    assert "managedFields" not in (sources.get(key) or {})["metadata"]


def test_source_cache_holds_at_most_its_bytes_and_forgets_the_least_recently_used() -> None:
    """#31, item 2: sources past the cap are forgotten (least recently used first) and read
    again when a pass needs them, so many large sources cannot exhaust the operator's memory."""
    sources = SourceCache(max_bytes=250_000)
    keys = [("src", f"s{i}") for i in range(4)]
    for i, key in enumerate(keys[:2]):
        big = configmap("src", key[1], allowed="*", data={"k": str(i) * 100_000})
        sources.observe("ADDED", big)
    assert sources.get(keys[0]) is not None  # s0 is now the most recently used
    sources.observe("ADDED", configmap("src", "s2", binary={"b": "A" * 100_000}))
    assert not sources.known(keys[1]), "the least recently used goes first"
    assert sources.get(keys[1]) is None
    assert sources.known(keys[0])
    assert sources.known(keys[2])
    assert sources.held_bytes() <= 250_000
    sources.fill(keys[1], configmap("src", "s1", data={"k": "y" * 100_000}), sources.epoch(keys[1]))
    assert sources.known(keys[1])
    assert not sources.known(keys[0])
    # One source larger than the cap is still held while it is the one in use.
    sources.observe("ADDED", configmap("src", "s3", data={"k": "z" * 400_000}))
    assert sources.get(keys[3]) is not None
    assert [k for k in keys if sources.known(k)] == [keys[3]]


class GatedKube(FakeKube):
    """Answers nothing until ``gate`` requests are in flight: sequential writes would hang."""

    def __init__(self, gate: int) -> None:
        super().__init__()
        self.gate = gate
        self.held: list[tuple[asyncio.Future[JSON], Any]] = []

    def request(self, method: str, path: str, *, body: object = None, **kwargs: Any) -> Any:
        answered = super().request(method, path, body=body, **kwargs)
        if method == "PATCH":  # finalizer and status: not part of the copy writes
            return answered
        future: asyncio.Future[JSON] = asyncio.get_running_loop().create_future()
        self.held.append((future, answered.result()))
        if len(self.held) >= self.gate:
            for waiting, result in self.held:
                waiting.set_result(result)
        return future


async def test_copies_are_written_in_parallel() -> None:
    targets = [f"ns{i}" for i in range(5)]
    world = world_with(*targets)
    kube = GatedKube(gate=len(targets))
    _, done = await asyncio.wait_for(run(world, kube, cache_of(world)), timeout=5)
    assert done.written == len(targets)


async def test_a_pass_logs_one_info_line_and_each_copy_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A pass writing many copies logs one line at info (how many it wrote and deleted); the
    line for each copy is at debug, off by default (#19: per-copy lines cost CPU per copy)."""
    world = world_with("a", "b", "c")
    with caplog.at_level(logging.INFO, logger="configmapsync_operator.actions"):
        _, done = await run(world, FakeKube(), cache_of(world))
    assert done.written == 3
    assert [r.getMessage() for r in caplog.records] == [
        "ConfigMapSync src/sync: wrote 3 copies, deleted 0"
    ]
    caplog.clear()
    world = world_with("a", "b")
    with caplog.at_level(logging.DEBUG, logger="configmapsync_operator.actions"):
        await run(world, FakeKube(), cache_of(world))
    assert sorted(r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG) == [
        "created copy a/cfg",
        "created copy b/cfg",
    ]


async def test_release_deletes_the_planned_deletes_and_unmarks_the_rest() -> None:
    """``release`` deletes ``plan.deletes`` and unmarks ``plan.unmarks`` (told apart by their
    place in the plan), and writes each outcome through to the cache."""
    world = world_with("a", "b")
    uid = world.sync["metadata"]["uid"]
    for ns in ("a", "b"):
        world.add(configmap(ns, data={"k": "v"}, owner=uid))
    cache = cache_of(world)
    copies = tuple(r for r in cache.items() if owner_uid(r) == uid)
    actions = Plan(Outcome(), deletes=copies[:1], unmarks=copies[1:])
    done = await release(FakeKube(), cache, actions)  # type: ignore[arg-type]
    assert done.deleted == 1
    assert cache.get("a", "cfg") is None
    released = cache.get("b", "cfg")
    assert released is not None
    assert owner_uid(released) is None
