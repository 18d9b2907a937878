"""Spec parsing and validation, fenceposts, slow start, template hash and pod rendering."""

import re
from typing import Any

import pytest

from podset_operator.models import NAME_LABEL
from podset_operator.pod_state import TEMPLATE_HASH_LABEL
from podset_operator.rollout import resolve_fenceposts
from podset_operator.scaling import SlowStart
from podset_operator.spec import InvalidSpecError, parse_spec, scaled_value
from podset_operator.template import SAFE_ALPHABET, owner_reference, render_pod, template_hash

TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"app": "web", "tier": "fe"}, "annotations": {"a": "1"}},
    "spec": {"containers": [{"name": "c", "image": "nginx"}]},
}
PODSET: dict[str, Any] = {
    "metadata": {"name": "web", "namespace": "ns", "uid": "u-1", "generation": 3},
    "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": TEMPLATE},
}


def podset_with(**overrides: Any) -> dict[str, Any]:
    """PODSET with spec fields replaced; None removes a field."""
    spec = {**PODSET["spec"], **overrides}
    return {**PODSET, "spec": {k: v for k, v in spec.items() if v is not None or k == "template"}}


def test_parse_spec_defaults() -> None:
    spec = parse_spec(podset_with(selector=None, replicas=None))
    assert (spec.name, spec.replicas, spec.min_ready_seconds) == ("web", 1, 0)
    assert spec.template.to_kube() == TEMPLATE
    assert (spec.rolling_update, spec.max_surge, spec.max_unavailable) == (True, "25%", "25%")
    assert spec.default_selector
    assert spec.selector.to_kube() == {"matchLabels": {NAME_LABEL: "web"}}
    assert spec.selector.selector_string() == f"{NAME_LABEL}=web"


def test_parse_spec_explicit_selector() -> None:
    spec = parse_spec(PODSET)
    assert not spec.default_selector
    assert spec.selector.selector_string() == "app=web"
    assert spec.replicas == 2
    expressions = {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["fe"]}]}
    assert parse_spec(podset_with(selector=expressions)).selector.matches({"tier": "fe"})


def test_parse_spec_update_strategy() -> None:
    raw = podset_with(
        minReadySeconds=5,
        updateStrategy={
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "50%"},
        },
    )
    spec = parse_spec(raw)
    assert (spec.min_ready_seconds, spec.max_surge, spec.max_unavailable) == (5, 0, "50%")
    on_delete = parse_spec(podset_with(updateStrategy={"type": "OnDelete"}))
    assert not on_delete.rolling_update
    half = parse_spec(podset_with(updateStrategy={"rollingUpdate": {"maxSurge": "50%"}}))
    assert (half.rolling_update, half.max_surge, half.max_unavailable) == (True, "50%", "25%")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"replicas": -1}, "spec.replicas: Input should be greater than or equal to 0"),
        ({"replicas": True}, "spec.replicas: Input should be a valid integer"),
        ({"minReadySeconds": "5"}, "spec.minReadySeconds: Input should be a valid integer"),
        ({"template": None}, "spec.template: Input should be a valid dictionary"),
        ({"template": {"metadata": {}}}, "spec.template.spec: Field required"),
        (
            {"template": {**TEMPLATE, "metadata": {"finalizers": ["x"]}}},
            "spec.template.metadata.finalizers: Extra inputs are not permitted",
        ),
        ({"strategy": {"type": "OnDelete"}}, "spec.strategy: Extra inputs are not permitted"),
        (
            {"updateStrategy": {"type": "Recreate"}},
            "spec.updateStrategy.type: Input should be 'RollingUpdate' or 'OnDelete'",
        ),
        (
            {"updateStrategy": {"rollingUpdate": {"maxSurge": 1.5}}},
            "spec.updateStrategy.rollingUpdate.maxSurge: Input should be a valid integer",
        ),
        (
            {"updateStrategy": {"rollingUpdate": {"maxSurge": "25"}}},
            "spec.updateStrategy.rollingUpdate.maxSurge: must be a non-negative integer or a "
            "percentage such as 25%",
        ),
        ({"updateStrategy": {"rollingUpdate": {"maxSurge": "-5%"}}}, "maxSurge: must be"),
        ({"updateStrategy": {"rollingUpdate": {"maxUnavailable": -1}}}, "maxUnavailable: must be"),
        ({"selector": {"matchLabels": {"app": "db"}}}, "spec.selector: selector does not match"),
        ({"selector": {}}, "spec.selector: an empty selector would match every pod"),
        ({"selector": {"matchLabels": {}}}, "spec.selector: an empty selector"),
        ({"selector": {"matchLabels": {"a": 1}}}, "spec.selector.matchLabels.a: Input should"),
        (
            {"selector": {"matchExpressions": [{"key": "a", "operator": "Near", "values": ["x"]}]}},
            "spec.selector.matchExpressions[0].operator: Input should be 'In', 'NotIn'",
        ),
        (
            {"selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}},
            "spec.selector.matchExpressions[0]: In and NotIn need values",
        ),
        (
            {"selector": {"matchExpressions": [{"operator": "Exists"}]}},
            "spec.selector.matchExpressions[0].key: Field required",
        ),
        (
            {"replicas": -1, "minReadySeconds": -1},
            "spec.replicas: Input should be greater than or equal to 0 (and 1 more)",
        ),
    ],
)
def test_parse_spec_rejects(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidSpecError, match=re.escape(message)):
        parse_spec(podset_with(**overrides))


def test_parse_spec_rejects_missing_spec_and_long_names_without_selector() -> None:
    with pytest.raises(InvalidSpecError, match="spec: Field required"):
        parse_spec({"metadata": {"name": "web"}})
    with pytest.raises(InvalidSpecError, match="spec: Input should be a valid dictionary"):
        parse_spec({"metadata": {"name": "web"}, "spec": "x"})
    long = podset_with(selector=None)
    long["metadata"] = {**long["metadata"], "name": "w" * 64}
    with pytest.raises(InvalidSpecError, match=r"metadata\.name: must be at most 63"):
        parse_spec(long)
    assert parse_spec({**PODSET, "metadata": long["metadata"]}).name == "w" * 64


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


def run_slow_start(count: int, fail_at: int | None = None, limit: int = 4) -> list[int]:
    """Creates issued per round when every in-flight create comes back each round."""
    window = SlowStart(count, limit=limit)
    rounds, done = [], 0
    while issue := window.allowed():
        window.issue(issue)
        rounds.append(issue)
        for _ in range(issue):
            window.complete(ok=done != fail_at)
            done += 1
    return rounds


@pytest.mark.parametrize(
    ("count", "rounds"),
    [(0, []), (1, [1]), (3, [1, 2]), (10, [1, 2, 4, 3]), (20, [1, 2, 4, 4, 4, 4, 1])],
)
def test_slow_start_doubles_per_round_trip_up_to_its_limit(count: int, rounds: list[int]) -> None:
    assert run_slow_start(count) == rounds


def test_slow_start_issues_nothing_after_a_failure() -> None:
    assert run_slow_start(20, fail_at=0) == [1]
    assert run_slow_start(20, fail_at=4) == [1, 2, 4]


def test_slow_start_refills_as_each_create_returns() -> None:
    window = SlowStart(10, limit=3)
    window.issue(window.allowed())
    window.complete(ok=True)
    assert window.allowed() == 2  # window 2, nothing in flight
    window.issue(2)
    window.complete(ok=True)
    assert window.allowed() == 2  # window 3, one still in flight


def test_template_hash_is_stable_and_safe() -> None:
    reordered = {"spec": TEMPLATE["spec"], "metadata": dict(reversed(TEMPLATE["metadata"].items()))}
    hash_ = template_hash(TEMPLATE)
    assert hash_ == template_hash(reordered)
    assert len(hash_) == 10
    assert set(hash_) <= set(SAFE_ALPHABET)
    changed = {**TEMPLATE, "spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}
    assert template_hash(changed) != hash_


def test_render_pod() -> None:
    spec = parse_spec(PODSET)
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


def test_render_pod_without_selector_adds_the_name_label() -> None:
    podset = podset_with(selector=None)
    pod = render_pod(podset, parse_spec(podset), "hhhhhhhhhh")
    assert pod["metadata"]["labels"] == {
        "app": "web",
        "tier": "fe",
        NAME_LABEL: "web",
        TEMPLATE_HASH_LABEL: "hhhhhhhhhh",
    }
    bare = podset_with(selector=None, template={"spec": TEMPLATE["spec"]})
    metadata = render_pod(bare, parse_spec(bare), "hhhhhhhhhh")["metadata"]
    assert metadata["labels"] == {NAME_LABEL: "web", TEMPLATE_HASH_LABEL: "hhhhhhhhhh"}
    assert "annotations" not in metadata
    assert "finalizers" not in metadata
