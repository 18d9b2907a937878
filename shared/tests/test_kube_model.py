"""Tests for opsuite_common.kube_model."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ConfigDict, Field, ValidationError

from opsuite_common.kube_model import (
    Condition,
    KubeModel,
    LabelSelector,
    LabelSelectorRequirement,
    PodTemplateSpec,
    cel,
    list_map,
    validations,
)


class Sample(KubeModel):
    """A sample."""

    max_surge: int | str = 1
    """How many extra."""
    node_name: str | None = None
    model_config = ConfigDict(json_schema_extra=validations(cel("has(self.maxSurge)", "m")))


def test_to_kube_uses_camel_case_and_drops_none() -> None:
    assert Sample(max_surge="25%").to_kube() == {"maxSurge": "25%"}
    assert Sample(max_surge=2, node_name="n").to_kube() == {"maxSurge": 2, "nodeName": "n"}


def test_validates_by_name_and_alias_and_forbids_unknown_keys() -> None:
    assert Sample.model_validate({"maxSurge": 3}) == Sample(max_surge=3)
    assert Sample.model_validate({"max_surge": 3}) == Sample(max_surge=3)
    with pytest.raises(ValidationError):
        Sample.model_validate({"maxSurge": 3, "surprise": 1})


def test_importing_a_model_reads_no_docstrings() -> None:
    """Only the generators need them (opsuite_packaging.descriptions): an operator's start does
    not spend the time to parse every model's source."""
    assert Sample.model_fields["max_surge"].description is None
    assert Condition.model_fields["reason"].description is None


def test_model_level_cel_rules_land_in_the_schema() -> None:
    schema = Sample.model_json_schema(by_alias=True)
    assert schema["x-kubernetes-validations"] == [{"rule": "has(self.maxSurge)", "message": "m"}]


def test_cel_builds_entries() -> None:
    assert cel("self > 0", "positive") == {"rule": "self > 0", "message": "positive"}
    entry = cel("self > 0", "positive", field_path=".replicas", reason="FieldValueForbidden")
    assert entry == {
        "rule": "self > 0",
        "message": "positive",
        "fieldPath": ".replicas",
        "reason": "FieldValueForbidden",
    }
    assert validations(entry) == {"x-kubernetes-validations": [entry]}


@pytest.mark.parametrize(
    ("rule", "message", "kwargs"),
    [
        ("", "m", {}),
        ("self > 0", "", {}),
        ("self > 0", "two\nlines", {}),
        ("self > 0", "m", {"field_path": "replicas"}),
        ("self > 0", "m", {"field_path": ".a\n.b"}),
        ("self > 0", "m", {"reason": "Nope"}),
    ],
)
def test_cel_rejects_what_the_api_server_rejects(
    rule: str, message: str, kwargs: dict[str, str]
) -> None:
    with pytest.raises(ValueError, match="CEL"):
        cel(rule, message, **kwargs)  # type: ignore[arg-type]


def test_list_map() -> None:
    assert list_map("type") == {
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
    }


def test_field_level_validations() -> None:
    class Spec(KubeModel):
        replicas: int = Field(1, json_schema_extra=validations(cel("self < 10", "small")))

    prop = Spec.model_json_schema(by_alias=True)["properties"]["replicas"]
    assert prop["x-kubernetes-validations"] == [{"rule": "self < 10", "message": "small"}]


@pytest.mark.parametrize(
    "raw",
    [
        {"key": "a", "operator": "In"},
        {"key": "a", "operator": "NotIn", "values": []},
        {"key": "a", "operator": "Exists", "values": ["x"]},
        {"key": "a b", "operator": "Exists"},
        {"key": "a", "operator": "In", "values": ["x,y"]},
        {"key": "a", "operator": "Matches"},
    ],
)
def test_requirement_rejects_invalid(raw: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        LabelSelectorRequirement.model_validate(raw)


def test_selector_string_and_matches() -> None:
    selector = LabelSelector.model_validate(
        {
            "matchLabels": {"app": "x"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["b", "a", "b"]},
                {"key": "foo", "operator": "DoesNotExist"},
                {"key": "env", "operator": "NotIn", "values": ["prod"]},
                {"key": "example.com/team", "operator": "Exists"},
            ],
        }
    )
    assert selector.selector_string() == (
        "app=x,env notin (prod),example.com/team,!foo,tier in (a,b)"
    )
    labels = {"app": "x", "tier": "a", "example.com/team": "t"}
    assert selector.matches(labels)
    assert not selector.matches({**labels, "foo": ""})
    assert not selector.matches({**labels, "env": "prod"})
    assert not selector.matches({**labels, "tier": "c"})
    assert not selector.matches({"app": "x", "tier": "a"})


def test_empty_selector_matches_everything() -> None:
    assert LabelSelector().selector_string() == ""
    assert LabelSelector().matches({})
    assert LabelSelector(match_labels={}, match_expressions=[]).matches({"a": "b"})


def test_selector_serializes_upstream_shape() -> None:
    raw = {"matchExpressions": [{"key": "k", "operator": "Exists"}]}
    assert LabelSelector.model_validate(raw).to_kube() == raw
    schema = LabelSelector.model_json_schema(by_alias=True)
    assert schema["x-kubernetes-map-type"] == "atomic"


# --- selector string vs matches(): parse the rendered string independently and evaluate it ---

_KEYS = st.sampled_from(["app", "tier", "env", "example.com/team", "a.b-c_d"])
_VALUES = st.sampled_from(["", "x", "y", "prod", "v1.2-3_4"])


@st.composite
def _requirements(draw: st.DrawFn) -> LabelSelectorRequirement:
    operator = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]))
    values = (
        draw(st.lists(_VALUES, min_size=1, max_size=3)) if operator in ("In", "NotIn") else None
    )
    return LabelSelectorRequirement(key=draw(_KEYS), operator=operator, values=values)


_SELECTORS = st.builds(
    LabelSelector,
    match_labels=st.none() | st.dictionaries(_KEYS, _VALUES, max_size=3),
    match_expressions=st.none() | st.lists(_requirements(), max_size=4),
)
_LABELS = st.dictionaries(_KEYS, _VALUES, max_size=5)
_PART = re.compile(r"(!?)([^,!=() ]+)(?:( in | notin |=)(?:\(([^)]*)\)|([^,()]*)))?")


def _evaluate(selector: str, labels: dict[str, str]) -> bool:
    """Evaluate the ``kubectl -l`` grammar our renderer emits, independently of matches()."""
    position, result = 0, True
    while position < len(selector):
        part = _PART.match(selector, position)
        assert part is not None, selector[position:]
        bang, key, op, in_values, value = part.groups()
        present = key in labels
        if bang:
            ok = not present
        elif op is None:
            ok = present
        elif op == "=":
            ok = labels.get(key) == value
        else:
            values = set(in_values.split(","))
            ok = present and labels[key] in values
            ok = ok if op == " in " else not ok
        result = result and ok
        position = part.end()
        assert position == len(selector) or selector[position] == ","
        position += 1
    return result


@settings(max_examples=200, deadline=None)
@given(_SELECTORS, _LABELS)
def test_selector_string_agrees_with_matches(
    selector: LabelSelector, labels: dict[str, str]
) -> None:
    assert _evaluate(selector.selector_string(), labels) == selector.matches(labels)


@settings(max_examples=100, deadline=None)
@given(_SELECTORS)
def test_selector_round_trips_through_to_kube(selector: LabelSelector) -> None:
    assert LabelSelector.model_validate(selector.to_kube()) == selector


def test_condition_validation() -> None:
    good = {
        "type": "Ready",
        "status": "True",
        "lastTransitionTime": "2024-05-01T10:00:00Z",
        "reason": "AllGood",
        "message": "",
    }
    assert Condition.model_validate(good).to_kube() == good
    for bad in (
        {"status": "Maybe"},
        {"reason": "not valid"},
        {"reason": ""},
        {"reason": "Trailing,"},
        {"lastTransitionTime": "2024-05-01 10:00:00"},
        {"observedGeneration": -1},
        {"type": "has space"},
    ):
        with pytest.raises(ValidationError):
            Condition.model_validate({**good, **bad})


def test_pod_template_keeps_spec_opaque() -> None:
    raw = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c"}]}}
    assert PodTemplateSpec.model_validate(raw).to_kube() == raw
    with pytest.raises(ValidationError):
        PodTemplateSpec.model_validate({"metadata": {"name": "x"}, "spec": {}})
