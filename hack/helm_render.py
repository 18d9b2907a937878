"""``helm template`` of a chart in charts/ with the pinned helm (``hack/build-tools.sh helm``):
the one way the checks that read the rendered charts (hack/tests, hack/kube_score.py) render
them, with values as a document on stdin, ``--set`` pairs, or both."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from opsuite_packaging.bundle import rendered_objects

ROOT = Path(__file__).resolve().parents[1]
HELM = ROOT / ".local" / "bin" / "helm"

JSON = dict[str, Any]


class HelmError(RuntimeError):
    """``helm template`` refused the chart or its values (the message is helm's)."""


def helm_template(
    chart: str,
    *set_values: str,
    values: Mapping[str, Any] | None = None,
    release: str = "r",
    namespace: str = "ns",
    kube_version: str | None = None,
    skip_tests: bool = False,
) -> str:
    """The manifest stream of ``charts/<chart>``; ``set_values`` are ``--set`` pairs, applied
    over ``values``; ``kube_version`` is what ``.Capabilities`` reports (default: helm's own)."""
    if not HELM.exists():
        raise HelmError(f"{HELM} missing: run hack/build-tools.sh helm")
    command = [str(HELM), "template", release, str(ROOT / "charts" / chart), "-n", namespace]
    if values is not None:
        command += ["--values", "-"]
    for pair in set_values:
        command += ["--set", pair]
    if kube_version:
        command += ["--kube-version", kube_version]
    if skip_tests:
        command.append("--skip-tests")
    done = subprocess.run(
        command,
        input=None if values is None else json.dumps(values),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise HelmError(f"{' '.join(command[1:])}: {done.stderr.strip()}")
    return done.stdout


def render(
    chart: str,
    *set_values: str,
    values: Mapping[str, Any] | None = None,
    release: str = "r",
    namespace: str = "ns",
    kube_version: str | None = None,
    skip_tests: bool = False,
) -> list[JSON]:
    """The objects :func:`helm_template` renders (same arguments)."""
    stream = helm_template(
        chart,
        *set_values,
        values=values,
        release=release,
        namespace=namespace,
        kube_version=kube_version,
        skip_tests=skip_tests,
    )
    return list(rendered_objects(stream))
