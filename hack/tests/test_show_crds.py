"""`helm show crds <chart> | kubectl apply --server-side -f -` (the charts' upgrade command)
applies every CRD of the chart: helm concatenates the files of crds/ as they are, so each must
start its own YAML document, or a chart with two CRDs hands kubectl only the last one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from helm_render import HELM

from opsuite_packaging.operators import OPERATORS, Operator


@pytest.mark.parametrize("op", OPERATORS, ids=lambda op: op.image)
def test_helm_show_crds_yields_every_crd_of_the_chart(op: Operator) -> None:
    if not HELM.exists():
        pytest.skip(f"{HELM} missing: run hack/build-tools.sh helm")
    shown = subprocess.run(
        [str(HELM), "show", "crds", str(op.chart)], capture_output=True, text=True, check=True
    ).stdout
    names = [d["metadata"]["name"] for d in yaml.safe_load_all(shown) if d]
    assert names == sorted(op.crds), names
