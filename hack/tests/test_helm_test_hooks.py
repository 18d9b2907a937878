"""Each chart's `helm test` hooks as `helm template` renders them: a Pod in the operator's own
image that passes Pod Security "restricted", runs the shared check script against the operator's
pods and CRD, and a ServiceAccount allowed exactly that (list pods here, get the one CRD)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from helm_render import HELM, ROOT, render

from opsuite_packaging.bundle import find
from opsuite_packaging.operators import OPERATORS

TEST_HOOK = "test"
CHART_SPECS = {
    s.name: s for s in (importlib.import_module(op.manifests).CHART_SPEC for op in OPERATORS)
}


def _hooks(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        o
        for o in objects
        if (o["metadata"].get("annotations") or {}).get("helm.sh/hook") == TEST_HOOK
    ]


@pytest.mark.parametrize("chart", sorted(CHART_SPECS))
def test_test_pod_checks_the_operator_in_its_own_image(chart: str) -> None:
    objects = render(chart)
    hooks = _hooks(objects)
    (pod,) = find(hooks, "Pod")
    (deployment,) = find(objects, "Deployment")
    operator = deployment["spec"]["template"]["spec"]
    (container,) = pod["spec"]["containers"]
    assert container["image"] == operator["containers"][0]["image"]
    python, flag, script, *args = container["command"]
    assert (python, flag) == ("/opt/venv/bin/python", "-c")
    assert script == (ROOT / "shared" / "opsuite_packaging" / "helm_test.py").read_text()
    selector = ",".join(
        f"{k}={v}" for k, v in deployment["spec"]["selector"]["matchLabels"].items()
    )
    assert args == [
        "--namespace=ns",
        f"--selector={selector}",
        f"--crd={CHART_SPECS[chart].crd_name}",
    ]
    # The test pod is not one of the operator's pods (Service, PodDisruptionBudget, the check).
    labels = pod["metadata"]["labels"]
    assert not all(
        labels.get(k) == v for k, v in deployment["spec"]["selector"]["matchLabels"].items()
    )


@pytest.mark.parametrize("chart", sorted(CHART_SPECS))
def test_test_pod_passes_restricted(chart: str) -> None:
    (pod,) = find(_hooks(render(chart)), "Pod")
    spec = pod["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = spec["containers"]
    context = container["securityContext"]
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert spec["restartPolicy"] == "Never"


def test_test_pod_follows_the_operators_placement() -> None:
    objects = render("podset-operator", values={"nodeSelector": {"real": "true"}})
    (pod,) = find(_hooks(objects), "Pod")
    assert pod["spec"]["nodeSelector"] == {"real": "true"}


@pytest.mark.parametrize("chart", sorted(CHART_SPECS))
def test_test_account_may_only_list_pods_and_get_the_crd(chart: str) -> None:
    hooks = _hooks(render(chart))
    (pod,) = find(hooks, "Pod")
    account = pod["spec"]["serviceAccountName"]
    assert [a["metadata"]["name"] for a in find(hooks, "ServiceAccount")] == [account]
    # `helm test --logs` reads a pod's logs by each test hook's name, whatever its kind.
    assert {hook["metadata"]["name"] for hook in hooks} == {pod["metadata"]["name"]}
    (role,) = find(hooks, "Role")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]
    (cluster_role,) = find(hooks, "ClusterRole")
    assert cluster_role["rules"] == [
        {
            "apiGroups": ["apiextensions.k8s.io"],
            "resources": ["customresourcedefinitions"],
            "resourceNames": [CHART_SPECS[chart].crd_name],
            "verbs": ["get"],
        }
    ]
    for binding in find(hooks, "RoleBinding") + find(hooks, "ClusterRoleBinding"):
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": account, "namespace": "ns"}
        ]
    # RBAC first (lower weight), and gone once the test ran, passed or failed (a failed test
    # leaves no ClusterRole behind). A passed test's Pod goes too (Helm does not track hooks,
    # so `helm uninstall` would leave it); a failed one stays for its logs until the next run.
    for obj in hooks:
        policy = obj["metadata"]["annotations"]["helm.sh/hook-delete-policy"]
        if obj["kind"] == "Pod":
            assert policy == "before-hook-creation,hook-succeeded"
        else:
            assert obj["metadata"]["annotations"]["helm.sh/hook-weight"] == "-1"
            assert policy == "before-hook-creation,hook-succeeded,hook-failed"


@pytest.mark.parametrize("chart", sorted(CHART_SPECS))
def test_helmignore_keeps_leftovers_out_of_the_package(chart: str, tmp_path: Path) -> None:
    source = tmp_path / chart
    subprocess.run(["cp", "-r", str(ROOT / "charts" / chart), str(source)], check=True)
    (source / "templates" / "deployment.yaml.swp").write_text("x")
    (source / "files" / "__pycache__").mkdir()
    (source / "files" / "__pycache__" / "helm_test.cpython-311.pyc").write_text("x")
    done = subprocess.run(
        [str(HELM), "package", str(source), "--destination", str(tmp_path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (package,) = tmp_path.glob("*.tgz")
    names = subprocess.run(["tar", "tzf", str(package)], capture_output=True, text=True).stdout
    assert f"{chart}/files/helm_test.py" in names
    assert ".swp" not in names
    assert "__pycache__" not in names
