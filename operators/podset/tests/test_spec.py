"""Spec parsing, selectors, fenceposts, slow start, template hash and pod rendering."""

from typing import Any

import pytest
from podset_operator.pod_state import TEMPLATE_HASH_LABEL
from podset_operator.rollout import resolve_fenceposts
from podset_operator.scaling import slow_start_batches
from podset_operator.selector import InvalidSpecError, parse_selector
from podset_operator.spec import PodSetSpec, parse_spec, scaled_value
from podset_operator.template import SAFE_ALPHABET, owner_reference, render_pod, template_hash

TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"app": "web", "tier": "fe"}, "annotations": {"a": "1"}},
    "spec": {"containers": [{"name": "c", "image": "nginx"}]},
}
PODSET: dict[str, Any] = {
    "metadata": {"name": "web", "namespace": "ns", "uid": "u-1", "generation": 3},
    "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": TEMPLATE},
}


def spec_with(**overrides: Any) -> dict[str, Any]:
    return {**PODSET["spec"], **overrides}


@pytest.mark.parametrize(
    ("expression", "labels", "expected"),
    [
        ({"key": "a", "operator": "In", "values": ["x", "y"]}, {"a": "y"}, True),
        ({"key": "a", "operator": "In", "values": ["x"]}, {}, False),
        ({"key": "a", "operator": "NotIn", "values": ["x"]}, {}, True),
        ({"key": "a", "operator": "NotIn", "values": ["x"]}, {"a": "x"}, False),
        ({"key": "a", "operator": "Exists"}, {"a": ""}, True),
        ({"key": "a", "operator": "Exists"}, {"b": "x"}, False),
        ({"key": "a", "operator": "DoesNotExist"}, {"b": "x"}, True),
        ({"key": "a", "operator": "DoesNotExist"}, {"a": "x"}, False),
    ],
)
def test_match_expressions(
    expression: dict[str, Any], labels: dict[str, str], expected: bool
) -> None:
    assert parse_selector({"matchExpressions": [expression]}).matches(labels) is expected


def test_match_labels_and_expressions_are_anded() -> None:
    selector = parse_selector(
        {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "x", "operator": "Exists"}]}
    )
    assert selector.matches({"app": "web", "x": "1", "extra": "y"})
    assert not selector.matches({"app": "web"})
    assert not selector.matches({"app": "db", "x": "1"})


@pytest.mark.parametrize(
    "raw",
    [
        None,
        {},
        {"matchLabels": {}},
        {"matchLabels": {"a": 1}},
        {"matchExpressions": [{"key": "a", "operator": "Near", "values": ["x"]}]},
        {"matchExpressions": [{"key": "a", "operator": "In"}]},
        {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
        {"matchExpressions": [{"operator": "Exists"}]},
    ],
)
def test_invalid_selectors(raw: object) -> None:
    with pytest.raises(InvalidSpecError):
        parse_selector(raw)


def test_parse_spec_defaults() -> None:
    spec = parse_spec({"selector": {"matchLabels": {"app": "web"}}, "template": TEMPLATE})
    assert spec == PodSetSpec(
        replicas=1, selector=spec.selector, template=TEMPLATE, min_ready_seconds=0
    )
    assert (spec.strategy, spec.max_surge, spec.max_unavailable) == ("RollingUpdate", "25%", "25%")


def test_parse_spec_strategy() -> None:
    raw = spec_with(
        minReadySeconds=5,
        strategy={
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "50%"},
        },
    )
    spec = parse_spec(raw)
    assert (spec.min_ready_seconds, spec.max_surge, spec.max_unavailable) == (5, 0, "50%")
    assert parse_spec(spec_with(strategy={"type": "OnDelete"})).strategy == "OnDelete"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"replicas": -1}, "replicas"),
        ({"replicas": True}, "replicas"),
        ({"minReadySeconds": "5"}, "minReadySeconds"),
        ({"template": None}, "template"),
        ({"selector": {"matchLabels": {"app": "db"}}}, "does not match"),
        ({"strategy": {"type": "Recreate"}}, "Recreate"),
        ({"strategy": {"rollingUpdate": {"maxSurge": "25"}}}, "percentage"),
        ({"strategy": {"rollingUpdate": {"maxSurge": "-5%"}}}, "percentage"),
        ({"strategy": {"rollingUpdate": {"maxUnavailable": -1}}}, "negative"),
    ],
)
def test_parse_spec_rejects(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidSpecError, match=message):
        parse_spec(spec_with(**overrides))


def test_scaled_value_rounding() -> None:
    assert scaled_value(3, 10, round_up=True) == 3
    assert scaled_value("25%", 10, round_up=True) == 3
    assert scaled_value("25%", 10, round_up=False) == 2
    assert scaled_value("100%", 7, round_up=False) == 7


@pytest.mark.parametrize(
    ("surge", "unavailable", "desired", "expected"),
    [
        ("25%", "25%", 10, (3, 2)),
        ("25%", "25%", 1, (1, 0)),
        ("0%", "1%", 2, (0, 1)),  # both resolve to zero -> unavailable 1
        ("1%", "25%", 2, (1, 0)),
        (0, 0, 5, (0, 1)),
        (2, "0%", 0, (2, 0)),
        ("50%", "50%", 0, (0, 1)),
    ],
)
def test_resolve_fenceposts(
    surge: int | str, unavailable: int | str, desired: int, expected: tuple[int, int]
) -> None:
    assert resolve_fenceposts(surge, unavailable, desired) == expected


@pytest.mark.parametrize(
    ("count", "batches"),
    [(0, []), (1, [1]), (2, [1, 1]), (3, [1, 2]), (10, [1, 2, 4, 3]), (15, [1, 2, 4, 8])],
)
def test_slow_start_batches(count: int, batches: list[int]) -> None:
    assert list(slow_start_batches(count)) == batches


def test_slow_start_batches_custom_initial() -> None:
    assert list(slow_start_batches(20, initial=3)) == [3, 6, 11]


def test_template_hash_is_stable_and_safe() -> None:
    reordered = {"spec": TEMPLATE["spec"], "metadata": dict(reversed(TEMPLATE["metadata"].items()))}
    hash_ = template_hash(TEMPLATE)
    assert hash_ == template_hash(reordered)
    assert len(hash_) == 10
    assert set(hash_) <= set(SAFE_ALPHABET)
    changed = {**TEMPLATE, "spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}
    assert template_hash(changed) != hash_


def test_render_pod() -> None:
    spec = parse_spec(PODSET["spec"])
    pod = render_pod(PODSET, spec, "hhhhhhhhhh")
    assert pod["metadata"] == {
        "generateName": "web-",
        "namespace": "ns",
        "labels": {"app": "web", "tier": "fe", TEMPLATE_HASH_LABEL: "hhhhhhhhhh"},
        "annotations": {"a": "1"},
        "ownerReferences": [owner_reference(PODSET)],
    }
    assert owner_reference(PODSET) == {
        "apiVersion": "apps.opsuite.dev/v1alpha1",
        "kind": "PodSet",
        "name": "web",
        "uid": "u-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert pod["spec"] == TEMPLATE["spec"]
    pod["spec"]["containers"].append({})
    assert len(TEMPLATE["spec"]["containers"]) == 1  # rendering copies the template
