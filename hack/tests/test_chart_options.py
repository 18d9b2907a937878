"""The chart options platform teams look for, as `helm template` renders them: labels on every
object, extra volumes, the probes' timing, the grace period, the PodDisruptionBudget, and
operator pods spread over nodes once there are two."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from helm_render import HelmError, render

from opsuite_packaging.bundle import find
from opsuite_packaging.operators import OPERATORS

CHARTS = [importlib.import_module(op.manifests).CHART_SPEC.name for op in OPERATORS]


def _named(objects: list[dict[str, Any]], kind: str, name: str) -> list[dict[str, Any]]:
    return [o for o in find(objects, kind) if o["metadata"]["name"] == name]


def _pod(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = find(objects, "Deployment")
    pod: dict[str, Any] = deployment["spec"]["template"]
    return pod


@pytest.mark.parametrize("chart", CHARTS)
def test_common_labels_go_on_every_object_but_not_into_selectors(chart: str) -> None:
    objects = render(chart, values={"commonLabels": {"team": "platform"}, "replicaCount": 2})
    assert objects
    for obj in objects:
        assert obj["metadata"]["labels"]["team"] == "platform", obj["metadata"]["name"]
    assert _pod(objects)["metadata"]["labels"]["team"] == "platform"
    (deployment,) = find(objects, "Deployment")
    assert "team" not in deployment["spec"]["selector"]["matchLabels"]
    (budget,) = find(objects, "PodDisruptionBudget")
    assert "team" not in budget["spec"]["selector"]["matchLabels"]


@pytest.mark.parametrize("chart", CHARTS)
def test_extra_volumes_are_mounted_beside_the_charts_own(chart: str) -> None:
    volume = {"name": "ca", "configMap": {"name": "corporate-ca"}}
    mount = {"name": "ca", "mountPath": "/etc/ssl/corporate", "readOnly": True}
    values = {"extraVolumes": [volume], "extraVolumeMounts": [mount]}
    spec = _pod(render(chart, values=values))["spec"]
    assert spec["volumes"][0]["name"] == "tmp"
    assert spec["volumes"][-1] == volume
    (container,) = spec["containers"]
    assert container["volumeMounts"][0]["mountPath"] == "/tmp"
    assert container["volumeMounts"][-1] == mount


@pytest.mark.parametrize("chart", CHARTS)
def test_probes_and_grace_period_are_configurable(chart: str) -> None:
    defaults = _pod(render(chart))["spec"]
    (container,) = defaults["containers"]
    assert defaults["terminationGracePeriodSeconds"] == 30
    assert container["startupProbe"]["periodSeconds"] == 2
    assert container["startupProbe"]["failureThreshold"] == 30
    assert container["livenessProbe"]["periodSeconds"] == 10
    assert container["readinessProbe"]["periodSeconds"] == 5
    values = {
        "terminationGracePeriodSeconds": 60,
        "probes": {
            "startup": {"failureThreshold": 90},
            "liveness": {"periodSeconds": 20, "timeoutSeconds": 5},
            "readiness": {"initialDelaySeconds": 1},
        },
    }
    spec = _pod(render(chart, values=values))["spec"]
    (container,) = spec["containers"]
    assert spec["terminationGracePeriodSeconds"] == 60
    assert container["startupProbe"]["failureThreshold"] == 90
    assert container["startupProbe"]["periodSeconds"] == 2  # the rest keep their defaults
    assert container["livenessProbe"]["periodSeconds"] == 20
    assert container["livenessProbe"]["timeoutSeconds"] == 5
    assert container["readinessProbe"]["initialDelaySeconds"] == 1
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}


@pytest.mark.parametrize("chart", CHARTS)
def test_the_disruption_budget_is_configurable(chart: str) -> None:
    assert not find(render(chart), "PodDisruptionBudget")  # one pod: nothing to keep
    (budget,) = find(render(chart, values={"replicaCount": 3}), "PodDisruptionBudget")
    assert budget["spec"]["minAvailable"] == 1
    values = {"replicaCount": 3, "podDisruptionBudget": {"maxUnavailable": "50%"}}
    (budget,) = find(render(chart, values=values), "PodDisruptionBudget")
    assert budget["spec"]["maxUnavailable"] == "50%"
    assert "minAvailable" not in budget["spec"]
    values = {"replicaCount": 3, "podDisruptionBudget": {"enabled": False}}
    assert not find(render(chart, values=values), "PodDisruptionBudget")


@pytest.mark.parametrize("chart", CHARTS)
def test_two_or_more_pods_prefer_different_nodes_unless_told_otherwise(chart: str) -> None:
    assert "affinity" not in _pod(render(chart))["spec"]
    objects = render(chart, values={"replicaCount": 2})
    (deployment,) = find(objects, "Deployment")
    (term,) = _pod(objects)["spec"]["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert term["podAffinityTerm"]["labelSelector"] == {"matchLabels": selector}
    own = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "pool", "operator": "In", "values": ["system"]}]}]}}}  # fmt: skip
    spec = _pod(render(chart, values={"replicaCount": 2, "affinity": own}))["spec"]
    assert spec["affinity"] == own


def test_the_schema_refuses_a_budget_that_is_no_number_or_percentage() -> None:
    values = {"podDisruptionBudget": {"maxUnavailable": "half"}}
    with pytest.raises(HelmError, match="/podDisruptionBudget/maxUnavailable"):
        render(CHARTS[0], values=values)


@pytest.mark.parametrize("chart", CHARTS)
def test_the_network_policy_admits_the_scrapers_and_the_helm_test_only(chart: str) -> None:
    assert not find(render(chart), "NetworkPolicy")  # off by default
    scrapers = [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}]
    objects = render(chart, values={"networkPolicy": {"enabled": True, "metricsFrom": scrapers}})
    (policy,) = find(objects, "NetworkPolicy")
    (deployment,) = find(objects, "Deployment")
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert policy["spec"]["podSelector"] == {"matchLabels": selector}
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    metrics, probes = policy["spec"]["ingress"]
    assert metrics == {"from": scrapers, "ports": [{"port": "metrics", "protocol": "TCP"}]}
    (test_pod,) = [o for o in objects if o["kind"] == "Pod"]
    (peer,) = probes["from"]
    labels = test_pod["metadata"]["labels"]
    assert all(labels[k] == v for k, v in peer["podSelector"]["matchLabels"].items())
    assert probes["ports"] == [{"port": "health", "protocol": "TCP"}]
    unscraped = {"networkPolicy": {"enabled": True}, "metrics": {"enabled": False}}
    (policy,) = find(render(chart, values=unscraped), "NetworkPolicy")
    assert policy["spec"]["ingress"] == [probes]


@pytest.mark.parametrize("chart", CHARTS)
def test_the_service_monitor_scrapes_as_its_own_reader_and_keeps_the_metrics_labels(
    chart: str,
) -> None:
    relabel = [{"action": "replace", "targetLabel": "cluster", "replacement": "eu-1"}]
    monitor_values = {
        "enabled": True,
        "namespace": "monitoring",
        "scrapeTimeout": "10s",
        "relabelings": relabel,
    }
    objects = render(chart, values={"metrics": {"serviceMonitor": monitor_values}})
    (monitor,) = find(objects, "ServiceMonitor")
    assert monitor["metadata"]["namespace"] == "monitoring"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["ns"]}
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["scrapeTimeout"] == "10s"
    assert endpoint["honorLabels"] is True  # opsuite_* metrics keep their namespace label
    assert endpoint["relabelings"] == relabel
    assert "bearerTokenFile" not in endpoint
    secret = endpoint["authorization"]["credentials"]["name"]
    (token,) = _named(objects, "Secret", secret)
    assert token["type"] == "kubernetes.io/service-account-token"
    assert token["metadata"]["namespace"] == "monitoring"
    account = token["metadata"]["annotations"]["kubernetes.io/service-account.name"]
    (scraper,) = [o for o in find(objects, "ServiceAccount") if o["metadata"]["name"] == account]
    assert scraper["metadata"]["namespace"] == "monitoring"
    (binding,) = [
        o for o in find(objects, "ClusterRoleBinding") if o["metadata"]["name"] == account
    ]
    assert binding["roleRef"]["name"].endswith("-metrics-reader")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account, "namespace": "monitoring"}
    ]
    plain = {"metrics": {"secure": False, "serviceMonitor": {"enabled": True}}}
    objects = render(chart, values=plain)
    (monitor,) = find(objects, "ServiceMonitor")
    assert "authorization" not in monitor["spec"]["endpoints"][0]
    assert not [o for o in find(objects, "Secret") if "scraper" in o["metadata"]["name"]]


@pytest.mark.parametrize("chart", CHARTS)
def test_global_image_registry_moves_every_image_to_the_mirror(chart: str) -> None:
    def images(values: dict[str, Any]) -> set[str]:
        objects = render(chart, values=values)
        pods = [_pod(objects)["spec"], *(o["spec"] for o in find(objects, "Pod"))]
        return {c["image"] for pod in pods for c in pod["containers"]}

    (default,) = images({})
    assert default.startswith(f"ghcr.io/opsuite/{chart}:")
    mirror = {"global": {"imageRegistry": "mirror.example:5000/"}}
    assert images(mirror) == {default.replace("ghcr.io/", "mirror.example:5000/")}
    unhosted = mirror | {"image": {"repository": "team/operator", "digest": "sha256:" + "a" * 64}}
    assert images(unhosted) == {"mirror.example:5000/team/operator@sha256:" + "a" * 64}
