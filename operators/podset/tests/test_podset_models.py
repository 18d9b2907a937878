"""The PodSet API as the CRD states it: the rules the API server applies, and the model's."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import ValidationError

from opsuite_packaging.crd import build_crd
from podset_manifests import CRD
from podset_operator.models import PodSetSpec
from podset_operator.spec import InvalidSpecError, parse_spec

CONTAINERS = [{"name": "c", "image": "nginx"}]


def podset(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "namespace": "ns", "uid": "u-1", "generation": 1},
        "spec": {"template": {"spec": {"containers": CONTAINERS}}, **spec},
    }


def spec_schema() -> dict[str, Any]:
    crd = build_crd(CRD)
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return dict(schema["properties"]["spec"])


# --- template.spec.restartPolicy ---------------------------------------------------------------


@pytest.mark.parametrize("policy", ["Never", "OnFailure", "always", ""])
def test_restart_policy_other_than_always_is_refused(policy: str) -> None:
    """A PodSet replaces pods that exit: Never/OnFailure pods would be replaced at once with no
    backoff and Succeeded pods would pile up. apps/v1 ReplicaSets refuse them; so does PodSet."""
    template = {"spec": {"containers": CONTAINERS, "restartPolicy": policy}}
    expected = "spec.template.spec: restartPolicy must be Always: a PodSet replaces pods that exit"
    with pytest.raises(InvalidSpecError, match=re.escape(expected)):
        parse_spec(podset(template=template))
    with pytest.raises(ValidationError, match="restartPolicy must be Always"):
        PodSetSpec.model_validate({"template": template})


@pytest.mark.parametrize("policy", [None, "Always"])
def test_restart_policy_always_or_omitted_is_accepted(policy: str | None) -> None:
    pod_spec: dict[str, Any] = {"containers": CONTAINERS}
    if policy is not None:
        pod_spec["restartPolicy"] = policy
    parsed = parse_spec(podset(template={"spec": pod_spec}))
    assert parsed.template.spec == pod_spec  # kept verbatim: the pods get exactly the template


def test_crd_refuses_restart_policy_other_than_always_with_a_cel_rule() -> None:
    """The rule is on template.spec, where restartPolicy is a declared string (CEL sees only
    declared fields of an object that otherwise preserves unknown fields)."""
    pod_spec = spec_schema()["properties"]["template"]["properties"]["spec"]
    assert pod_spec["properties"]["restartPolicy"]["type"] == "string"
    assert pod_spec["x-kubernetes-preserve-unknown-fields"] is True
    assert "restartPolicy" not in pod_spec.get("required", [])
    rules = [r for r in pod_spec["x-kubernetes-validations"] if "restartPolicy" in r["rule"]]
    assert rules == [
        {
            "rule": "!has(self.restartPolicy) || self.restartPolicy == 'Always'",
            "message": "restartPolicy must be Always: a PodSet replaces pods that exit, so with "
            "Never or OnFailure they would be replaced at once, with no backoff",
            "fieldPath": ".restartPolicy",
        }
    ]
