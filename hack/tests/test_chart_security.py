"""The charts' secure metrics and users' roles as `helm template` renders them: HTTPS with the
review rules and the metrics-reader role by default, plain without; view and edit ClusterRoles
aggregated into the built-in roles, PodDebugger's edit role only when asked."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from helm_render import render

from opsuite_packaging.bundle import find
from opsuite_packaging.chart import METRICS_AUTH_RULES, MIN_KUBE_VERSION, ChartSpec
from opsuite_packaging.operators import OPERATORS
from poddebugger_manifests import CHART_SPEC as PODDEBUGGER_CHART
from podset_manifests import CHART_SPEC as PODSET_CHART

SPECS = tuple(importlib.import_module(op.manifests).CHART_SPEC for op in OPERATORS)
IDS = [spec.name for spec in SPECS]
AGGREGATE = "rbac.authorization.k8s.io/aggregate-to-"
REVIEW_RULES = [rule.to_kube() for rule in METRICS_AUTH_RULES]


def _render(spec: ChartSpec, *set_values: str) -> list[dict[str, Any]]:
    return render(spec.name, *set_values, kube_version=MIN_KUBE_VERSION)


def _cluster_role(objects: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    roles = [r for r in find(objects, "ClusterRole") if r["metadata"]["name"] == name]
    return roles[0] if roles else None


def _args(objects: list[dict[str, Any]]) -> list[str]:
    (deployment,) = find(objects, "Deployment")
    args: list[str] = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    return args


def _secure_env(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    (deployment,) = find(objects, "Deployment")
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    return [var for var in env if var["name"] == "OPSUITE_METRICS_SECURE"]


def _aggregation(role: dict[str, Any]) -> list[str]:
    labels = role["metadata"]["labels"]
    return sorted(k.removeprefix(AGGREGATE) for k, v in labels.items() if k.startswith(AGGREGATE))


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_metrics_are_secure_by_default_with_review_rules_and_a_reader_role(
    spec: ChartSpec,
) -> None:
    objects = _render(spec, "metrics.serviceMonitor.enabled=true")
    fullname = f"r-{spec.name}"
    assert _secure_env(objects) == [{"name": "OPSUITE_METRICS_SECURE", "value": "true"}]
    assert not [a for a in _args(objects) if a.startswith("--metrics-cert-path")]
    operator = _cluster_role(objects, fullname)
    assert operator is not None
    assert all(rule in operator["rules"] for rule in REVIEW_RULES)
    reader = _cluster_role(objects, f"{fullname}-metrics-reader")
    assert reader is not None
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    (monitor,) = find(objects, "ServiceMonitor")
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["scheme"] == "https"
    assert endpoint["authorization"] == {
        "type": "Bearer",
        "credentials": {"name": f"{fullname}-metrics-scraper-token", "key": "token"},
    }
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}
    (deployment,) = find(objects, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_plain_metrics_have_no_review_rules_and_no_reader_role(spec: ChartSpec) -> None:
    objects = _render(spec, "metrics.secure=false", "metrics.serviceMonitor.enabled=true")
    fullname = f"r-{spec.name}"
    assert _secure_env(objects) == []
    operator = _cluster_role(objects, fullname)
    own = [rule.to_kube() for rule in spec.cluster_rules]
    metrics_only = [r for r in REVIEW_RULES if r not in own]
    assert operator is None or not any(r in operator["rules"] for r in metrics_only)
    assert _cluster_role(objects, f"{fullname}-metrics-reader") is None
    (monitor,) = find(objects, "ServiceMonitor")
    assert "scheme" not in monitor["spec"]["endpoints"][0]


def test_listed_namespaces_keep_a_cluster_role_for_the_reviews_only() -> None:
    """With watchNamespaces a chart without cluster-scoped rules still needs the reviews,
    which are cluster-scoped: its ClusterRole holds them and nothing else."""
    objects = _render(PODSET_CHART, "watchNamespaces={a}")
    operator = _cluster_role(objects, f"r-{PODSET_CHART.name}")
    assert operator is not None
    own = [rule.to_kube() for rule in PODSET_CHART.cluster_rules]
    assert operator["rules"] == own + [r for r in REVIEW_RULES if r not in own]
    assert sorted(map(str, operator["rules"])) == sorted(map(str, REVIEW_RULES))


def test_a_mounted_certificate_secret_is_used_and_the_monitor_can_verify_it() -> None:
    objects = _render(
        PODSET_CHART,
        "metrics.certSecret=metrics-tls",
        "metrics.serviceMonitor.enabled=true",
        "metrics.serviceMonitor.tlsConfig.serverName=r-podset-operator-metrics.ns.svc",
    )
    assert "--metrics-cert-path=/etc/opsuite/metrics-certs" in _args(objects)
    (deployment,) = find(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert {"name": "metrics-certs", "secret": {"secretName": "metrics-tls"}} in pod["volumes"]
    assert {
        "name": "metrics-certs",
        "mountPath": "/etc/opsuite/metrics-certs",
        "readOnly": True,
    } in pod["containers"][0]["volumeMounts"]
    (monitor,) = find(objects, "ServiceMonitor")
    tls = monitor["spec"]["endpoints"][0]["tlsConfig"]
    assert tls == {"serverName": "r-podset-operator-metrics.ns.svc"}


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_users_get_view_and_edit_roles_on_the_custom_resources(spec: ChartSpec) -> None:
    objects = _render(spec)
    plural, group = spec.crd_name.split(".", 1)
    view = _cluster_role(objects, f"r-{spec.name}-view")
    edit = _cluster_role(objects, f"r-{spec.name}-edit")
    assert view is not None
    assert edit is not None
    assert view["rules"] == [
        {"apiGroups": [group], "resources": [plural], "verbs": ["get", "list", "watch"]}
    ]
    assert edit["rules"] == [
        {
            "apiGroups": [group],
            "resources": [plural],
            "verbs": ["create", "update", "patch", "delete", "deletecollection"],
        }
    ]
    assert _aggregation(view) == ["admin", "edit", "view"]
    expected = [] if spec is PODDEBUGGER_CHART else ["admin", "edit"]
    assert _aggregation(edit) == expected
    assert _cluster_role(_render(spec, "userRoles.create=false"), f"r-{spec.name}-view") is None


def test_poddebugger_edit_role_is_aggregated_only_when_asked() -> None:
    objects = _render(PODDEBUGGER_CHART, "userRoles.aggregateToEdit=true")
    edit = _cluster_role(objects, f"r-{PODDEBUGGER_CHART.name}-edit")
    assert edit is not None
    assert _aggregation(edit) == ["admin", "edit"]
