"""Where copies go beyond consent: excludeNamespaces, and protected namespaces that a selector
never selects (#34, item 2)."""

from __future__ import annotations

import pytest

from configmapsync_operator.destinations import wants
from configmapsync_operator.spec import InvalidSpecError, parse_spec
from opsuite_testkit.configmapsync import (
    NAME,
    UID,
    World,
    condition,
    configmap,
    converge,
    make_world,
    namespace,
    sync_object,
)


def holders(world: World) -> list[str]:
    return sorted(ns for ns, name in world.configmaps if name == NAME and ns != "src")


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


@pytest.mark.parametrize(
    ("excluded", "message"),
    [(["a"], "both listed"), (["Bad_Name"], "excludeNamespaces"), (["a(b)"], "excludeNamespaces")],
)
def test_contradictory_or_malformed_exclusions_are_an_invalid_spec(
    excluded: list[str], message: str
) -> None:
    spec = {"configMapName": NAME, "destinationNamespaces": ["a"], "excludeNamespaces": excluded}
    with pytest.raises(InvalidSpecError, match=message):
        parse_spec({"spec": spec})
