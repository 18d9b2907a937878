"""docs/argocd.md gives Argo CD's argocd-cm block with docs/argocd/health.lua, unchanged, for
each kind of every operator whose status has conditions (the CRDs of its entry in
operators/operators.toml; PodDebugger's DebugImagePolicy has none)."""

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
        for name in op.crds:
            spec = yaml.safe_load((op.chart / "crds" / f"{name}.yaml").read_text())["spec"]
            schema = spec["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
            if "conditions" in schema.get("status", {}).get("properties", {}):
                keys.add(f"resource.customizations.health.{spec['group']}_{spec['names']['kind']}")
    data = _block()
    assert set(data) == keys
    for key in keys:
        assert data[key] == SCRIPT.read_text(), key
