"""Tests for opsuite_common.conditions."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opsuite_common.conditions import (
    MAX_MESSAGE_LENGTH,
    get_condition,
    is_true,
    remove_condition,
    set_condition,
    timestamp,
)
from opsuite_common.kube_model import Condition

T0 = datetime(2024, 5, 1, 10, 0, 0, 123456, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


def test_timestamp_is_rfc3339_utc_seconds() -> None:
    assert timestamp(T0) == "2024-05-01T10:00:00Z"
    assert timestamp(datetime(2024, 5, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))) == (
        "2024-05-01T10:00:00Z"
    )
    assert timestamp().endswith("Z")
    with pytest.raises(ValueError, match="timezone"):
        timestamp(datetime(2024, 5, 1))


def test_set_new_condition() -> None:
    conditions, changed = set_condition(None, "Ready", "True", "AllGood", "fine", 3, now=T0)
    assert changed
    assert conditions == [
        {
            "type": "Ready",
            "status": "True",
            "observedGeneration": 3,
            "lastTransitionTime": "2024-05-01T10:00:00Z",
            "reason": "AllGood",
            "message": "fine",
        }
    ]


def test_same_status_keeps_transition_time_but_updates_details() -> None:
    first, _ = set_condition([], "Ready", "False", "Waiting", "", 1, now=T0)
    second, changed = set_condition(first, "Ready", "False", "StillWaiting", "x", 2, now=T1)
    assert changed
    assert second[0]["lastTransitionTime"] == "2024-05-01T10:00:00Z"
    assert (second[0]["reason"], second[0]["message"], second[0]["observedGeneration"]) == (
        "StillWaiting",
        "x",
        2,
    )


def test_status_flip_moves_transition_time() -> None:
    first, _ = set_condition([], "Ready", "False", "Waiting", "", 1, now=T0)
    second, changed = set_condition(first, "Ready", "True", "AllGood", "", 1, now=T1)
    assert changed
    assert second[0]["lastTransitionTime"] == "2024-05-01T10:05:00Z"


def test_unchanged_returns_false_and_equal_list() -> None:
    first, _ = set_condition([], "Ready", "True", "AllGood", "", 1, now=T0)
    again, changed = set_condition(first, "Ready", "True", "AllGood", "", 1, now=T1)
    assert not changed
    assert again == first


def test_order_is_kept_and_duplicates_dropped() -> None:
    existing = [
        {"type": "A", "status": "True"},
        {"type": "Ready", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"},
        {"type": "B", "status": "True"},
        {"type": "Ready", "status": "False"},
    ]
    snapshot = copy.deepcopy(existing)
    result, changed = set_condition(existing, "Ready", "True", "Ok", "", 1, now=T0)
    assert changed
    assert existing == snapshot
    assert [c["type"] for c in result] == ["A", "Ready", "B"]
    assert result[1]["lastTransitionTime"] == "2020-01-01T00:00:00Z"


def test_message_is_truncated_to_the_api_limit() -> None:
    result, _ = set_condition([], "Ready", "False", "Crash", "x" * 40000, 1, now=T0)
    assert len(result[0]["message"]) == MAX_MESSAGE_LENGTH


@pytest.mark.parametrize(
    ("type_", "status", "reason", "generation"),
    [
        ("Ready", "Yes", "Ok", 1),
        ("Ready", "True", "not camel", 1),
        ("Ready", "True", "", 1),
        ("bad type", "True", "Ok", 1),
        ("Ready", "True", "Ok", -1),
    ],
)
def test_invalid_values_raise(type_: str, status: Any, reason: str, generation: int) -> None:
    with pytest.raises(ValueError, match="validation error"):
        set_condition([], type_, status, reason, "", generation, now=T0)


def test_get_is_true_and_remove() -> None:
    conditions, _ = set_condition([], "Ready", "True", "Ok", "", 1, now=T0)
    conditions, _ = set_condition(conditions, "Degraded", "False", "Ok", "", 1, now=T0)
    assert is_true(conditions, "Ready")
    assert not is_true(conditions, "Degraded")
    assert not is_true(conditions, "Missing")
    assert not is_true(None, "Ready")
    found = get_condition(conditions, "Degraded")
    assert found is not None
    assert found["status"] == "False"
    found["status"] = "True"
    assert not is_true(conditions, "Degraded")
    assert get_condition(conditions, "Missing") is None
    remaining, changed = remove_condition(conditions, "Ready")
    assert changed
    assert [c["type"] for c in remaining] == ["Degraded"]
    assert remove_condition(remaining, "Ready") == (remaining, False)
    assert remove_condition(None, "Ready") == ([], False)


_OPS = st.tuples(
    st.sampled_from(["Ready", "Available", "Progressing", "example.com/Degraded"]),
    st.sampled_from(["True", "False", "Unknown"]),
    st.sampled_from(["Ok", "Failed", "Scaling_Up", "Reason:Detail"]),
    st.text(max_size=20),
    st.integers(min_value=0, max_value=5),
    st.integers(min_value=0, max_value=10**6),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_OPS, max_size=12))
def test_set_condition_properties(ops: list[tuple[Any, ...]]) -> None:
    conditions: list[dict[str, Any]] = []
    for type_, status, reason, message, generation, seconds in ops:
        now = T0 + timedelta(seconds=seconds)
        before = get_condition(conditions, type_)
        snapshot = copy.deepcopy(conditions)
        result, changed = set_condition(
            conditions, type_, status, reason, message, generation, now=now
        )
        assert conditions == snapshot
        assert changed == (result != conditions)
        after = get_condition(result, type_)
        assert after is not None
        if before is not None and before["status"] == status:
            assert after["lastTransitionTime"] == before["lastTransitionTime"]
        else:
            assert after["lastTransitionTime"] == timestamp(now)
        again, changed_again = set_condition(
            result, type_, status, reason, message, generation, now=now + timedelta(hours=1)
        )
        assert (again, changed_again) == (result, False)
        types = [c["type"] for c in result]
        assert len(types) == len(set(types))
        for condition in result:
            Condition.model_validate(condition)
        conditions = result
