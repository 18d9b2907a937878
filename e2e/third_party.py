"""CRDs of other projects, taken from their pinned Go modules (no release downloads here).

Go's module proxy serves every tagged version of a repository as a module zip, so a CRD file
in the repository comes with the module. The zip's hash is pinned and checked: the checksum
database has no entry for some of these modules, so it is switched off for the download and
the pin takes its place.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

SERVICE_MONITOR_CRD = (
    "github.com/prometheus-operator/prometheus-operator",
    "v0.86.1",
    "h1:pHUuiRErcFb3nFDox7RxoxpEN0FyT24GtYOkr2GBu04=",
    "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml",
)
"""prometheus-operator's ServiceMonitor CRD: module, version, module hash, path in the module."""
PROMETHEUS_RULE_CRD = (
    *SERVICE_MONITOR_CRD[:3],
    "example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml",
)
"""Its PrometheusRule CRD, from the same module."""


def module_file(module: str, version: str, module_hash: str, path: str) -> Path:
    """A file of a Go module at a pinned version, after checking the module's hash."""
    env = {**os.environ, "GOSUMDB": "off", "GOFLAGS": "-mod=mod"}
    with tempfile.TemporaryDirectory() as outside_any_module:
        out = subprocess.run(
            ["go", "mod", "download", "-json", f"{module}@{version}"],
            cwd=outside_any_module,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    info = json.loads(out.stdout or "{}")
    if out.returncode != 0 or "Error" in info:
        raise RuntimeError(f"go mod download {module}@{version}: {info or out.stderr}")
    if info["Sum"] != module_hash:
        raise RuntimeError(f"{module}@{version} has hash {info['Sum']}, pinned {module_hash}")
    return Path(info["Dir"]) / path
