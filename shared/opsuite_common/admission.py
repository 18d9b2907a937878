"""ValidatingAdmissionPolicies for custom resources, as operators ship them in their charts."""

from __future__ import annotations

from collections.abc import Sequence

import yaml

from opsuite_common.store import JSON


def match_constraints(group: str, plurals: Sequence[str], operations: Sequence[str]) -> JSON:
    """An admission policy's matchConstraints: ``operations`` on the resources ``plurals`` of
    ``group``, any version."""
    return {
        "resourceRules": [
            {
                "apiGroups": [group],
                "apiVersions": ["*"],
                "operations": list(operations),
                "resources": list(plurals),
            }
        ]
    }


def custom_resource_policy(
    name: str,
    group: str,
    plurals: Sequence[str],
    *,
    validations: Sequence[JSON],
    variables: Sequence[JSON] = (),
    param_kind: JSON | None = None,
    operations: Sequence[str] = ("CREATE", "UPDATE"),
    spec_changes_only: bool = True,
) -> JSON:
    """A policy checked on ``operations`` of the resources ``plurals`` of ``group`` (by default
    CREATE, and UPDATE when the spec changes).

    With ``spec_changes_only``, status updates and metadata-only changes pass unchecked;
    failures deny (failurePolicy Fail).
    """
    spec: JSON = {"failurePolicy": "Fail"}
    if param_kind is not None:
        spec["paramKind"] = param_kind
    spec["matchConstraints"] = match_constraints(group, plurals, operations)
    if spec_changes_only:
        spec["matchConditions"] = [
            {
                "name": "spec-set-or-changed",
                "expression": "request.operation == 'CREATE' || object.spec != oldObject.spec",
            }
        ]
    if variables:
        spec["variables"] = list(variables)
    spec["validations"] = list(validations)
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }


def policy_binding(name: str, *, param_ref: JSON | None = None) -> JSON:
    """The cluster-wide Deny binding of the policy ``name`` (same name)."""
    spec: JSON = {"policyName": name, "validationActions": ["Deny"]}
    if param_ref is not None:
        spec["paramRef"] = param_ref
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": spec,
    }


def manifest_file(header: str, documents: Sequence[JSON]) -> str:
    """A multi-document YAML file under a comment ``header``."""
    rendered = [yaml.safe_dump(d, sort_keys=False, width=100) for d in documents]
    return header + "---\n".join(rendered)
