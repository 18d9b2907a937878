"""The previous release the upgrade tests start from (opsuite_packaging/previous_release.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from opsuite_packaging.previous_release import (
    ADDED_FIELDS,
    PREVIOUS_VERSION,
    without_spec_field,
    write_charts,
)

ROOT = Path(__file__).resolve().parents[2]


def _spec(crd: dict) -> dict:  # type: ignore[type-arg]
    spec: dict = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]  # type: ignore[type-arg]
    return spec


def test_each_chart_loses_exactly_its_added_field_and_the_rules_naming_it(tmp_path: Path) -> None:
    for chart_dir in write_charts(tmp_path):
        crd_name, field = ADDED_FIELDS[chart_dir.name]
        meta = yaml.safe_load((chart_dir / "Chart.yaml").read_text())
        assert (meta["version"], meta["appVersion"]) == (PREVIOUS_VERSION, PREVIOUS_VERSION)
        now = yaml.safe_load(
            (ROOT / "charts" / chart_dir.name / "crds" / f"{crd_name}.yaml").read_text()
        )
        before = yaml.safe_load((chart_dir / "crds" / f"{crd_name}.yaml").read_text())
        assert set(_spec(now)["properties"]) - set(_spec(before)["properties"]) == {field}
        rules = [r["rule"] for r in _spec(before).get("x-kubernetes-validations", ())]
        assert not [r for r in rules if field in r]
        kept = [
            r["rule"]
            for r in _spec(now).get("x-kubernetes-validations", ())
            if field not in r["rule"]
        ]
        assert rules == kept


def test_a_field_that_is_missing_or_required_is_refused() -> None:
    crd = yaml.safe_load(
        (ROOT / "charts" / "podset-operator" / "crds" / "podsets.apps.opsuite.dev.yaml").read_text()
    )
    with pytest.raises(ValueError, match="no spec field"):
        without_spec_field(crd, "noSuchField")
    with pytest.raises(ValueError, match="required"):
        without_spec_field(crd, "template")
