"""The generated OLM bundles and catalog, checked by the operator-framework's own validators, and
their RBAC compared with the charts'.

``bundle-validate`` runs what ``operator-sdk bundle validate --select-optional
suite=operatorframework`` runs (hack/tools/bundle-validate); ``opm validate`` checks the catalog.
Both come from ``make tools``.
"""

from __future__ import annotations

import importlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from helm_render import render

from opsuite_packaging.bundle import (
    CHANNEL,
    CREATED_AT,
    SCORECARD_IMAGE,
    find,
    is_rfc3339,
)
from opsuite_packaging.chart import MIN_KUBE_VERSION, ChartSpec
from opsuite_packaging.operators import OPERATORS

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / ".local" / "bin"
SPECS = {
    spec.name: spec
    for spec in (importlib.import_module(op.manifests).CHART_SPEC for op in OPERATORS)
}
K8S_VERSION = "1.36"
"""Kubernetes version the deprecated-API checks look at (the local plane's)."""


def _tool(name: str) -> str:
    path = shutil.which(name) or str(BIN / name)
    assert Path(path).exists(), f"{name} missing: run `make tools`"
    return path


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, check=False)


def _validate(bundle: Path) -> subprocess.CompletedProcess[str]:
    return _run(_tool("bundle-validate"), "-k8s-version", K8S_VERSION, str(bundle))


def _csv(package: str) -> dict[str, Any]:
    path = ROOT / "bundle" / package / "manifests" / f"{package}.clusterserviceversion.yaml"
    csv: dict[str, Any] = yaml.safe_load(path.read_text())
    return csv


USERS_ROLES = ("-metrics-reader", "-view", "-edit")
"""Suffixes of the chart's ClusterRoles for people, not for the operator."""


def _rules(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The rules of the operator's own (Cluster)Roles of ``kind``."""
    return [
        rule
        for obj in find(objects, kind)
        if not obj["metadata"]["name"].endswith(USERS_ROLES)
        for rule in obj["rules"]
    ]


def _key(rule: dict[str, Any]) -> str:
    return json.dumps(rule, sort_keys=True)


def _chart(spec: ChartSpec, *set_values: str) -> list[dict[str, Any]]:
    return render(
        spec.name,
        *set_values,
        release=spec.name,
        namespace="opsuite-system",
        kube_version=MIN_KUBE_VERSION,
        skip_tests=True,  # the `helm test` hooks' RBAC is the test's, not the operator's
    )


@pytest.mark.parametrize("package", sorted(SPECS))
def test_bundle_passes_the_operator_framework_validators_without_a_warning(package: str) -> None:
    done = _validate(ROOT / "bundle" / package)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == f"{ROOT / 'bundle' / package}: no errors, no warnings"


def test_a_warning_fails_validation(tmp_path: Path) -> None:
    """An "alpha" channel only draws a good-practices warning; that alone must fail."""
    bundle = tmp_path / "podset-operator"
    shutil.copytree(ROOT / "bundle" / "podset-operator", bundle)
    annotations = bundle / "metadata" / "annotations.yaml"
    annotations.write_text(annotations.read_text().replace(f": {CHANNEL}\n", ": alpha\n"))
    done = _validate(bundle)
    assert done.returncode == 1
    assert "WARNING" in done.stdout, done.stdout
    assert '["alpha"] are not following the recommended naming convention' in done.stdout
    assert "ERROR" not in done.stdout, done.stdout


def test_catalog_passes_opm_validate() -> None:
    done = _run(_tool("opm"), "validate", str(ROOT / "catalog"))
    assert done.returncode == 0, done.stderr


def test_opm_validate_rejects_a_bundle_in_no_channel(tmp_path: Path) -> None:
    catalog = tmp_path / "catalog"
    shutil.copytree(ROOT / "catalog", catalog)
    path = catalog / "podset-operator" / "catalog.yaml"
    path.write_text(path.read_text().replace("- name: podset-operator.v", "- name: missing.v", 1))
    done = _run(_tool("opm"), "validate", str(catalog))
    assert done.returncode != 0
    assert "not found in any channel entries" in done.stderr


@pytest.mark.parametrize("package", sorted(SPECS))
def test_csv_rbac_is_the_charts_rbac_in_both_chart_modes(package: str) -> None:
    """All namespaces: the chart's ClusterRole + leader-election Role hold exactly the CSV's
    rules. Listed namespaces: each Role holds exactly the CSV's namespaced permissions but
    leader election, and the ClusterRole exactly its clusterPermissions."""
    strategy = _csv(package)["spec"]["install"]["spec"]
    permissions = [r for p in strategy["permissions"] for r in p["rules"]]
    cluster_permissions = [r for p in strategy.get("clusterPermissions", []) for r in p["rules"]]
    every = _chart(SPECS[package])
    csv_rules = sorted(map(_key, permissions + cluster_permissions))
    assert sorted(map(_key, _rules(every, "ClusterRole") + _rules(every, "Role"))) == csv_rules

    listed = _chart(SPECS[package], "watchNamespaces={team-a}")
    election = [r for r in _rules(listed, "Role") if r["apiGroups"] == ["coordination.k8s.io"]]
    served = [r for r in _rules(listed, "Role") if r not in election]
    assert sorted(map(_key, served + election)) == sorted(map(_key, permissions))
    assert sorted(map(_key, _rules(listed, "ClusterRole"))) == sorted(
        map(_key, cluster_permissions)
    )


@pytest.mark.parametrize("package", sorted(SPECS))
def test_bundle_ships_the_charts_metrics_reader_role(package: str) -> None:
    """Secure metrics are on in the bundle too, with the role to grant to scrapers."""
    (reader,) = [
        r
        for r in find(_chart(SPECS[package]), "ClusterRole")
        if r["metadata"]["name"].endswith("-metrics-reader")
    ]
    path = ROOT / "bundle" / package / "manifests"
    shipped = yaml.safe_load(
        (
            path / f"{package}-metrics-reader_rbac.authorization.k8s.io_v1_clusterrole.yaml"
        ).read_text()
    )
    assert (
        shipped["rules"] == reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    )
    (entry,) = _csv(package)["spec"]["install"]["spec"]["deployments"]
    env = entry["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "OPSUITE_METRICS_SECURE", "value": "true"} in env


@pytest.mark.parametrize("package", sorted(SPECS))
def test_csv_deployment_is_the_charts_deployment(package: str) -> None:
    """The same pod spec but for the target-namespaces variable, the same selector."""
    (chart,) = find(_chart(SPECS[package]), "Deployment")
    (entry,) = _csv(package)["spec"]["install"]["spec"]["deployments"]
    ours, theirs = entry["spec"]["template"]["spec"], chart["spec"]["template"]["spec"]
    env = ours["containers"][0]["env"]
    assert env[-1]["name"] == "OPSUITE_NAMESPACE"
    ours["containers"][0]["env"] = env[:-1]
    assert ours == theirs
    assert entry["spec"]["selector"] == chart["spec"]["selector"]
    assert entry["name"] == chart["metadata"]["name"]


@pytest.mark.parametrize("package", sorted(SPECS))
def test_csv_has_a_valid_created_at(package: str) -> None:
    """community-operators requires createdAt; make bundle keeps it while the CSV is unchanged."""
    assert is_rfc3339(_csv(package)["metadata"]["annotations"][CREATED_AT])


def test_scorecard_image_is_the_pinned_operator_sdk_release() -> None:
    go_mod = (ROOT / "hack" / "tools" / "operator-sdk" / "go.mod").read_text()
    version = re.search(r"github\.com/operator-framework/operator-sdk (v\S+)", go_mod)
    assert version is not None
    assert SCORECARD_IMAGE.endswith(f":{version.group(1)}")


@pytest.mark.parametrize("package", sorted(SPECS))
def test_no_fixed_uid_so_that_openshift_assigns_one(package: str) -> None:
    """OpenShift's restricted-v2 assigns a uid from the namespace's range and refuses a fixed
    one; the image's USER (65532) applies elsewhere, and runAsNonRoot still holds it to that."""
    (entry,) = _csv(package)["spec"]["install"]["spec"]["deployments"]
    pod = entry["spec"]["template"]["spec"]
    contexts = [pod["securityContext"], *(c.get("securityContext", {}) for c in pod["containers"])]
    for context in contexts:
        assert not {"runAsUser", "runAsGroup"} & set(context), context
    assert pod["securityContext"]["runAsNonRoot"] is True


OPENSHIFT_FEATURES = (
    "disconnected", "fips-compliant", "proxy-aware", "tls-profiles", "token-auth-aws",
    "token-auth-azure", "token-auth-gcp", "cnf", "cni", "csi",
)  # fmt: skip
"""The infrastructure features OpenShift's console shows for an operator, each "true" or
"false" (features.operators.openshift.io/…)."""


@pytest.mark.parametrize("package", sorted(SPECS))
def test_csv_says_which_openshift_features_it_has(package: str) -> None:
    annotations = _csv(package)["metadata"]["annotations"]
    prefix = "features.operators.openshift.io/"
    features = {k.removeprefix(prefix): v for k, v in annotations.items() if k.startswith(prefix)}
    assert sorted(features) == sorted(OPENSHIFT_FEATURES)
    # Not disconnected yet: the CSV's Deployment names its image by tag, which an
    # ImageDigestMirrorSet does not redirect.
    assert features["disconnected"] == "false"
    assert set(features.values()) <= {"true", "false"}


@pytest.mark.parametrize("package", sorted(SPECS))
def test_bundle_names_the_openshift_releases_of_its_kubernetes(package: str) -> None:
    """OpenShift 4.21 is the first on Kubernetes 1.34, the oldest the bundle claims."""
    path = ROOT / "bundle" / package / "metadata" / "annotations.yaml"
    annotations = yaml.safe_load(path.read_text())["annotations"]
    assert MIN_KUBE_VERSION == "1.34.0"
    assert annotations["com.redhat.openshift.versions"] == "v4.21"
    dockerfile = (ROOT / "bundle" / package / "bundle.Dockerfile").read_text()
    assert "LABEL com.redhat.openshift.versions=v4.21\n" in dockerfile
