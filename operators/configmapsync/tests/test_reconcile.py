"""Planner examples: targets, conflicts, ownership, immutable replacement, status, cleanup."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest

from configmapsync_operator.copies import content_digest, render_copy, slim
from configmapsync_operator.models import (
    FINALIZER,
    LAST_APPLIED,
    OWNER_ANNOTATION,
    OWNER_LABEL,
    SOURCE_ANNOTATION,
)
from configmapsync_operator.reconcile import (
    CONFLICT,
    NAMESPACE_MISSING,
    NAMESPACE_NOT_WATCHED,
    SOURCE_NAMESPACE,
    Issue,
)
from configmapsync_operator.simulation import (
    NAME,
    OTHER_UID,
    T0,
    UID,
    World,
    configmap,
    namespace,
    sync_object,
)
from configmapsync_operator.spec import InvalidSpecError, parse_spec


def make_world(spec: dict[str, Any], *names: str, **kwargs: Any) -> World:
    world = World(sync_object({"configMapName": NAME, **spec}, **kwargs))
    for ns in ("src", *names):
        world.namespaces[ns] = namespace(ns)
    return world


def condition(world: World, type_: str) -> dict[str, Any]:
    return next(c for c in world.sync["status"]["conditions"] if c["type"] == type_)


def converge(world: World, rounds: int = 3) -> None:
    for _ in range(rounds):
        actions = world.plan()
        if actions.is_empty:
            return
        world.apply(actions)
    raise AssertionError(f"not converged: {world.plan()}")


def test_copies_data_binary_labels_and_annotations_without_bookkeeping() -> None:
    world = make_world({"destinationNamespaces": ["a", "b"]}, "a", "b")
    world.add(
        configmap(
            "src",
            data={"k": "v"},
            binary={"b": "AAE="},
            labels={"app": "x", OWNER_LABEL: "someone"},
            annotations={"note": "n", LAST_APPLIED: "{}", "sync.opsuite.dev/x": "y"},
        )
    )
    actions = world.plan()
    assert actions.add_finalizer is False
    assert [w.verb for w in actions.writes] == ["create", "create"]
    copy = actions.writes[0].manifest
    assert copy["data"] == {"k": "v"}
    assert copy["binaryData"] == {"b": "AAE="}
    assert copy["metadata"]["labels"] == {"app": "x", OWNER_LABEL: UID}
    assert copy["metadata"]["annotations"] == {
        "note": "n",
        OWNER_ANNOTATION: f"src/sync/{UID}",
        SOURCE_ANNOTATION: "src/cfg",
    }
    assert "immutable" not in copy
    world.apply(actions)
    assert world.sync["status"]["syncedNamespaces"] == 2
    assert condition(world, "Ready")["status"] == "True"
    assert world.plan().is_empty


def test_new_sync_gets_the_finalizer_with_its_first_writes() -> None:
    world = make_world({"destinationNamespaces": ["a"]}, "a", finalizer=False)
    world.add(configmap("src", data={"k": "v"}))
    actions = world.plan()
    assert actions.add_finalizer
    assert len(actions.writes) == 1


def test_drifted_copy_is_updated_with_its_resource_version() -> None:
    world = make_world({"destinationNamespaces": ["a"]}, "a")
    world.add(configmap("src", data={"k": "v"}))
    converge(world)
    world.configmaps[("a", NAME)]["data"] = {"k": "edited"}
    (write,) = world.plan().writes
    assert write.verb == "update"
    assert (
        write.manifest["metadata"]["resourceVersion"]
        == (world.configmaps[("a", NAME)]["metadata"]["resourceVersion"])
    )
    assert write.manifest["data"] == {"k": "v"}
    world.configmaps[("a", NAME)]["metadata"]["annotations"]["extra"] = "x"
    assert world.plan().writes[0].verb == "update"


def test_unmanaged_destination_skip_reports_conflict_and_overwrite_takes_over() -> None:
    world = make_world({"destinationNamespaces": ["a"]}, "a")
    world.add(configmap("src", data={"k": "v"}))
    theirs = world.add(configmap("a", data={"k": "theirs"}))
    actions = world.plan()
    assert not actions.writes
    assert [i.reason for i in actions.outcome.issues] == [CONFLICT]
    world.apply(actions)
    assert condition(world, "Ready")["reason"] == CONFLICT
    assert condition(world, "Degraded")["status"] == "True"
    assert world.sync["status"]["failedTargets"][0]["namespace"] == "a"

    world.sync["spec"]["conflictPolicy"] = "Overwrite"
    (write,) = world.plan().writes
    assert write.verb == "update"
    assert write.manifest["metadata"]["uid"] == theirs["metadata"]["uid"]
    converge(world)
    assert world.configmaps[("a", NAME)]["metadata"]["labels"][OWNER_LABEL] == UID


def test_copy_of_another_sync_is_never_taken_over() -> None:
    world = make_world({"destinationNamespaces": ["a"], "conflictPolicy": "Overwrite"}, "a")
    world.add(configmap("src", data={"k": "v"}))
    world.add(configmap("a", data={"k": "theirs"}, owner=OTHER_UID))
    actions = world.plan()
    assert not actions.writes
    assert actions.outcome.issues[0].reason == CONFLICT
    assert OTHER_UID in actions.outcome.issues[0].message


def test_a_source_of_another_sync_is_never_taken_over() -> None:
    world = make_world({"destinationNamespaces": ["a"], "conflictPolicy": "Overwrite"}, "a")
    world.add(configmap("src", data={"k": "v"}))
    world.add(configmap("a", data={"k": "theirs"}))
    world.sources_in_use = frozenset({("a", NAME)})
    actions = world.plan()
    assert not actions.writes
    assert "source of a ConfigMapSync" in actions.outcome.issues[0].message


def test_missing_namespace_is_reported_then_filled() -> None:
    world = make_world({"destinationNamespaces": ["a", "later"]}, "a")
    world.add(configmap("src", data={"k": "v"}))
    converge(world)
    assert world.sync["status"]["failedTargets"] == [
        {
            "namespace": "later",
            "reason": NAMESPACE_MISSING,
            "message": "the namespace does not exist; the copy is made when it appears",
        }
    ]
    assert condition(world, "Ready")["reason"] == NAMESPACE_MISSING
    assert condition(world, "Degraded")["status"] == "False"
    world.namespaces["later"] = namespace("later")
    assert [w.namespace for w in world.plan().writes] == ["later"]
    converge(world)
    assert condition(world, "Ready")["status"] == "True"
    assert world.sync["status"]["failedTargets"] == []


def test_selector_adds_and_removes_namespaces_but_never_the_source_namespace() -> None:
    world = make_world({"namespaceSelector": {"matchLabels": {"team": "x"}}})
    world.namespaces["src"] = namespace("src", {"team": "x"})
    world.namespaces["a"] = namespace("a", {"team": "x"})
    world.namespaces["b"] = namespace("b", {"team": "y"})
    world.add(configmap("src", data={"k": "v"}))
    converge(world)
    assert sorted(ns for ns, _ in world.configmaps) == ["a", "src"]
    world.namespaces["a"] = namespace("a", {"team": "y"})
    world.namespaces["b"] = namespace("b", {"team": "x"})
    actions = world.plan()
    assert [slim_key(r) for r in actions.deletes] == [("a", NAME)]
    assert [w.namespace for w in actions.writes] == ["b"]
    converge(world)
    assert sorted(ns for ns, _ in world.configmaps) == ["b", "src"]


def slim_key(record: Mapping[str, Any]) -> tuple[str, str]:
    return record["metadata"]["namespace"], record["metadata"]["name"]


def test_listed_source_namespace_is_reported_and_skipped() -> None:
    world = make_world({"destinationNamespaces": ["src", "a"]}, "a")
    world.add(configmap("src", data={"k": "v"}))
    actions = world.plan()
    assert [w.namespace for w in actions.writes] == ["a"]
    assert actions.outcome.issues == (
        Issue("src", SOURCE_NAMESPACE, "the source namespace is never a destination"),
    )


def test_source_deleted_keeps_copies_and_resumes() -> None:
    world = make_world({"destinationNamespaces": ["a"]}, "a")
    world.add(configmap("src", data={"k": "v"}))
    converge(world)
    del world.configmaps[("src", NAME)]
    actions = world.plan()
    assert not actions.writes
    assert not actions.deletes
    world.apply(actions)
    assert condition(world, "Ready")["reason"] == "SourceNotFound"
    assert world.sync["status"]["syncedNamespaces"] == 1
    world.add(configmap("src", data={"k": "back"}))
    (write,) = world.plan().writes
    assert write.verb == "update"
    assert write.manifest["data"] == {"k": "back"}
    converge(world)
    assert condition(world, "Ready")["status"] == "True"


def test_immutable_copy_is_replaced_when_the_data_changes() -> None:
    world = make_world({"destinationNamespaces": ["a"]}, "a")
    world.add(configmap("src", data={"k": "v1"}, immutable=True))
    converge(world)
    assert world.configmaps[("a", NAME)]["immutable"] is True
    world.add(configmap("src", data={"k": "v2"}, immutable=True))
    (write,) = world.plan().writes
    assert write.verb == "replace"
    converge(world)
    assert world.configmaps[("a", NAME)]["data"] == {"k": "v2"}
    # Only a label changed: an immutable ConfigMap's metadata can be updated in place.
    world.configmaps[("src", NAME)]["metadata"]["labels"]["new"] = "label"
    assert world.plan().writes[0].verb == "update"


def test_rename_deletes_old_copies_and_the_deleting_sync_cleans_up() -> None:
    world = make_world({"destinationNamespaces": ["a", "b"]}, "a", "b")
    world.add(configmap("src", data={"k": "v"}))
    world.add(configmap("src", "other", data={"k": "o"}))
    converge(world)
    world.sync["spec"]["configMapName"] = "other"
    actions = world.plan()
    assert sorted(slim_key(r) for r in actions.deletes) == [("a", NAME), ("b", NAME)]
    converge(world)
    world.sync["metadata"]["deletionTimestamp"] = "2025-01-01T12:00:00Z"
    actions = world.plan()
    assert sorted(slim_key(r) for r in actions.deletes) == [("a", "other"), ("b", "other")]
    assert actions.remove_finalizer
    assert not actions.writes
    world.apply(actions)
    assert FINALIZER not in world.sync["metadata"]["finalizers"]
    assert world.plan().is_empty


def test_a_copy_saved_under_another_name_is_never_deleted() -> None:
    """A user who saves a copy under another name (`kubectl get -o yaml`, new name, apply)
    keeps the ownership label and annotations: it is not a copy the sync wrote (its name is not
    its source's), so neither a pass nor the sync's deletion deletes it."""
    world = make_world({"destinationNamespaces": ["a"]}, "a")
    world.add(configmap("src", data={"k": "v"}))
    converge(world)
    saved = copy.deepcopy(world.configmaps[("a", NAME)])
    saved["metadata"].update(name="saved", uid="saved-uid", resourceVersion="9")
    world.add(saved)
    assert slim_key(saved) not in [slim_key(r) for r in world.plan().deletes]
    converge(world)
    world.sync["metadata"]["deletionTimestamp"] = "2025-01-01T12:00:00Z"
    actions = world.plan()
    assert [slim_key(r) for r in actions.deletes] == [("a", NAME)]
    world.apply(actions)
    assert ("a", "saved") in world.configmaps


def test_orphan_policy_unmarks_copies() -> None:
    world = make_world({"destinationNamespaces": ["a"], "deletionPolicy": "Orphan"}, "a")
    world.add(configmap("src", data={"k": "v"}))
    converge(world)
    world.sync["metadata"]["deletionTimestamp"] = "2025-01-01T12:00:00Z"
    actions = world.plan()
    assert not actions.deletes
    assert len(actions.unmarks) == 1
    world.apply(actions)
    assert OWNER_LABEL not in world.configmaps[("a", NAME)]["metadata"]["labels"]


def test_not_watched_namespaces() -> None:
    world = make_world({"destinationNamespaces": ["a", "b"]}, "a", "b")
    world.served = ("src", "a")
    world.add(configmap("src", data={"k": "v"}))
    actions = world.plan()
    assert [w.namespace for w in actions.writes] == ["a"]
    assert [i.reason for i in actions.outcome.issues] == [NAMESPACE_NOT_WATCHED]
    world.served = ("a",)
    actions = world.plan()
    assert not actions.writes
    assert actions.status_patch is not None
    assert actions.status_patch["conditions"][0]["reason"] == "SourceNotWatched"


def test_invalid_spec_is_reported() -> None:
    world = World(sync_object({"configMapName": NAME}))
    actions = world.plan()
    assert not actions.writes
    assert actions.status_patch is not None
    ready = actions.status_patch["conditions"][0]
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec")
    with pytest.raises(InvalidSpecError, match="conflictPolicy"):
        parse_spec({"spec": {"configMapName": NAME, "conflictPolicy": "Maybe"}})


def test_status_is_quiet_in_steady_state() -> None:
    world = make_world({"destinationNamespaces": ["a"]}, "a")
    world.add(configmap("src", data={"k": "v"}))
    converge(world)
    synced_at = world.sync["status"]["lastSyncTime"]
    later = T0.replace(hour=13)
    assert world.plan(later).is_empty
    world.configmaps[("a", NAME)]["data"] = {"k": "edited"}
    world.apply(world.plan(later))
    assert world.sync["status"]["lastSyncTime"] != synced_at


def test_slim_record_digests_match_the_rendered_copy() -> None:
    sync = sync_object({"configMapName": NAME, "destinationNamespaces": ["a"]})
    source = configmap("src", data={"k": "v"}, labels={"l": "1"})
    copy = render_copy(sync, source, "a")
    record = slim({**copy, "metadata": {**copy["metadata"], "uid": "x", "resourceVersion": "1"}})
    assert record["contentDigest"] == content_digest(copy)
    assert record["metadata"]["labels"] == {OWNER_LABEL: UID}
    assert "data" not in record
    assert "contentDigest" not in slim(source)
