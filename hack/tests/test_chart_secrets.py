"""ConfigMapSync's rights on Secrets, as `helm template` renders them: none unless
``secrets.enabled``, and then in every served namespace (ClusterRole or each Role); none in the
OLM bundle; the users' roles and the requester policies for SecretSyncs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from helm_render import render

from configmapsync_manifests import (
    CHART,
    REQUESTER_POLICY_NAME,
    SECRET_RULES,
    requester_policy,
)
from configmapsync_operator.models import PLURAL, SECRET_PLURAL
from opsuite_packaging.bundle import find

ROOT = Path(__file__).resolve().parents[2]
WRITE = ["get", "list", "watch", "create", "update", "patch", "delete"]


def _secret_verbs(objects: list[dict[str, Any]], kind: str) -> list[list[str]]:
    """The verbs of each rule on secrets, in every object of ``kind``."""
    return [
        rule["verbs"]
        for role in find(objects, kind)
        for rule in role.get("rules") or ()
        if "secrets" in rule.get("resources", ())
    ]


@pytest.mark.parametrize("watch", [[], ["team-a", "team-b"]], ids=["cluster", "namespaces"])
def test_no_right_on_secrets_unless_enabled(watch: list[str]) -> None:
    objects = render(CHART, values={"watchNamespaces": watch})
    assert _secret_verbs(objects, "ClusterRole") == []
    assert _secret_verbs(objects, "Role") == []


def test_enabled_grants_secrets_in_the_cluster_role() -> None:
    objects = render(CHART, "secrets.enabled=true")
    assert _secret_verbs(objects, "ClusterRole") == [WRITE]
    assert [list(r.verbs) for r in SECRET_RULES.rules] == [WRITE]


def test_enabled_grants_secrets_in_each_served_namespace_only() -> None:
    objects = render(
        CHART, "secrets.enabled=true", values={"watchNamespaces": ["team-a", "team-b"]}
    )
    roles = [r for r in find(objects, "Role") if _secret_verbs([r], "Role")]
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
    assert _secret_verbs(objects, "ClusterRole") == []


@pytest.mark.parametrize("enabled", [False, True])
def test_users_roles_cover_secretsyncs_only_when_enabled(enabled: bool) -> None:
    """A namespace's view and edit users get SecretSyncs with the feature, not before."""
    objects = render(CHART, f"secrets.enabled={str(enabled).lower()}")
    roles = {r["metadata"]["name"].rsplit("-", 1)[1]: r for r in find(objects, "ClusterRole")}
    for suffix, verbs in (("view", ["get", "list", "watch"]), ("edit", ["create", "delete"])):
        covered = [
            rule["verbs"]
            for rule in roles[suffix]["rules"]
            if "secretsyncs" in rule.get("resources", ())
        ]
        assert bool(covered) is enabled, (suffix, covered)
        assert all(set(verbs) <= set(v) for v in covered)


def test_the_csv_has_no_right_on_secrets() -> None:
    """The OLM bundle ships with Secrets off: a CSV's permissions cannot depend on a value."""
    path = ROOT / "bundle" / CHART / "manifests" / f"{CHART}.clusterserviceversion.yaml"
    strategy = yaml.safe_load(path.read_text())["spec"]["install"]["spec"]
    rules = [
        rule
        for key in ("permissions", "clusterPermissions")
        for grant in strategy.get(key, ())
        for rule in grant["rules"]
    ]
    assert rules
    assert [rule for rule in rules if "secrets" in rule["resources"]] == []


def test_the_requester_policy_and_check_cover_both_kinds() -> None:
    """The requester policy (1.36 and later) and, as rendered before 1.36, the requester check
    match ConfigMapSyncs and SecretSyncs alike (the plane runs only the policy)."""
    (recorded,) = requester_policy()[0]["spec"]["matchConstraints"]["resourceRules"]
    assert recorded["resources"] == [PLURAL, SECRET_PLURAL]
    (check,) = [
        policy
        for policy in find(render(CHART, kube_version="1.35.0"), "ValidatingAdmissionPolicy")
        if policy["metadata"]["name"] == REQUESTER_POLICY_NAME
    ]
    (checked,) = check["spec"]["matchConstraints"]["resourceRules"]
    assert checked["resources"] == [PLURAL, SECRET_PLURAL]
