"""The requester policies a chart ships for a custom resource: a MutatingAdmissionPolicy recording
who asked for each object (:mod:`opsuite_common.requester` reads the record) where the API
server serves them, else a ValidatingAdmissionPolicy admitting only a truthful record."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from opsuite_common.admission import custom_resource_policy, match_constraints, policy_binding
from opsuite_common.requester import requested_by, requested_by_groups
from opsuite_common.store import JSON
from opsuite_packaging.chart import policy_template

MUTATING_POLICY_API = "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"
RECORDS_REQUESTER = (
    f'and .Values.admissionPolicy.enabled (.Capabilities.APIVersions.Has "{MUTATING_POLICY_API}")'
)
"""When a chart renders its requester policy: with its admission policy, where the API server
serves MutatingAdmissionPolicies (Kubernetes 1.36 and later)."""
CHECKS_REQUESTER = (
    "and .Values.admissionPolicy.enabled "
    f'(not (.Capabilities.APIVersions.Has "{MUTATING_POLICY_API}"))'
)
"""When a chart renders its requester check instead: with its admission policy, where the API
server serves no MutatingAdmissionPolicies (before 1.36)."""
_STAMP = {
    "name": "stamp",
    "expression": "request.operation == 'CREATE' || object.spec != oldObject.spec",
}
"""Whether the request records a (new) requester: a create, or a change of the spec."""
_GROUPS = "has(request.userInfo.groups) ? request.userInfo.groups.join('\\n') : ''"
"""The requesting user's groups, one per line."""


def requester_policy(name: str, group: str, plurals: Sequence[str]) -> list[JSON]:
    """The MutatingAdmissionPolicy ``name`` recording the requester of objects of the
    resources ``plurals`` of ``group`` (:mod:`opsuite_common.requester`), and its binding.

    On CREATE, and on UPDATE when the spec changes, the annotations take the requesting user's
    name and groups; any other UPDATE gets them back as they were, so nobody rewrites the
    record without taking the object over by changing its spec.
    """
    user_key, groups_key = requested_by(group), requested_by_groups(group)
    kept = functools.partial(_annotation, "oldObject")
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
            "matchConstraints": match_constraints(group, plurals, ("CREATE", "UPDATE")),
            "variables": [
                _STAMP,
                {
                    "name": "user",
                    "expression": "variables.stamp ? request.userInfo.username : "
                    f"({kept(user_key)})",
                },
                {
                    "name": "groups",
                    "expression": f"variables.stamp ? ({_GROUPS}) : ({kept(groups_key)})",
                },
            ],
            "mutations": [
                {
                    "patchType": "ApplyConfiguration",
                    "applyConfiguration": {
                        "expression": "Object{metadata: Object.metadata{annotations: {"
                        f"'{user_key}': variables.user, '{groups_key}': variables.groups}}}}}}"
                    },
                }
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name},
    }
    return [policy, binding]


def requester_check(name: str, group: str, plurals: Sequence[str]) -> list[JSON]:
    """The ValidatingAdmissionPolicy ``name`` admitting only a truthful requester record of
    objects of the resources ``plurals`` of ``group``, and its binding: where no
    MutatingAdmissionPolicy can write the record (before 1.36), the requester writes it, and
    this makes it mean what it says.

    On CREATE, and on UPDATE when the spec changes, the annotations are either absent or name
    the requesting user (and, when listed, exactly their groups); any other UPDATE leaves them
    as they were.
    """
    user_key, groups_key = requested_by(group), requested_by_groups(group)
    kept = functools.partial(_annotation, "oldObject")
    policy = custom_resource_policy(
        name,
        group,
        plurals,
        spec_changes_only=False,
        variables=[
            _STAMP,
            {"name": "user", "expression": _annotation("object", user_key)},
            {"name": "groups", "expression": _annotation("object", groups_key)},
        ],
        validations=[
            {
                "expression": "!variables.stamp || variables.user in "
                "['', request.userInfo.username]",
                "message": f"the annotation {user_key} may only name you, the requesting user",
                "reason": "Forbidden",
            },
            {
                "expression": f"!variables.stamp || variables.groups in ['', {_GROUPS}]",
                "message": f"the annotation {groups_key} may only list your groups, one per "
                "line, as the API server knows them",
                "reason": "Forbidden",
            },
            {
                "expression": f"variables.stamp || (variables.user == ({kept(user_key)}) && "
                f"variables.groups == ({kept(groups_key)}))",
                "message": f"the annotations {user_key} and {groups_key} change only with the spec",
                "reason": "Forbidden",
            },
        ],
    )
    return [policy, policy_binding(name)]


def requester_templates(
    chart: str, kind: str, needs: str, name: str, group: str, plurals: Sequence[str]
) -> dict[str, str]:
    """The chart templates recording ``kind``'s requester, whose rights the operator checks
    it may still ``needs``: ``requester-mutation.yaml`` (:func:`requester_policy`, under
    :data:`RECORDS_REQUESTER`) and ``requester-check.yaml`` (:func:`requester_check`, under
    :data:`CHECKS_REQUESTER`)."""
    return {
        "requester-mutation.yaml": policy_template(
            chart,
            RECORDS_REQUESTER,
            _header(kind, needs),
            requester_policy(name, group, plurals),
        ),
        "requester-check.yaml": policy_template(
            chart,
            CHECKS_REQUESTER,
            _check_header(kind, needs),
            requester_check(name, group, plurals),
        ),
    }


def _annotation(obj: str, key: str) -> str:
    """A CEL expression: the annotation ``key`` of ``obj`` (``object``/``oldObject``), or ''."""
    annotations = f"{obj}.metadata.annotations"
    return f"has({annotations}) && '{key}' in {annotations} ? {annotations}['{key}'] : ''"


def _check_header(kind: str, needs: str) -> str:
    """The comment atop a chart's requester check."""
    return f"""\
# Generated by `make manifests`; do not edit.
#
# Who asked, where the API server cannot write it (before Kubernetes 1.36, which serves
# MutatingAdmissionPolicies): the requester may record themselves in the {kind}'s annotations
# requested-by and requested-by-groups (of its API group), on CREATE or with a change of the
# spec; this policy admits no other name and no other groups, and no change of either
# without the spec. Before acting, the operator asks the API server (SubjectAccessReviews)
# whether a recorded user may still {needs}; once not, it does nothing more for it
# (RequesterNotAllowed).
"""


def _header(kind: str, needs: str) -> str:
    """The comment atop a chart's requester policy: what it records, what is re-checked."""
    return f"""\
# Generated by `make manifests`; do not edit.
#
# Who asked: on CREATE, and on UPDATE when the spec changes, the API server writes the
# requesting user's name and groups into the {kind}'s annotations requested-by and
# requested-by-groups (of its API group); any other UPDATE keeps what they said, so nobody
# rewrites them without taking the {kind} over. Before acting, the operator asks the API
# server (SubjectAccessReviews) whether that user may still {needs}; once not, it does
# nothing more for it (RequesterNotAllowed). Rendered where the API server serves
# admissionregistration.k8s.io/v1 MutatingAdmissionPolicy (Kubernetes 1.36 and later).
"""
