"""Generated files: a well-formed admission policy; the CRD with the API's names and rules."""

from __future__ import annotations

import json

from configmapsync_manifests import (
    CRD,
    MAX_CHECKED_DESTINATIONS,
    SAMPLES,
    SECRET_CRD,
    admission_policy,
)
from configmapsync_operator.kinds import SECRETS
from configmapsync_operator.models import SERVICE_ACCOUNT_TOKEN, SecretSyncSpec
from configmapsync_operator.spec import parse_spec
from opsuite_packaging.crd import build_crd


def test_admission_policy_pairs_a_policy_with_its_binding() -> None:
    policy, binding = admission_policy()
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    names = [v["name"] for v in policy["spec"]["variables"]]
    assert names.count("writesEverywhere") == 1
    assert sum(n.startswith("mayWrite") for n in names) == MAX_CHECKED_DESTINATIONS
    assert all(v.get("reason") in ("Forbidden", "Invalid") for v in policy["spec"]["validations"])


def test_admission_policy_fits_the_api_server_s_cel_budget_and_checks_delete_too() -> None:
    """Each authorizer check costs 350,000 of one admission's 10,000,000, and the API server
    refuses an expression over 1,000,000 (two checks): counted over the policy as generated.
    Every destination is checked for create, update and delete (#31, item 5: the operator
    deletes there too)."""
    policy, _ = admission_policy()
    expressions = [v["expression"] for v in policy["spec"]["variables"]]
    expressions += [v["expression"] for v in policy["spec"]["validations"]]
    checks = [e.count(".check(") for e in expressions]
    assert max(checks) <= 2
    assert sum(checks) * 350_000 <= 10_000_000
    last = MAX_CHECKED_DESTINATIONS - 1
    for verb in ("create", "update", "delete"):
        assert any(f"destinations[{last}]).check('{verb}')" in e for e in expressions), verb


def test_the_secretsync_policy_checks_the_same_on_secrets() -> None:
    """Granting ConfigMap rights never lets anyone declare a SecretSync: its policy asks the
    authorizer about Secrets only, for the source named by secretName."""
    policy, binding = admission_policy(SECRETS)
    assert policy["metadata"]["name"] == "secretsync-authorization.sync.opsuite.dev"
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    assert [r["resources"] for r in rules] == [["secretsyncs"]]
    text = json.dumps(policy)
    assert "configmap" not in text.lower()
    assert "resource('secrets')" in text
    assert "object.spec.secretName" in text
    expressions = [v["expression"] for v in policy["spec"]["variables"]]
    expressions += [v["expression"] for v in policy["spec"]["validations"]]
    assert sum(e.count(".check(") for e in expressions) * 350_000 <= 10_000_000
    same = json.dumps(admission_policy()[0]["spec"]["validations"]).replace("ConfigMap", "Secret")
    same = same.replace("configMapName", "secretName").replace("configmaps", "secrets")
    assert same == json.dumps(policy["spec"]["validations"])


def test_crd_names_columns_and_rules() -> None:
    crd = build_crd(CRD)
    names = crd["spec"]["names"]
    assert (names["plural"], names["shortNames"], names["categories"]) == (
        "configmapsyncs",
        ["cms"],
        ["opsuite"],
    )
    version = crd["spec"]["versions"][0]
    columns = [c["name"] for c in version["additionalPrinterColumns"]]
    assert columns == ["Source", "Targets", "Synced", "Ready", "Age"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["required"] == ["configMapName"]
    rules = [rule["fieldPath"] for rule in spec["x-kubernetes-validations"] if "fieldPath" in rule]
    assert rules == [".destinationNamespaces", ".excludeNamespaces", ".includeKeys"]
    assert len(spec["x-kubernetes-validations"]) == 4


def test_secretsync_crd_is_its_own_resource_naming_a_secret() -> None:
    """A kind of its own, so that RBAC tells it from ConfigMapSync; the same rules, their
    messages naming a Secret."""
    crd = build_crd(SECRET_CRD)
    assert crd["metadata"]["name"] == "secretsyncs.sync.opsuite.dev"
    names = crd["spec"]["names"]
    assert (names["kind"], names["shortNames"], names["categories"]) == (
        "SecretSync",
        ["secsync"],
        ["opsuite"],
    )
    version = crd["spec"]["versions"][0]
    assert [c["name"] for c in version["additionalPrinterColumns"]] == [
        "Source",
        "Targets",
        "Synced",
        "Ready",
        "Age",
    ]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["required"] == ["secretName"]
    assert "configMapName" not in spec["properties"]
    messages = [rule["message"] for rule in spec["x-kubernetes-validations"]]
    onto_itself = "the source namespace cannot be a destination: a Secret cannot be synced onto"
    assert f"{onto_itself} itself" in messages
    assert not any("ConfigMap" in m for m in messages)


def test_samples_are_sources_and_valid_syncs_reading_them() -> None:
    source, sync, secret, secret_sync = SAMPLES
    assert source["kind"] == "ConfigMap"
    spec = parse_spec(sync)
    assert spec.source_name == source["metadata"]["name"]
    assert spec.source_namespace is None  # applied together, into one namespace
    assert (secret["kind"], secret_sync["kind"]) == ("Secret", "SecretSync")
    assert secret["type"] not in ("Opaque", SERVICE_ACCOUNT_TOKEN)  # a type that is kept
    secret_spec = SecretSyncSpec.model_validate(secret_sync["spec"], strict=True)
    assert secret_spec.secret_name == secret["metadata"]["name"]
    assert secret_spec.source_namespace is None
