"""The in-cluster steps of .github/workflows/e2e.yaml are the ones `make e2e-in-cluster` runs on
the local plane's real node: the same script (hack/e2e-in-cluster.sh), the same steps, in the same
order. So the install and the suite that run here with the real images on a real kubelet are the
workflow's; only the image build (buildx there, BuildKit from its Go module here) and the
cluster (kind there) differ.
"""

from __future__ import annotations

import subprocess
from typing import Any

import yaml

from e2e.charts import CHARTS
from e2e.cluster import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "e2e.yaml"
INSTALL_SCRIPT = "hack/e2e-install.sh"
SCRIPT = "hack/e2e-in-cluster.sh"
CHART_NAMES = [spec.name for spec in CHARTS.values()]


def _workflow() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(WORKFLOW.read_text())
    return loaded


def _steps(job: str) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = _workflow()["jobs"][job]["steps"]
    return steps


STEPS = ["load", "install-previous", "upgrade", "test", "uninstall", "plain"]


def _script_steps(text: str) -> list[str]:
    return [
        line.split(SCRIPT, 1)[1].split()[0]
        for line in text.splitlines()
        if SCRIPT in line and not line.lstrip().startswith("#")
    ]


def test_the_workflow_builds_then_runs_the_scripts_steps_in_order() -> None:
    """Each chart's image is built under the name the script loads; then load, the previous
    release's install, the upgrade, test, the uninstall and the plain install, each by the
    script, each once, in that order."""
    steps = _steps("e2e")
    image = "${{ env.IMAGE_PREFIX }}/%s:${{ env.IMAGE_TAG }}"
    builds = {
        s["with"]["target"]: s["with"] for s in steps if "build-push-action" in s.get("uses", "")
    }
    assert set(builds) == set(CHART_NAMES)
    for chart, build in builds.items():
        assert build["tags"] == image % chart
        assert build["load"] is True
    runs = "\n".join(s.get("run", "") for s in steps)
    assert _script_steps(runs) == STEPS
    env = _workflow()["env"]
    assert {"IMAGE_PREFIX", "IMAGE_TAG", "KIND_CLUSTER"} <= set(env)


def test_make_runs_the_same_steps_in_the_same_order() -> None:
    makefile = (ROOT / "Makefile").read_text()
    target = makefile[makefile.index("\ne2e-in-cluster:") :].split("\n\n", 1)[0]
    assert _script_steps(target) == STEPS


def test_install_script_refuses_to_guess_its_arguments() -> None:
    done = subprocess.run(
        [str(ROOT / INSTALL_SCRIPT), "only-a-prefix"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    assert "usage:" in done.stderr


OLM_SCRIPT = "hack/e2e-olm.sh"


def _olm_steps(text: str) -> list[str]:
    return [
        line.split(OLM_SCRIPT, 1)[1].split()[0]
        for line in text.splitlines()
        if OLM_SCRIPT in line and not line.lstrip().startswith("#")
    ]


def test_the_olm_job_runs_the_steps_make_e2e_olm_runs() -> None:
    """The OLM job (kind, upstream OLM images) and `make e2e-olm` (the real node, images from
    the plane's registry) install, subscribe, upgrade and test with the same script, in the same
    order."""
    runs = "\n".join(s.get("run", "") for s in _steps("olm"))
    assert _olm_steps(runs) == ["install", "subscribe", "upgrade", "test"]
    makefile = (ROOT / "Makefile").read_text()
    target = makefile[makefile.index("\ne2e-olm:") :].split("\n\n", 1)[0]
    assert _olm_steps(target) == ["publish", "install", "subscribe", "upgrade", "test", "uninstall"]
