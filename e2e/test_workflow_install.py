"""The install step of .github/workflows/e2e.yaml, run here: the workflow's own ``run`` line (it
calls hack/e2e-install.sh) against the local plane, with the workflow's local image names.

kwok makes the operator pods Ready without pulling an image, so ``helm install --wait`` completes
as on kind; the Deployments are then checked for the image the workflow built and loaded, and
for the flags the in-cluster e2e run relies on. The releases go into a namespace and under names
of their own, so the session's chart identities (e2e.charts) are left alone.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.charts import CHARTS, helm, helm_binary
from e2e.cluster import ROOT, Cluster

WORKFLOW = ROOT / ".github" / "workflows" / "e2e.yaml"
INSTALL_SCRIPT = "hack/e2e-install.sh"
CHART_NAMES = [spec.name for spec in CHARTS.values()]


def _workflow() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(WORKFLOW.read_text())
    return loaded


def _steps(job: str) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = _workflow()["jobs"][job]["steps"]
    return steps


def _install_step() -> dict[str, Any]:
    (step,) = [s for s in _steps("e2e") if INSTALL_SCRIPT in s.get("run", "")]
    return step


def test_the_workflow_builds_loads_installs_and_tests_the_same_images() -> None:
    """Each chart's image is built, loaded into kind and installed under one name; the suite
    then runs with the operators in the cluster."""
    steps = _steps("e2e")
    image = "${{ env.IMAGE_PREFIX }}/%s:${{ env.IMAGE_TAG }}"
    builds = {
        s["with"]["target"]: s["with"] for s in steps if "build-push-action" in s.get("uses", "")
    }
    assert set(builds) == set(CHART_NAMES)
    for chart, build in builds.items():
        assert build["tags"] == image % chart
        assert build["load"] is True
        assert build["cache-from"] == f"type=gha,scope={chart}"
    (load,) = [s["run"] for s in steps if "kind load docker-image" in s.get("run", "")]
    assert '"$IMAGE_PREFIX/$chart:$IMAGE_TAG"' in load
    assert all(chart in load for chart in CHART_NAMES)
    assert _install_step()["run"].split() == [INSTALL_SCRIPT, '"$IMAGE_PREFIX"', '"$IMAGE_TAG"']
    (suite,) = [s for s in steps if "pytest e2e" in s.get("run", "")]
    assert suite["env"]["E2E_OPERATORS"] == "in-cluster"
    names = [s.get("name", s.get("uses", s.get("run"))) for s in steps]
    assert names.index(_install_step()["name"]) < names.index(suite["name"])


@pytest.fixture
def release_namespace(cluster: Cluster, api: client.ApiClient) -> Iterator[str]:
    """A namespace for the workflow's releases; the releases and it are removed afterwards."""
    if cluster.kind != "local":
        pytest.skip("needs kwok to run pods of images no node has; e2e.yaml runs this step itself")
    name = f"wf-{uuid.uuid4().hex[:6]}"
    yield name
    for chart in CHART_NAMES:
        try:
            helm(cluster, "uninstall", f"{name}-{chart}", "-n", name, "--wait")
        except RuntimeError as exc:
            if "not found" not in str(exc):
                raise
    try:
        client.CoreV1Api(api).delete_namespace(name)
    except ApiException as exc:
        if exc.status != 404:
            raise


def test_the_workflows_install_step_runs_on_the_local_plane(
    cluster: Cluster, api: client.ApiClient, release_namespace: str
) -> None:
    prefix = _workflow()["env"]["IMAGE_PREFIX"]
    tag = f"e2e-{uuid.uuid4().hex[:6]}"  # the workflow's is ci-<commit>
    env = {
        **os.environ,
        "IMAGE_PREFIX": prefix,
        "IMAGE_TAG": tag,
        "HELM": helm_binary(),
        "KUBECONFIG": str(cluster.kubeconfig),
        "E2E_NAMESPACE": release_namespace,
        "E2E_RELEASE_PREFIX": f"{release_namespace}-",
    }
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", _install_step()["run"]],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr
    apps = client.AppsV1Api(api)
    for chart in CHART_NAMES:
        deployment = apps.read_namespaced_deployment(
            f"{release_namespace}-{chart}", release_namespace
        )
        available = {c.type: c.status for c in deployment.status.conditions or []}
        assert available.get("Available") == "True", deployment.status
        assert deployment.status.ready_replicas == 1
        (container,) = deployment.spec.template.spec.containers
        assert container.image == f"{prefix}/{chart}:{tag}"
        assert container.image_pull_policy == "Never"
        assert "--log-level=debug" in container.args
        if chart == "pod-debugger-operator":
            assert "--allowed-image-prefix=busybox" in container.args
    # The cluster-wide admission policies stay off: the policy tests bind their own copies.
    policies = client.AdmissionregistrationV1Api(api).list_validating_admission_policy().items
    ours = [
        p.metadata.name
        for p in policies
        if (p.metadata.annotations or {}).get("meta.helm.sh/release-namespace") == release_namespace
    ]
    assert ours == []


def test_install_script_refuses_to_guess_its_arguments() -> None:
    done = subprocess.run(
        [str(ROOT / INSTALL_SCRIPT), "only-a-prefix"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    assert "usage:" in done.stderr
