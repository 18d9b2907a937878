"""OLM bundle building: chart objects made OLM's, RBAC split, descriptors, the namespace env."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml

from opsuite_common.options import parse_options
from opsuite_packaging.bundle import (
    CREATED_AT,
    SCORECARD_CONFIG,
    SCORECARD_TESTS,
    TARGET_NAMESPACES_ENV,
    bundle_annotations,
    bundle_dockerfile,
    created_at,
    deployment_spec,
    descriptors,
    is_rfc3339,
    manifest_file_name,
    olm_object,
    owned_crd,
    scorecard_config,
    strategy_permissions,
    version_key,
)
from opsuite_packaging.chart import METRICS_AUTH_RULES, ChartSpec, PolicyRule
from opsuite_packaging.chart_values import ChartValues, ImageValues

LABELS = {
    "helm.sh/chart": "x-operator-0.1.0",
    "app.kubernetes.io/name": "x-operator",
    "app.kubernetes.io/managed-by": "Helm",
}


def _deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "x-operator", "namespace": "ns", "labels": dict(LABELS)},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": "x-operator"}},
            "template": {
                "metadata": {"labels": dict(LABELS)},
                "spec": {
                    "serviceAccountName": "x-sa",
                    "containers": [
                        {
                            "name": "operator",
                            "image": "x:1",
                            "args": ["--leader-elect=true", "--leader-election-id=x-lease"],
                            "env": [{"name": "POD_NAME", "value": "p"}],
                        }
                    ],
                },
            },
        },
    }


def _spec(cluster_rules: tuple[PolicyRule, ...]) -> ChartSpec:
    return ChartSpec(
        name="x-operator",
        command="x-operator",
        description="X.",
        crd_name="xs.example.com",
        values=ChartValues(image=ImageValues(repository="x")),
        namespaced_rules=(PolicyRule(("",), ("pods",), ("list", "watch")),),
        cluster_rules=cluster_rules,
    )


def test_olm_object_drops_the_namespace_and_helm_labels() -> None:
    obj = olm_object(_deployment())
    assert "namespace" not in obj["metadata"]
    for labels in (obj["metadata"]["labels"], obj["spec"]["template"]["metadata"]["labels"]):
        assert labels == {
            "app.kubernetes.io/name": "x-operator",
            "app.kubernetes.io/managed-by": "olm",
        }


def test_deployment_spec_serves_olm_target_namespaces() -> None:
    entry = deployment_spec(_deployment())
    assert entry["name"] == "x-operator"
    env = entry["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env == [{"name": "POD_NAME", "value": "p"}, TARGET_NAMESPACES_ENV]


def test_deployment_spec_refuses_a_chart_already_setting_the_namespace_env() -> None:
    deployment = _deployment()
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["env"].append({"name": TARGET_NAMESPACES_ENV["name"], "value": "a"})
    with pytest.raises(ValueError, match="already set"):
        deployment_spec(deployment)


@pytest.mark.parametrize(
    ("annotation", "namespaces"),
    [("", ()), ("team-a", ("team-a",)), ("team-b,team-a", ("team-a", "team-b"))],
)
def test_olm_target_namespaces_annotation_is_what_the_operator_serves(
    annotation: str, namespaces: tuple[str, ...]
) -> None:
    """OLM writes "" for AllNamespaces and a comma-separated list otherwise."""
    options = parse_options("x", "X", [], {TARGET_NAMESPACES_ENV["name"]: annotation})
    assert options.namespaces == namespaces
    assert options.clusterwide == (annotation == "")


def test_permissions_hold_namespaced_and_election_rules_for_the_deployment_account() -> None:
    cluster_rule = PolicyRule(("",), ("namespaces",), ("list",))
    permissions, cluster_permissions = strategy_permissions(_spec((cluster_rule,)), _deployment())
    assert [p["serviceAccountName"] for p in permissions + cluster_permissions] == ["x-sa"] * 2
    rules = permissions[0]["rules"]
    assert rules[0] == {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}
    named = [r for r in rules if r.get("resourceNames")]
    assert named == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["get", "update", "watch"],
            "resourceNames": ["x-lease"],
        }
    ]
    assert cluster_permissions[0]["rules"] == [cluster_rule.to_kube()]


def test_no_cluster_permissions_without_cluster_rules() -> None:
    _, cluster_permissions = strategy_permissions(_spec(()), _deployment())
    assert cluster_permissions == []


def test_descriptors_follow_the_schema_fields() -> None:
    schema = {
        "properties": {
            "replicas": {"type": "integer", "description": "How many\n  pods."},
            "mode": {"type": "string", "enum": ["a", "b"], "description": "Mode."},
            "paused": {"type": "boolean"},
            "template": {"type": "object", "description": "Pod template."},
            "conditions": {"type": "array", "description": "Conditions."},
        }
    }
    ui = "urn:alm:descriptor:com.tectonic.ui:"
    spec = {d["path"]: d for d in descriptors(schema, spec=True, scale_path="replicas")}
    assert spec["replicas"] == {
        "path": "replicas",
        "displayName": "Replicas",
        "description": "How many pods.",
        "x-descriptors": [ui + "podCount"],
    }
    assert spec["mode"]["x-descriptors"] == [ui + "select:a", ui + "select:b"]
    assert spec["paused"]["x-descriptors"] == [ui + "booleanSwitch"]
    assert "x-descriptors" not in spec["template"]
    status = {d["path"]: d for d in descriptors(schema, spec=False)}
    assert status["conditions"]["x-descriptors"] == ["urn:alm:descriptor:io.kubernetes.conditions"]
    assert "x-descriptors" not in status["replicas"]


def test_camel_case_fields_get_spaced_display_names() -> None:
    schema = {"properties": {"minReadySeconds": {"type": "integer"}}}
    assert descriptors(schema, spec=True)[0]["displayName"] == "Min Ready Seconds"


def test_bundle_image_labels_are_the_annotations() -> None:
    labels = dict(
        line.removeprefix("LABEL ").split("=", 1)
        for line in bundle_dockerfile("x-operator").splitlines()
        if line.startswith("LABEL ")
    )
    assert labels == bundle_annotations("x-operator")
    assert yaml.safe_load(yaml.safe_dump(labels)) == labels


def test_secure_metrics_add_the_review_rules_to_the_cluster_permissions() -> None:
    deployment = _deployment()
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    env.append({"name": "OPSUITE_METRICS_SECURE", "value": "true"})
    _, cluster_permissions = strategy_permissions(_spec(()), deployment)
    assert cluster_permissions[0]["rules"] == [r.to_kube() for r in METRICS_AUTH_RULES]
    env[-1] = {"name": "OPSUITE_METRICS_SECURE", "value": "false"}
    assert strategy_permissions(_spec(()), deployment)[1] == []


@pytest.mark.parametrize(
    ("obj", "name"),
    [
        ({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x-metrics"}},
         "x-metrics_v1_service.yaml"),
        ({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
          "metadata": {"name": "x-metrics-reader"}},
         "x-metrics-reader_rbac.authorization.k8s.io_v1_clusterrole.yaml"),
    ],
)  # fmt: skip
def test_manifest_file_names_follow_operator_sdk(obj: dict[str, Any], name: str) -> None:
    assert manifest_file_name(obj) == name


NOW = datetime(2026, 11, 24, 19, 20, 8, 500, tzinfo=UTC)


def _csv(created: str | None = None, version: str = "0.1.0") -> dict[str, Any]:
    annotations = {"capabilities": "Basic Install"}
    if created is not None:
        annotations[CREATED_AT] = created
    return {"metadata": {"name": "x.v" + version, "annotations": annotations}, "spec": {}}


def test_created_at_is_now_for_a_new_csv() -> None:
    assert created_at(_csv(), None, NOW) == "2026-11-24T19:20:08Z"


def test_created_at_keeps_the_previous_value_while_nothing_else_changed() -> None:
    """Regenerating an unchanged bundle writes nothing: make verify never goes stale by time."""
    previous = _csv("2025-01-02T03:04:05Z")
    assert created_at(_csv(), previous, NOW + timedelta(days=30)) == "2025-01-02T03:04:05Z"


def test_created_at_moves_when_the_csv_changed() -> None:
    previous = _csv("2025-01-02T03:04:05Z", version="0.0.9")
    assert created_at(_csv(), previous, NOW) == "2026-11-24T19:20:08Z"


@pytest.mark.parametrize("bad", ["", "yesterday", "2025-01-02", "2025-13-02T03:04:05Z", 5])
def test_created_at_replaces_a_missing_or_invalid_value(bad: Any) -> None:
    previous = _csv()
    previous["metadata"]["annotations"][CREATED_AT] = bad
    assert created_at(_csv(), previous, NOW) == "2026-11-24T19:20:08Z"


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("2026-11-24T19:20:08Z", True),
        ("2026-11-24T19:20:08.123+01:00", True),
        ("2026-11-24 19:20:08", False),
        ("2026-02-30T00:00:00Z", False),
        (None, False),
    ],
)
def test_rfc3339(value: object, valid: bool) -> None:
    assert is_rfc3339(value) is valid


def test_scorecard_config_runs_the_basic_and_olm_suites() -> None:
    config = scorecard_config()
    assert config["kind"] == "Configuration"
    tests = config["stages"][0]["tests"]
    by_suite: dict[str, list[str]] = {}
    for test in tests:
        assert test["entrypoint"][0] == "scorecard-test"
        by_suite.setdefault(test["labels"]["suite"], []).append(test["entrypoint"][1])
    assert by_suite == {suite: list(names) for suite, names in SCORECARD_TESTS.items()}
    assert set(by_suite) == {"basic", "olm"}


def test_bundle_label_points_at_the_scorecard_config() -> None:
    label = bundle_annotations("x")["operators.operatorframework.io.test.config.v1"]
    assert SCORECARD_CONFIG.startswith(label)
    assert "COPY tests/scorecard /tests/scorecard/" in bundle_dockerfile("x")


def _crd() -> dict[str, Any]:
    schema = {"description": "X.", "properties": {"spec": {"properties": {}}}}
    return {
        "metadata": {"name": "xs.example.com"},
        "spec": {
            "names": {"kind": "X"},
            "versions": [{"name": "v1", "storage": True, "schema": {"openAPIV3Schema": schema}}],
        },
    }


def test_owned_crd_lists_the_resources_its_objects_act_on() -> None:
    """The scorecard's olm-crds-have-resources test fails an owned CRD without them."""
    owned = owned_crd(_crd(), (("Pod", "v1"),))
    assert owned["resources"] == [{"kind": "Pod", "name": "", "version": "v1"}]
    with pytest.raises(ValueError, match="resources"):
        owned_crd(_crd(), ())


def test_versions_order_as_semver_says() -> None:
    ordered = ["0.0.1", "0.1.0-alpha", "0.1.0-alpha.1", "0.1.0-alpha.beta", "0.1.0-rc.2"]
    ordered += ["0.1.0-rc.10", "0.1.0", "0.2.0", "0.10.0", "1.0.0"]
    assert sorted(reversed(ordered), key=version_key) == ordered
    assert version_key("1.0.0+build.5") == version_key("1.0.0")
    with pytest.raises(ValueError, match="not a semantic version"):
        version_key("v1.0")
