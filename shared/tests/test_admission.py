"""Admission policy builders: optional parts appear only when asked for."""

from __future__ import annotations

import yaml

from opsuite_common.admission import custom_resource_policy, manifest_file, policy_binding

RULE = {"expression": "true", "message": "never", "reason": "Forbidden"}


def test_policy_matches_spec_changes_of_one_resource() -> None:
    policy = custom_resource_policy("p", "x.opsuite.dev", ("things",), validations=[RULE])
    spec = policy["spec"]
    assert list(spec) == ["failurePolicy", "matchConstraints", "matchConditions", "validations"]
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert (rule["apiGroups"], rule["resources"]) == (["x.opsuite.dev"], ["things"])
    assert "oldObject.spec" in spec["matchConditions"][0]["expression"]


def test_params_and_variables_only_when_given() -> None:
    policy = custom_resource_policy(
        "p",
        "x.opsuite.dev",
        ("things",),
        validations=[RULE],
        variables=[{"name": "v", "expression": "1"}],
        param_kind={"apiVersion": "v1", "kind": "ConfigMap"},
    )
    assert list(policy["spec"])[:2] == ["failurePolicy", "paramKind"]
    assert policy["spec"]["variables"] == [{"name": "v", "expression": "1"}]
    assert "paramRef" not in policy_binding("p")["spec"]
    ref = {"name": "c", "namespace": "n", "parameterNotFoundAction": "Deny"}
    assert policy_binding("p", param_ref=ref)["spec"]["paramRef"] == ref


def test_manifest_file_keeps_header_and_documents() -> None:
    text = manifest_file("# header\n", [policy_binding("a"), policy_binding("b")])
    assert text.startswith("# header\n")
    names = [d["metadata"]["name"] for d in yaml.safe_load_all(text)]
    assert names == ["a", "b"]
