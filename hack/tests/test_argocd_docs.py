"""docs/argocd.md gives Argo CD's argocd-cm block with docs/argocd/health.lua, unchanged, for
each operator's own kind (the first CRD of its entry in operators/operators.toml)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from opsuite_packaging.operators import OPERATORS

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "argocd.md"
SCRIPT = ROOT / "docs" / "argocd" / "health.lua"


def _block() -> dict[str, str]:
    (block,) = re.findall(r"```yaml\n(.*?)```", PAGE.read_text(), re.DOTALL)
    data: dict[str, str] = yaml.safe_load(block)["data"]
    return data


def test_the_page_gives_the_script_for_each_operators_kind() -> None:
    keys = set()
    for op in OPERATORS:
        crd = yaml.safe_load((op.chart / "crds" / f"{op.crds[0]}.yaml").read_text())
        keys.add(
            f"resource.customizations.health.{crd['spec']['group']}_{crd['spec']['names']['kind']}"
        )
    data = _block()
    assert set(data) == keys
    for key in keys:
        assert data[key] == SCRIPT.read_text(), key
