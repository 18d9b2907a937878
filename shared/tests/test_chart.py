"""Chart generation: values round-trip, a strict schema, rules and policy templates."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from opsuite_packaging.chart import (
    LEASE_PLACEHOLDER,
    ChartSpec,
    OptionalRules,
    PolicyRule,
    operator_template,
    policy_template,
    rbac_table,
    shared_template,
    values_schema,
    values_table,
    values_yaml,
)
from opsuite_packaging.chart_values import ChartValues, ImageValues, published_image

VALUES = ChartValues(image=ImageValues(repository="example.com/op"))
SPEC = ChartSpec(
    name="demo-operator",
    command="demo-operator",
    description="Demo.",
    crd_name="demos.example.com",
    values=VALUES,
    namespaced_rules=(PolicyRule(("",), ("pods",), ("list", "watch")),),
    cluster_rules=(PolicyRule(("",), ("namespaces",), ("list",)),),
    operator_args="- --flag={{ .Values.logLevel }}",
)


def _objects(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """Every object schema with declared properties, nested ones included."""
    found = []
    if schema.get("properties"):
        found.append(schema)
    for child in schema.get("properties", {}).values():
        found += _objects(child)
    if isinstance(schema.get("items"), dict):
        found += _objects(schema["items"])
    return found


def test_values_yaml_reads_back_as_the_defaults_with_a_comment_per_key() -> None:
    text = values_yaml(VALUES)
    assert yaml.safe_load(text) == VALUES.model_dump(by_alias=True, mode="json")
    assert "# Operator pods." in text
    assert "watchNamespaces: []" in text


def test_schema_rejects_unknown_keys_at_every_level_but_allows_global() -> None:
    schema = values_schema(ChartValues)
    assert "$defs" not in schema
    assert "$ref" not in str(schema)
    objects = _objects(schema)
    assert len(objects) > 5
    assert all(o.get("additionalProperties") is False for o in objects)
    assert schema["properties"]["global"] == {"type": "object"}
    namespaces = schema["properties"]["watchNamespaces"]
    assert namespaces["uniqueItems"] is True
    assert namespaces["items"]["pattern"].startswith("^[a-z0-9]")


def test_values_model_rejects_bad_values() -> None:
    with pytest.raises(ValidationError):
        ChartValues(image=ImageValues(repository="x"), replica_count=0)
    with pytest.raises(ValidationError):
        ImageValues(repository="x", digest="latest")


def test_published_image_is_the_chart_name_under_the_registry() -> None:
    assert published_image("demo-operator") == ImageValues(
        repository="ghcr.io/opsuite/demo-operator"
    )


def test_operator_template_renders_rules_and_the_releases_lease() -> None:
    text = operator_template(SPEC)
    assert '{{- define "demo-operator.namespacedRules" -}}\n- apiGroups:' in text
    assert "- namespaces" in text
    assert LEASE_PLACEHOLDER not in text
    assert '- {{ include "demo-operator.fullname" . }}' in text
    assert "- --flag={{ .Values.logLevel }}" in text


def test_optional_rules_are_granted_only_while_their_value_is_true() -> None:
    secrets = PolicyRule(("",), ("secrets",), ("get",))
    spec = replace(SPEC, optional_rules=(OptionalRules("secrets.enabled", (secrets,)),))
    text = operator_template(spec)
    guarded = "{{- if .Values.secrets.enabled }}\n- apiGroups:\n  - ''\n  resources:\n  - secrets"
    assert guarded in text
    rules = text.split('"demo-operator.namespacedRules" -}}', 1)[1].split('{{- define "', 1)[0]
    assert rules.index("- pods") < rules.index(guarded) < rules.rindex("{{- end }}")
    assert "secrets" not in operator_template(SPEC)
    assert "| served namespaces, with `secrets.enabled` | core | secrets | get |" in rbac_table(
        spec
    )


def test_shared_templates_are_renamed_for_the_chart() -> None:
    source = '{{- define "opsuite.name" -}}{{ include "opsuite.fullname" . }}{{ .Values.opsuite }}'
    assert shared_template("demo-operator", source) == (
        '{{- define "demo-operator.name" -}}{{ include "demo-operator.fullname" . }}'
        "{{ .Values.opsuite }}"
    )


def test_policy_template_labels_each_object_and_substitutes() -> None:
    documents = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p", "namespace": "NS"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "q"}},
    ]
    text = policy_template("demo-operator", ".Values.on", "# header", documents, {"NS": "{{ x }}"})
    assert text.startswith("{{- if .Values.on }}\n# header\n")
    assert text.endswith("{{- end }}\n")
    assert text.count('{{- include "demo-operator.labels" . | nindent 4 }}') == 2
    assert "namespace: {{ x }}" in text
    assert documents[0]["metadata"] == {"name": "p", "namespace": "NS"}  # not mutated


def test_values_table_lists_nested_keys() -> None:
    table = values_table(VALUES)
    assert "| `metrics.serviceMonitor.enabled` | `false` |" in table
    assert '| `image.repository` | `"example.com/op"` |' in table
