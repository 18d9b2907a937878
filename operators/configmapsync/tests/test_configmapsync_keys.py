"""Which keys of data and binaryData the copies carry: includeKeys or excludeKeys (#34, item
3)."""

from __future__ import annotations

from typing import Any

import pytest

from configmapsync_operator.keys import KeyFilter
from configmapsync_operator.spec import InvalidSpecError, parse_spec
from opsuite_testkit.configmapsync import (
    NAME,
    World,
    condition,
    configmap,
    converge,
    make_world,
)


def holders(world: World) -> list[str]:
    return sorted(ns for ns, name in world.configmaps if name == NAME and ns != "src")


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


def test_missing_names_only_literal_includes() -> None:
    keys = KeyFilter(include=("a", "b*", "c"))
    assert keys.missing([{"a": "1"}, {"bee": "2"}]) == ("c",)
    assert KeyFilter(exclude=("c",)).missing([{}]) == ()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"includeKeys": ["a"], "excludeKeys": ["b"]}, "includeKeys or excludeKeys"),
        ({"includeKeys": []}, "includeKeys"),
        ({"excludeKeys": ["no/slash"]}, "excludeKeys"),
    ],
)
def test_contradictory_or_malformed_key_lists_are_an_invalid_spec(
    spec: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidSpecError, match=message):
        parse_spec({"spec": {"configMapName": NAME, "destinationNamespaces": ["a"], **spec}})
