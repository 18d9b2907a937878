"""The authorization admission policy of PodDebuggers, as the chart installs it and as the
operator's gate (:mod:`poddebugger_operator.gate`) expects to find it in force: only someone who
could run ``kubectl debug`` on a namespace's pods may declare a PodDebugger there (in mode Copy:
who may also create pods there), and only with env valueFrom naming Secrets and ConfigMaps they
may get."""

from __future__ import annotations

from typing import Any

from opsuite_common.admission import custom_resource_policy, policy_binding
from poddebugger_operator.models import GROUP, PLURAL

POLICY_NAME = "poddebugger-authorization.debug.opsuite.dev"


def _may_get(resource: str, ref: str) -> str:
    """CEL: the env variable ``e`` names no ``ref``, or the requesting user may get it."""
    return (
        f"(!has(e.valueFrom.{ref}) || authorizer.group('').resource('{resource}')"
        f".namespace(request.namespace).name(e.valueFrom.{ref}.name).check('get').allowed())"
    )


def admission_policy() -> list[dict[str, Any]]:
    """The ValidatingAdmissionPolicy and its binding (see the module docstring)."""
    policy = custom_resource_policy(
        POLICY_NAME,
        GROUP,
        (PLURAL,),
        validations=[
            {
                "expression": "authorizer.group('').resource('pods')"
                ".subresource('ephemeralcontainers').namespace(request.namespace)"
                ".check('patch').allowed()",
                "messageExpression": "'you may not patch pods/ephemeralcontainers in "
                "namespace ' + request.namespace + ': a PodDebugger may only add debug "
                "containers where its author could run kubectl debug'",
                "reason": "Forbidden",
            },
            {
                "expression": "!has(object.spec.mode) || object.spec.mode != 'Copy' || "
                "authorizer.group('').resource('pods').namespace(request.namespace)"
                ".check('create').allowed()",
                "messageExpression": "'you may not create pods in namespace ' + "
                "request.namespace + ': a PodDebugger in mode Copy may only create copies "
                "where its author could run kubectl debug --copy-to'",
                "reason": "Forbidden",
            },
            {
                "expression": "!has(object.spec.env) || object.spec.env.all(e, "
                "!has(e.valueFrom) || "
                + _may_get("secrets", "secretKeyRef")
                + " && "
                + _may_get("configmaps", "configMapKeyRef")
                + ")",
                "messageExpression": "'you may not get every Secret and ConfigMap that spec.env "
                "valueFrom names in namespace ' + request.namespace + ': a debug container "
                "may only show what its author could read'",
                "reason": "Forbidden",
            },
        ],
    )
    return [policy, policy_binding(POLICY_NAME)]
