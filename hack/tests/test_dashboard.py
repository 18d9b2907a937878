"""The Grafana dashboard has panels per resource kind: every metric an operator exports of its
own (``opsuite_*``, from its ``metrics`` module) is in a panel, and every ``opsuite_*`` name a
panel queries is one an operator exports."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

from opsuite_common.metrics import REGISTRY
from opsuite_packaging.operators import OPERATORS

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "shared" / "dashboards" / "opsuite-operators.json"


def _exported() -> dict[str, set[str]]:
    """Per operator, the sample names of the opsuite_* families its metrics module registers
    (named for the operator or for one of its kinds)."""
    exported: dict[str, set[str]] = {}
    for op in OPERATORS:
        importlib.import_module(f"{op.package}.metrics")
    families = [f for f in REGISTRY.collect() if f.name.startswith("opsuite_")]
    for op in OPERATORS:
        # Its own name's, and each of its kinds' (ConfigMapSync's opsuite_secretsync_*).
        kinds = (crd.split(".")[0].removesuffix("s") for crd in op.crds)
        prefixes = tuple({f"opsuite_{op.name}_", *(f"opsuite_{kind}_" for kind in kinds)})
        names = exported.setdefault(op.name, set())
        for family in (f for f in families if f.name.startswith(prefixes)):
            if family.type == "counter":
                names.add(f"{family.name}_total")
            elif family.type == "histogram":
                names.add(f"{family.name}_bucket")
            else:
                names.add(family.name)
    return exported


def _queried() -> set[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    return {name for q in queries for name in re.findall(r"\bopsuite_\w+", q)}


def test_each_operators_own_metrics_have_a_panel() -> None:
    exported = _exported()
    queried = _queried()
    for operator, names in exported.items():
        assert names, f"{operator} exports no opsuite_ metric"
        assert names <= queried, f"{operator}: no panel for {sorted(names - queried)}"
    assert queried <= set().union(*exported.values())
