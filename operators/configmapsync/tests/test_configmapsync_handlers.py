"""ConfigMapSync's watch wiring without a cluster: what a relisting that misses objects does.

kopf sends no DELETED event for an object deleted while a watch was down (a relist after
"410 Gone"); the manager prunes every cache given to ``manager.watch`` after each listing and
hands the pruned objects to the handler as DELETED events (issue #16, item 1).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from configmapsync_operator.handlers import setup
from configmapsync_operator.models import (
    ACCEPT_FROM_ANNOTATION,
    ALLOWED_NAMESPACES_ANNOTATION,
    GROUP,
    OWNER_ANNOTATION,
    OWNER_LABEL,
    PLURAL,
    SOURCE_ANNOTATION,
)
from opsuite_common.store import JSON, ObjectKey
from opsuite_testkit import WiredOperator, offline_manager

SERVED = ("src", "a", "b")
SYNC: ObjectKey = ("src", "s1")


@pytest.fixture
def wired(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> WiredOperator:
    manager = offline_manager("configmapsync-operator", SERVED, tmp_path, monkeypatch)
    setup(manager)
    wired = WiredOperator(manager, "configmapsync")
    sync = {
        "metadata": {"namespace": SYNC[0], "name": SYNC[1], "uid": "sync-uid", "generation": 1},
        "spec": {"configMapName": "cfg", "destinationNamespaces": ["a", "b"]},
    }
    wired.event(GROUP, PLURAL, None, sync)
    for ns in ("src", "a", "b"):
        wired.event("", "namespaces", None, _namespace(ns))
    wired.event("", "configmaps", None, _configmap("src", "cfg"))
    for ns in ("a", "b"):
        wired.event("", "configmaps", None, _configmap(ns, "cfg", owner="sync-uid"))
    wired.enqueued.clear()
    return wired


def _namespace(name: str) -> JSON:
    annotations = {ACCEPT_FROM_ANNOTATION: "*", "example.com/other": "x"}
    return {
        "metadata": {
            "name": name,
            "uid": f"ns-{name}",
            "managedFields": [{}],
            "annotations": annotations,
        }
    }


def _configmap(namespace: str, name: str, owner: str | None = None) -> JSON:
    meta: dict[str, Any] = {"namespace": namespace, "name": name, "uid": f"cm-{namespace}"}
    if owner is not None:
        meta["labels"] = {OWNER_LABEL: owner}
    return {"metadata": meta, "data": {"k": "v"}}


def test_a_copy_a_relisting_no_longer_holds_leaves_the_cache_and_enqueues_its_owner(
    wired: WiredOperator,
) -> None:
    assert wired.cached("configmaps", "a", "cfg") is not None
    wired.manager.activity.listed("configmaps", "a", set())  # deleted while the watch was down
    assert wired.cached("configmaps", "a", "cfg") is None
    assert SYNC in wired.enqueued
    # The listing of one namespace prunes nothing elsewhere.
    assert wired.cached("configmaps", "b", "cfg") is not None
    assert wired.cached("configmaps", "src", "cfg") is not None


def test_a_source_a_relisting_no_longer_holds_enqueues_its_readers(wired: WiredOperator) -> None:
    wired.manager.activity.listed("configmaps", "src", set())
    assert wired.cached("configmaps", "src", "cfg") is None
    assert SYNC in wired.enqueued


def test_a_namespace_a_relisting_no_longer_holds_leaves_the_cache_and_enqueues_its_syncs(
    wired: WiredOperator,
) -> None:
    assert wired.cached("namespaces", "", "b") == {
        "metadata": {"name": "b", "uid": "ns-b", "annotations": {ACCEPT_FROM_ANNOTATION: "*"}}
    }
    wired.manager.activity.listed("namespaces", None, {("", "src"), ("", "a")})
    assert wired.cached("namespaces", "", "b") is None
    assert wired.cached("namespaces", "", "a") is not None
    assert SYNC in wired.enqueued


def test_a_relisting_holding_everything_enqueues_nothing(wired: WiredOperator) -> None:
    wired.manager.activity.listed("namespaces", None, {("", "src"), ("", "a"), ("", "b")})
    wired.manager.activity.listed("configmaps", "a", {("a", "cfg")})
    assert wired.enqueued == []


def test_the_cached_copy_record_is_the_slim_one(wired: WiredOperator) -> None:
    """The store keeps the slim record (digests, no data), as the handler used to."""
    record = wired.cached("configmaps", "a", "cfg")
    assert record is not None
    assert "data" not in record
    assert record["metadata"]["labels"] == {OWNER_LABEL: "sync-uid"}
    assert "contentDigest" in record


def test_a_copy_of_a_gone_sync_enqueues_the_gone_key_and_a_deleted_sync_its_peers(
    wired: WiredOperator,
) -> None:
    """No finalizer: the copies of a ConfigMapSync that went while the operator was away reach
    the controller under their owner's key (its pass ends them), and a deletion seen by the
    watch re-runs the ConfigMapSyncs copying the same name (they may take a copy over)."""
    stale = _configmap("b", "old", owner="gone-uid")
    stale["metadata"]["annotations"] = {OWNER_ANNOTATION: "src/departed/gone-uid"}
    wired.event("", "configmaps", None, stale)
    assert ("src", "departed") in wired.enqueued
    unwatched = _configmap("b", "other", owner="gone-too")
    unwatched["metadata"]["annotations"] = {OWNER_ANNOTATION: "elsewhere/x/gone-too"}
    wired.enqueued.clear()
    wired.event("", "configmaps", None, unwatched)  # its owner's namespace is not served
    assert wired.enqueued == []
    peer = {
        "metadata": {"namespace": "a", "name": "s2", "uid": "peer-uid", "generation": 1},
        "spec": {"configMapName": "cfg", "destinationNamespaces": ["b"]},
    }
    wired.event(GROUP, PLURAL, None, peer)
    wired.enqueued.clear()
    sync = wired.cached(PLURAL, *SYNC)
    assert sync is not None
    wired.event(GROUP, PLURAL, "DELETED", sync)
    assert {SYNC, ("a", "s2")} <= set(wired.enqueued)


def test_the_echo_of_a_written_through_copy_enqueues_nothing_and_an_edit_its_owner(
    wired: WiredOperator,
) -> None:
    """The watch event of the operator's own write brings the version the cache already holds
    (the pass recorded the API server's answer): nothing changed, no pass follows (#19). Any
    other version of a copy (someone's edit) brings its owner back to repair it."""
    store = wired.manager.cache("configmaps")
    assert store is not None
    written = _configmap("a", "cfg", owner="sync-uid")
    written["metadata"]["resourceVersion"] = "7"
    store.apply("MODIFIED", written)  # the write-through of a pass
    wired.event("", "configmaps", "MODIFIED", written)
    assert wired.enqueued == []
    edited = {**written, "metadata": {**written["metadata"], "resourceVersion": "8"}}
    edited["data"] = {"k": "edited"}
    wired.event("", "configmaps", "MODIFIED", edited)
    assert wired.enqueued == [SYNC]
    wired.enqueued.clear()
    wired.event("", "configmaps", "DELETED", edited)  # deleted by someone: repaired
    assert SYNC in wired.enqueued


def test_the_echo_of_a_written_through_copy_keeps_the_record_made_from_the_answer(
    wired: WiredOperator,
) -> None:
    """The echo of the operator's own write is not slimmed again: the record the write-through
    made from the API server's answer stays, the same object (#19). Another version, or the
    same name re-created (another uid), replaces it."""
    store = wired.manager.cache("configmaps")
    assert store is not None
    written = _configmap("a", "cfg", owner="sync-uid")
    written["metadata"]["resourceVersion"] = "7"
    store.apply("MODIFIED", written)
    record = store.get("a", "cfg")
    wired.event("", "configmaps", "MODIFIED", {**written, "data": {"k": "v"}})
    assert store.get("a", "cfg") is record
    recreated = {**written, "metadata": {**written["metadata"], "uid": "other"}}
    wired.event("", "configmaps", "MODIFIED", recreated)
    replaced = store.get("a", "cfg")
    assert replaced is not record
    assert replaced is not None
    assert replaced["metadata"]["uid"] == "other"
    newer = {**written, "metadata": {**written["metadata"], "resourceVersion": "8"}}
    wired.event("", "configmaps", "MODIFIED", newer)
    assert store.get("a", "cfg") is not replaced
    wired.event("", "configmaps", "DELETED", newer)
    assert store.get("a", "cfg") is None


class _RecordingKube:
    """Answers every request at once: GETs and LISTs find nothing, writes succeed; records
    them."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def _answer(self, method: str, path: str, answer: JSON) -> asyncio.Future[JSON]:
        self.sent.append((method, path))
        future: asyncio.Future[JSON] = asyncio.get_running_loop().create_future()
        future.set_result(answer)
        return future

    def request(self, method: str, path: str, **_: object) -> asyncio.Future[JSON]:
        return self._answer(method, path, {"items": []})

    def delete(self, path: str, **_: object) -> asyncio.Future[JSON]:
        return self._answer("DELETE", path, {})

    async def get(self, path: str) -> JSON | None:
        self.sent.append(("GET", path))
        return None  # not found

    def create(self, path: str, body: JSON) -> asyncio.Future[JSON]:
        created = {**body, "metadata": {**body["metadata"], "uid": "new", "resourceVersion": "9"}}
        return self._answer("POST", path, created)

    def patch(self, path: str, patch: object, **_: object) -> asyncio.Future[JSON]:
        return self._answer("PATCH", path, {})


def _copy(namespace: str, owner: ObjectKey, uid: str) -> JSON:
    copy = _configmap(namespace, "cfg", owner=uid)
    copy["metadata"]["resourceVersion"] = "5"
    copy["metadata"]["annotations"] = {
        OWNER_ANNOTATION: f"{owner[0]}/{owner[1]}/{uid}",
        SOURCE_ANNOTATION: "src/cfg",
    }
    return copy


async def test_a_sync_the_watch_saw_deleted_loses_its_copies_without_a_live_list(
    wired: WiredOperator,
) -> None:
    """A DELETED event is the API server's word that a uid is gone for good: its copies are
    deleted with no LIST first (#19). Copies whose owner is only missing from the cache (gone
    while the operator was away) are deleted once a LIST confirms that no sync has that uid."""
    kube = _RecordingKube()
    wired.manager.kube = kube  # type: ignore[assignment]
    for ns in ("a", "b"):
        wired.event("", "configmaps", "MODIFIED", _copy(ns, SYNC, "sync-uid"))
    sync = wired.cached(PLURAL, *SYNC)
    assert sync is not None
    wired.event(GROUP, PLURAL, "DELETED", sync)
    controller = wired.controller
    await controller._reconcile(SYNC)
    assert sorted(kube.sent) == [
        ("DELETE", "/api/v1/namespaces/a/configmaps/cfg"),
        ("DELETE", "/api/v1/namespaces/b/configmaps/cfg"),
    ]
    kube.sent.clear()
    away = ("src", "away")
    wired.event("", "configmaps", None, _copy("a", away, "away-uid"))
    await controller._reconcile(away)
    assert [method for method, _ in kube.sent] == ["GET", "DELETE"]


async def test_a_configmap_no_configmapsync_reads_is_held_slim_whatever_it_allows(
    wired: WiredOperator,
) -> None:
    """#31, item 2: a tenant's many large ConfigMaps allowing copies cost the operator only
    their slim records, consent annotation or not; the first ConfigMapSync naming one reads it
    once, and from then on the watch keeps it whole."""
    kube = _RecordingKube()
    wired.manager.kube = kube  # type: ignore[assignment]
    controller = wired.controller
    big = {"blob": "x" * 100_000}
    for name, allowed in (("shared", {ALLOWED_NAMESPACES_ANNOTATION: "*"}), ("private", {})):
        source = _configmap("src", name)
        source["metadata"]["annotations"] = allowed
        source["data"] = big
        wired.event("", "configmaps", "ADDED", source)
    sync = {
        "metadata": {"namespace": "src", "name": "s-shared", "uid": "u-shared"},
        "spec": {"configMapName": "shared", "destinationNamespaces": ["a"]},
    }
    wired.event(GROUP, PLURAL, "ADDED", sync)
    await controller._reconcile(("src", "s-shared"))
    reads = [path for method, path in kube.sent if method == "GET"]
    assert reads == ["/api/v1/namespaces/src/configmaps/shared"]
