"""Whether the authorization admission policy guards a PodDebugger: the operator fails closed.

The operator may add ephemeral containers to every pod it serves, so a PodDebugger is acted
upon only when the ValidatingAdmissionPolicy that lets only those who could run ``kubectl
debug`` declare one (:func:`~poddebugger_operator.policy.admission_policy`) was in force
when it was created. :func:`admission_problem` reads the policies and bindings the operator
watches (read-only) and says what is missing, or None:

* the policy of the expected name exists, with ``failurePolicy: Fail`` (an error must deny),
  every validation of the shipped policy, no match condition or exclusion beyond the shipped
  ones, and match constraints that cover CREATE and UPDATE of every PodDebugger (no
  ``resourceNames``, a scope with namespaced objects, the CRD's version or ``*``);
* a binding of that policy denies (``validationActions`` has ``Deny``) and surely covers the
  PodDebugger's namespace: no object selector, resource rules or exclusions, and a namespace
  selector that is empty or matches on the ``kubernetes.io/metadata.name`` label alone (the
  namespace's other labels are not known here, so other requirements count as not matching);
* the PodDebugger was created at least :data:`LOAD_GRACE` after the policy and that binding:
  one created earlier may have been admitted before the API server enforced them. (Spec
  changes are checked by the policy too, but the creation time is what the API keeps; such a
  PodDebugger is re-created to be acted upon.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from poddebugger_operator.models import VERSION

NAME_LABEL = "kubernetes.io/metadata.name"
LOAD_GRACE = timedelta(seconds=10)
"""How long after a policy or binding is created the API server may take to enforce it."""


def _time(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def _created(obj: Mapping[str, Any]) -> datetime | None:
    return _time((obj.get("metadata") or {}).get("creationTimestamp"))


def surely_selects(selector: Mapping[str, Any] | None, namespace: str) -> bool:
    """Whether a label selector selects ``namespace`` whatever its labels besides its name."""
    labels = (selector or {}).get("matchLabels") or {}
    if any(key != NAME_LABEL or value != namespace for key, value in labels.items()):
        return False
    for requirement in (selector or {}).get("matchExpressions") or ():
        operator = requirement.get("operator")
        selected = namespace in (requirement.get("values") or ())
        if requirement.get("key") != NAME_LABEL or not (
            operator == "Exists"
            or (operator == "In" and selected)
            or (operator == "NotIn" and not selected)
        ):
            return False
    return True


def _matches_every_object(rule: Mapping[str, Any], group: str, version: str, plural: str) -> bool:
    """Whether one resource rule matches every object of ``group/version/plural``: no
    resourceNames, a scope that includes namespaced objects, and the served version (a rule
    for another version matches nothing, whatever the matchPolicy: the CRD has one)."""
    return bool(
        set(rule.get("apiGroups") or ()) & {group, "*"}
        and set(rule.get("apiVersions") or ()) & {version, "*"}
        and set(rule.get("resources") or ()) & {plural, "*"}
        and not rule.get("resourceNames")
        and rule.get("scope", "*") in ("*", "Namespaced")
    )


def _covers(rules: Sequence[Mapping[str, Any]], group: str, version: str, plural: str) -> bool:
    """Whether resource rules match CREATE and UPDATE of every ``group/version/plural``."""
    for operation in ("CREATE", "UPDATE"):
        if not any(
            _matches_every_object(rule, group, version, plural)
            and set(rule.get("operations") or ()) & {operation, "*"}
            for rule in rules
        ):
            return False
    return True


def _selector_empty(value: Any) -> bool:
    return not (value or {}).get("matchLabels") and not (value or {}).get("matchExpressions")


def policy_problem(policy: Mapping[str, Any] | None, expected: Mapping[str, Any]) -> str | None:
    """What makes ``policy`` weaker than the ``expected`` (shipped) one, or None."""
    name = expected["metadata"]["name"]
    if policy is None:
        return f"the ValidatingAdmissionPolicy {name} does not exist"
    spec, want = policy.get("spec") or {}, expected["spec"]
    if spec.get("failurePolicy", "Fail") != "Fail":
        return f"the ValidatingAdmissionPolicy {name} has failurePolicy {spec['failurePolicy']}"
    have = {v.get("expression") for v in spec.get("validations") or ()}
    if any(v["expression"] not in have for v in want["validations"]):
        return f"the ValidatingAdmissionPolicy {name} lacks the shipped validations"
    conditions = {(c.get("name"), c.get("expression")) for c in spec.get("matchConditions") or ()}
    if not conditions <= {(c["name"], c["expression"]) for c in want.get("matchConditions", ())}:
        return f"the ValidatingAdmissionPolicy {name} has match conditions of its own"
    constraints = spec.get("matchConstraints") or {}
    rule = want["matchConstraints"]["resourceRules"][0]
    if not (
        _covers(
            constraints.get("resourceRules") or (),
            rule["apiGroups"][0],
            VERSION,
            rule["resources"][0],
        )
        and not constraints.get("excludeResourceRules")
        and _selector_empty(constraints.get("namespaceSelector"))
        and _selector_empty(constraints.get("objectSelector"))
    ):
        return f"the ValidatingAdmissionPolicy {name} does not match every PodDebugger"
    return None


def binding_covers(binding: Mapping[str, Any], namespace: str) -> bool:
    """Whether ``binding`` denies what its policy rejects in ``namespace``, for every object."""
    spec = binding.get("spec") or {}
    resources = spec.get("matchResources") or {}
    return (
        "Deny" in (spec.get("validationActions") or ())
        and not resources.get("resourceRules")
        and not resources.get("excludeResourceRules")
        and _selector_empty(resources.get("objectSelector"))
        and surely_selects(resources.get("namespaceSelector"), namespace)
    )


def admission_problem(
    debugger: Mapping[str, Any],
    policies: Mapping[str, Mapping[str, Any]],
    bindings: Iterable[Mapping[str, Any]],
    expected: Mapping[str, Any],
) -> str | None:
    """Why ``debugger`` is not known to have been admitted by the ``expected`` policy (as
    shipped, possibly under another name), or None. ``policies``: the cluster's policies by
    name; ``bindings``: its bindings."""
    name = expected["metadata"]["name"]
    policy = policies.get(name)
    problem = policy_problem(policy, expected)
    if problem is not None or policy is None:
        return problem
    meta = debugger.get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    covering = [
        b
        for b in bindings
        if (b.get("spec") or {}).get("policyName") == name and binding_covers(b, namespace)
    ]
    if not covering:
        return (
            f"no ValidatingAdmissionPolicyBinding of {name} denies (validationActions Deny) "
            f"in namespace {namespace}"
        )
    created, policy_created = _created(debugger), _created(policy)
    bound = [t for t in (_created(b) for b in covering) if t is not None]
    # Enforced once the policy and its earliest covering binding both existed.
    if (
        created is None
        or policy_created is None
        or not bound
        or created < max(policy_created, min(bound)) + LOAD_GRACE
    ):
        return (
            f"this PodDebugger was created before the ValidatingAdmissionPolicy {name} was in "
            "force, so it may not have been checked: delete and re-create it"
        )
    return None
