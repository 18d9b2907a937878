"""The previous release the upgrade tests start from: this tree at :data:`PREVIOUS_VERSION`, each
CRD without one optional spec field (the one :data:`ADDED_FIELDS` says this release added).

    python -m opsuite_packaging.previous_release charts DEST   write DEST/<chart>/ per chart

No earlier opsuite release exists yet, so the previous one is made from this tree: the same
templates and image, an older chart version and appVersion (the Deployment's pod template
carries both as labels, so an upgrade rolls the operator's pods) and an older CRD schema. The
Helm upgrade test (e2e/test_helm_upgrade.py) installs these charts; the OLM upgrade test's
previous bundles (hack/olm_images.py, hack/bundle.py) lack the same fields. Both then cross a
real CRD change: a field the older CRD prunes and the newer one keeps.
"""

from __future__ import annotations

import copy
import shutil
import sys
from pathlib import Path

import yaml

from opsuite_common.store import JSON
from opsuite_packaging.operators import OPERATORS

ROOT = Path(__file__).resolve().parents[2]
PREVIOUS_VERSION = "0.0.1"
"""The previous release's version (lower than pyproject's)."""
ADDED_FIELDS = {op.image: (op.crds[0], op.added_field) for op in OPERATORS}
"""Per chart: its CRD and the optional spec field this release added to it (the list of
operators says which)."""


def without_spec_field(crd: JSON, field: str) -> JSON:
    """``crd`` without the optional spec field ``field`` in any version, nor the CEL rules of
    the spec that name it (they would not compile without it)."""
    older = copy.deepcopy(crd)
    for version in older["spec"]["versions"]:
        spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
        if field not in spec.get("properties", {}):
            raise ValueError(f"{crd['metadata']['name']} has no spec field {field}")
        if field in spec.get("required", ()):
            raise ValueError(f"{crd['metadata']['name']}: {field} is required, not added")
        del spec["properties"][field]
        rules = [r for r in spec.get("x-kubernetes-validations", ()) if field not in r["rule"]]
        if rules:
            spec["x-kubernetes-validations"] = rules
        else:
            spec.pop("x-kubernetes-validations", None)
    return older


def write_charts(dest: Path, charts: Path = ROOT / "charts") -> list[Path]:
    """Write the previous release of each chart under ``dest``; the chart directories."""
    written = []
    for chart, (crd_name, field) in ADDED_FIELDS.items():
        target = dest / chart
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(charts / chart, target)
        meta = yaml.safe_load((target / "Chart.yaml").read_text())
        meta["version"] = meta["appVersion"] = PREVIOUS_VERSION
        (target / "Chart.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
        path = target / "crds" / f"{crd_name}.yaml"
        crd = yaml.safe_load(path.read_text())
        path.write_text(yaml.safe_dump(without_spec_field(crd, field), sort_keys=False))
        written.append(target)
    return written


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "charts":
        print(__doc__, file=sys.stderr)
        return 2
    for path in write_charts(Path(argv[1])):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
