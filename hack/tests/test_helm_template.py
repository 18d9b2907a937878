"""`helm template` without a cluster, as Argo CD and CI pipelines run it: the charts render with
the Kubernetes version helm assumes (its client-go's, as a released helm is built), and their
kubeVersion guard still refuses an old cluster."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HELM = ROOT / ".local" / "bin" / "helm"
CHARTS = sorted(p.name for p in (ROOT / "charts").iterdir() if (p / "Chart.yaml").is_file())


def _helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(HELM), *args], capture_output=True, text=True, check=False)


def test_helm_is_built_as_upstream_releases_it() -> None:
    version = _helm("version", "--template", "{{.Version}}")
    go_mod = (ROOT / "hack" / "tools" / "helm" / "go.mod").read_text()
    assert version.stdout
    assert f"helm.sh/helm/v3 {version.stdout}" in go_mod


@pytest.mark.parametrize("chart", CHARTS)
def test_plain_helm_template_renders(chart: str) -> None:
    result = _helm("template", "release", str(ROOT / "charts" / chart))
    assert result.returncode == 0, result.stderr
    assert "kind: Deployment" in result.stdout


@pytest.mark.parametrize("chart", CHARTS)
def test_kube_version_guard_refuses_old_clusters(chart: str) -> None:
    result = _helm("template", "release", str(ROOT / "charts" / chart), "--kube-version", "1.33.9")
    assert result.returncode != 0
    assert "incompatible with Kubernetes v1.33.9" in result.stderr
