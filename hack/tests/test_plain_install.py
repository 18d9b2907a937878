"""deploy/<chart>/install.yaml: what opsuite_packaging.plain_install makes of a chart's render."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from opsuite_packaging.chart_values import IMAGE_REGISTRY
from opsuite_packaging.operators import OPERATORS
from opsuite_packaging.plain_install import INSTALL, MUTATION, install_files

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import pin_digests

from bundle import project_version

ROOT = Path(__file__).resolve().parents[2]
LABELS = {
    "app.kubernetes.io/name": "demo",
    "app.kubernetes.io/managed-by": "Helm",
    "helm.sh/chart": "demo-1.0.0",
}
SELECTOR = {"app.kubernetes.io/name": "demo"}


def _deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "demo", "namespace": "ops", "labels": dict(LABELS)},
        "spec": {
            "selector": {"matchLabels": dict(SELECTOR)},
            "template": {"metadata": {"labels": dict(LABELS)}, "spec": {}},
        },
    }


def _policy(kind: str) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": "p"},
    }


MUTATIONS = [_policy("MutatingAdmissionPolicy"), _policy("MutatingAdmissionPolicyBinding")]


def _documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def test_the_namespace_comes_first_and_helm_labels_go() -> None:
    files = install_files("demo", "1.0.0", "ops", [_deployment()], [_deployment(), *MUTATIONS])
    namespace, deployment = _documents(files[INSTALL])
    assert namespace["kind"] == "Namespace"
    assert namespace["metadata"]["name"] == "ops"
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    for labels in (
        deployment["metadata"]["labels"],
        deployment["spec"]["template"]["metadata"]["labels"],
    ):
        assert "helm.sh/chart" not in labels
        assert labels["app.kubernetes.io/managed-by"] == "kubectl"
    assert deployment["spec"]["selector"]["matchLabels"] == SELECTOR
    assert [d["kind"] for d in _documents(files[MUTATION])] == [
        "MutatingAdmissionPolicy",
        "MutatingAdmissionPolicyBinding",
    ]


def test_hooks_and_a_mutation_in_the_main_render_are_refused() -> None:
    hook = _deployment()
    hook["metadata"]["annotations"] = {"helm.sh/hook": "test"}
    with pytest.raises(ValueError, match="hooks"):
        install_files("demo", "1.0.0", "ops", [hook], MUTATIONS)
    with pytest.raises(ValueError, match="MutatingAdmissionPolicy"):
        install_files("demo", "1.0.0", "ops", [_deployment(), *MUTATIONS], MUTATIONS)
    with pytest.raises(ValueError, match="no MutatingAdmissionPolicy"):
        install_files("demo", "1.0.0", "ops", [_deployment()], [_deployment()])


@pytest.mark.parametrize("chart", [op.image for op in OPERATORS])
def test_the_shipped_install_yaml_installs_everything_the_chart_does(chart: str) -> None:
    """Each shipped file: CRDs, the operator's identity and RBAC, its Deployment, its policies;
    no hook (helm test's Pod), no object left in another namespace."""
    documents = _documents((ROOT / "deploy" / chart / INSTALL).read_text())
    kinds = {d["kind"] for d in documents}
    assert {"Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole"} <= kinds
    assert {"ClusterRoleBinding", "Deployment", "ValidatingAdmissionPolicy"} <= kinds
    assert "Pod" not in kinds
    namespaces = {d["metadata"].get("namespace") for d in documents} - {None}
    assert namespaces == {documents[0]["metadata"]["name"]}


@pytest.mark.parametrize("chart", [op.image for op in OPERATORS])
def test_the_release_pins_only_the_operator_image(chart: str) -> None:
    """The release runs hack/pin_digests.py on deploy/: the one image the files name (the
    operator's, by its version's tag) becomes a digest reference."""
    seen: list[str] = []

    def resolve(reference: str) -> str:
        seen.append(reference)
        return "sha256:" + "0" * 64

    for path in sorted((ROOT / "deploy" / chart).glob("*.yaml")):
        pinned = pin_digests.pin_text(path.read_text(), resolve)
        assert ":" + "0" * 64 in pinned or path.name != INSTALL
    assert seen == [f"{IMAGE_REGISTRY}/{chart}:{project_version()}"]
