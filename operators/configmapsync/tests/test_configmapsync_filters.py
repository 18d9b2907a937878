"""Planner examples for the destination exclusions and the key filter (#34, items 2 and 3)."""

from __future__ import annotations

from typing import Any

import pytest

from configmapsync_operator.destinations import wants
from configmapsync_operator.spec import InvalidSpecError, parse_spec
from opsuite_testkit.configmapsync import NAME, UID, World, configmap, namespace, sync_object


def make_world(spec: dict[str, Any], *names: str, own_namespace: str | None = None) -> World:
    world = World(sync_object({"configMapName": NAME, **spec}), own_namespace=own_namespace)
    for ns in ("src", *names):
        world.namespaces[ns] = namespace(ns)
    return world


def converge(world: World) -> None:
    for _ in range(3):
        actions = world.plan()
        if actions.is_empty:
            return
        world.apply(actions)
    raise AssertionError(f"not converged: {world.plan()}")


def holders(world: World) -> list[str]:
    return sorted(ns for ns, name in world.configmaps if name == NAME and ns != "src")


def condition(world: World, type_: str) -> dict[str, Any]:
    return next(c for c in world.sync["status"]["conditions"] if c["type"] == type_)


def test_exclusions_by_name_and_pattern_narrow_the_selector_and_the_list() -> None:
    world = make_world(
        {
            "namespaceSelector": {},
            "destinationNamespaces": ["listed", "team-listed"],
            "excludeNamespaces": ["skip", "team-*"],
        },
        "a",
        "skip",
        "team-a",
        "team-b",
        "listed",
        "team-listed",
    )
    world.add(configmap("src", allowed="*", data={"k": "v"}))
    converge(world)
    assert holders(world) == ["a", "listed"]
    assert world.sync["status"]["targetNamespaces"] == 2
    assert condition(world, "Ready")["status"] == "True"


def test_a_namespace_that_becomes_excluded_loses_only_the_own_copy() -> None:
    world = make_world({"namespaceSelector": {}}, "a", "b")
    world.add(configmap("src", allowed="*", data={"k": "v"}))
    converge(world)
    assert holders(world) == ["a", "b"]
    other = world.add(configmap("b", "unrelated", data={"x": "y"}))
    world.sync["spec"]["excludeNamespaces"] = ["b"]
    actions = world.plan()
    assert [r["metadata"]["namespace"] for r in actions.deletes] == ["b"]
    assert all(
        r["metadata"]["labels"]["sync.opsuite.dev/owner-uid"] == UID for r in actions.deletes
    )
    assert not actions.writes
    converge(world)
    assert holders(world) == ["a"]
    assert world.configmaps[("b", "unrelated")] == other


def test_an_unowned_configmap_in_an_excluded_namespace_is_never_touched() -> None:
    world = make_world(
        {"namespaceSelector": {}, "excludeNamespaces": ["b*"], "conflictPolicy": "Overwrite"},
        "a",
        "b1",
    )
    world.add(configmap("src", allowed="*", data={"k": "v"}))
    theirs = world.add(configmap("b1", data={"k": "theirs"}))
    actions = world.plan()
    assert [w.namespace for w in actions.writes] == ["a"]
    assert not actions.deletes
    converge(world)
    assert world.configmaps[("b1", NAME)] == theirs


@pytest.mark.parametrize("name", ["kube-system", "kube-public", "kube-node-lease", "operators"])
def test_a_match_all_selector_never_selects_protected_namespaces(name: str) -> None:
    world = make_world({"namespaceSelector": {}}, "a", name, own_namespace="operators")
    world.add(configmap("src", allowed="*", data={"k": "v"}))
    world.namespaces[name] = namespace(name, accept="src")
    converge(world)
    assert holders(world) == ["a"]
    assert not wants(world.sync, world.namespaces[name], "operators")
    world.sync["spec"]["destinationNamespaces"] = [name]
    converge(world)
    assert holders(world) == sorted(["a", name])
    assert wants(world.sync, world.namespaces[name], "operators")


def test_wants_honours_exclusions() -> None:
    sync = sync_object(
        {"configMapName": NAME, "namespaceSelector": {}, "excludeNamespaces": ["team-*"]}
    )
    assert wants(sync, namespace("a"))
    assert not wants(sync, namespace("team-a"))


def test_include_keys_copy_only_those_of_data_and_binary_data() -> None:
    world = make_world({"destinationNamespaces": ["a"], "includeKeys": ["k", "b*"]}, "a")
    world.add(
        configmap(
            "src",
            allowed="*",
            data={"k": "1", "x": "2", "bee": "3"},
            binary={"bin": "AA==", "z": "AQ=="},
        )
    )
    (write,) = world.plan().writes
    assert write.manifest["data"] == {"k": "1", "bee": "3"}
    assert write.manifest["binaryData"] == {"bin": "AA=="}
    converge(world)
    assert world.plan().is_empty


def test_exclude_keys_drop_those_keys_and_an_emptied_field_is_left_out() -> None:
    world = make_world({"destinationNamespaces": ["a"], "excludeKeys": ["secret*", "b"]}, "a")
    world.add(
        configmap("src", allowed="*", data={"k": "1", "secret.txt": "2"}, binary={"b": "AA=="})
    )
    (write,) = world.plan().writes
    assert write.manifest["data"] == {"k": "1"}
    assert "binaryData" not in write.manifest


def test_changing_the_key_lists_updates_the_copies_then_is_quiet() -> None:
    world = make_world({"destinationNamespaces": ["a"]}, "a")
    world.add(configmap("src", allowed="*", data={"k": "1", "x": "2"}, binary={"b": "AA=="}))
    converge(world)
    world.sync["spec"]["includeKeys"] = ["k"]
    (write,) = world.plan().writes
    assert write.verb == "update"
    assert write.patch is not None
    assert write.patch["data"] == {"$patch": "replace", "k": "1"}
    assert write.patch["binaryData"] == {"$patch": "replace"}
    converge(world)
    copy = world.configmaps[("a", NAME)]
    assert copy["data"] == {"k": "1"}
    assert "binaryData" not in copy
    assert world.plan().is_empty
    del world.sync["spec"]["includeKeys"]
    world.sync["spec"]["excludeKeys"] = ["k"]
    converge(world)
    copy = world.configmaps[("a", NAME)]
    assert (copy["data"], copy["binaryData"]) == ({"x": "2"}, {"b": "AA=="})
    assert world.plan().is_empty


def test_keys_the_source_lacks_are_reported_and_the_others_copied() -> None:
    world = make_world({"destinationNamespaces": ["a"], "includeKeys": ["k", "gone", "g*"]}, "a")
    world.add(configmap("src", allowed="*", data={"k": "1"}))
    converge(world)
    assert world.configmaps[("a", NAME)]["data"] == {"k": "1"}
    assert world.sync["status"]["syncedNamespaces"] == 1
    degraded = condition(world, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "KeysMissing")
    assert "gone" in degraded["message"]
    assert "g*" not in degraded["message"]
    assert condition(world, "Ready")["status"] == "True"
    assert world.plan().is_empty
    world.configmaps[("src", NAME)]["data"]["gone"] = "back"
    converge(world)
    assert world.configmaps[("a", NAME)]["data"] == {"k": "1", "gone": "back"}
    assert condition(world, "Degraded")["status"] == "False"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"includeKeys": ["a"], "excludeKeys": ["b"]}, "includeKeys or excludeKeys"),
        ({"excludeNamespaces": ["a"]}, "both listed"),
        ({"includeKeys": []}, "includeKeys"),
        ({"excludeNamespaces": ["Bad_Name"]}, "excludeNamespaces"),
        ({"excludeKeys": ["no/slash"]}, "excludeKeys"),
    ],
)
def test_contradictory_or_malformed_filters_are_an_invalid_spec(
    spec: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidSpecError, match=message):
        parse_spec({"spec": {"configMapName": NAME, "destinationNamespaces": ["a"], **spec}})
