"""The property-test support: generated values fit their schema; bad values are caught."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from configmapsync_operator.models import ConfigMapSyncSpec
from opsuite_packaging.crd import structural_schema
from opsuite_testkit import from_schema, is_qualified_name, label_errors, schema_errors
from poddebugger_operator.models import PodDebuggerSpec, PodDebuggerStatus
from podset_operator.models import PodSetSpec

SCHEMAS = [structural_schema(m) for m in (PodSetSpec, ConfigMapSyncSpec, PodDebuggerSpec)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), index=st.integers(0, len(SCHEMAS) - 1))
def test_generated_specs_fit_their_schema(data: st.DataObject, index: int) -> None:
    value = data.draw(from_schema(SCHEMAS[index]))
    assert schema_errors(value, SCHEMAS[index]) == []


STATUS = structural_schema(PodDebuggerStatus)
CONDITION = {
    "type": "Ready",
    "status": "True",
    "lastTransitionTime": "2026-01-01T00:00:00Z",
    "reason": "Done",
    "message": "",
}


@pytest.mark.parametrize(
    ("status", "error"),
    [
        ({"matchedPods": -1}, ".matchedPods: -1 out of bounds"),
        ({"matchedPods": "1"}, ".matchedPods: '1' is not of type integer"),
        ({"conditions": [CONDITION, CONDITION]}, ".conditions: duplicate list-map keys"),
        ({"conditions": [{**CONDITION, "reason": "not a reason"}]}, "does not match"),
        ({"conditions": [{**CONDITION, "status": "Yes"}]}, "not in"),
        ({"conditions": [{"type": "Ready"}]}, ".conditions[0].status: required"),
        ({"failedPods": [{}] * 21}, ".failedPods: 21 items out of bounds"),
        ({"debugged": 1}, ".debugged: unknown field (pruned)"),
    ],
)
def test_schema_errors_name_what_the_api_server_refuses(status: dict[str, Any], error: str) -> None:
    assert any(error in e for e in schema_errors(status, STATUS)), schema_errors(status, STATUS)


def test_label_checks() -> None:
    assert is_qualified_name("apps.opsuite.dev/podset")
    assert not is_qualified_name("a" * 64)
    assert not is_qualified_name("Bad_Prefix/name")
    assert label_errors({"app": "web", "tier": "x" * 63}) == []
    assert label_errors({"app": "-web"}) == ["label 'app'='-web'"]
