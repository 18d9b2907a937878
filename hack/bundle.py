"""Generate the OLM bundles (bundle/<chart>/) and the file-based catalog (catalog/), or check them.

    python hack/bundle.py write   # make bundle
    python hack/bundle.py check   # make verify: exit 1 listing stale, missing or extra files

Sources: each operator's ``manifests`` module (CRD, SAMPLES, CHART_SPEC, BUNDLE_TEXT), its
chart under charts/ rendered by ``helm template`` with the default values (Deployment, metrics
Service, metrics-reader ClusterRole), pyproject's version and docs/assets/opsuite-icon.svg. Each
catalog bundle entry is what ``opm render`` makes of the bundle directory. The CSV's createdAt is
the one on disk while nothing else in the CSV changed, else the time of the run. helm and opm come
from ``make tools``.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
import tempfile
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import yaml

from opsuite_packaging.bundle import (
    BUNDLE_IMAGE_TEMPLATE,
    JSON,
    SUGGESTED_NAMESPACE,
    BundleInputs,
    bundle_files,
    catalog_yaml,
    csv_path,
    find,
    rendered_objects,
)
from opsuite_packaging.chart_values import CHART_REPOSITORY, IMAGE_REGISTRY
from opsuite_packaging.crd import build_crd
from opsuite_packaging.generated import run

ROOT = Path(__file__).resolve().parent.parent
ICON = ROOT / "docs" / "assets" / "opsuite-icon.svg"
BIN = ROOT / ".local" / "bin"
READER = "-metrics-reader"
"""The suffix of the chart's metrics-reader ClusterRole, which the bundle ships too."""
KUBE_VERSION = "1.30.0"
"""The Kubernetes version charts are rendered for (the CSV's minKubeVersion)."""

OPERATORS = (
    "podset_manifests",
    "configmapsync_manifests",
    "poddebugger_manifests",
)
"""Each operator's manifests module: CRD, SAMPLES, CHART_SPEC and BUNDLE_TEXT."""


def _tool(name: str) -> str:
    found = shutil.which(name) or (str(BIN / name) if (BIN / name).exists() else None)
    if found is None:
        sys.exit(f"{name} not found: run `make tools`")
    return found


def _run(*command: str) -> str:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stderr}")
    return done.stdout


def _inputs(module: ModuleType, version: str, icon: bytes) -> tuple[BundleInputs, list[JSON]]:
    spec = module.CHART_SPEC
    rendered = list(
        rendered_objects(
            _run(
                _tool("helm"),
                "template",
                spec.name,
                str(ROOT / "charts" / spec.name),
                "--namespace",
                SUGGESTED_NAMESPACE,
                "--kube-version",
                KUBE_VERSION,
            )
        )
    )
    (deployment,) = find(rendered, "Deployment")
    readers = [r for r in find(rendered, "ClusterRole") if r["metadata"]["name"].endswith(READER)]
    inputs = BundleInputs(
        spec=spec,
        text=module.BUNDLE_TEXT,
        version=version,
        chart=yaml.safe_load((ROOT / "charts" / spec.name / "Chart.yaml").read_text()),
        crds=[build_crd(d) for d in (module.CRD, *getattr(module, "EXTRA_CRDS", ()))],
        deployment=deployment,
        samples=module.SAMPLES,
        icon_svg=icon,
        chart_repository=CHART_REPOSITORY,
    )
    return inputs, find(rendered, "Service") + readers


def _previous_csv(package: str) -> JSON | None:
    """The CSV on disk, whose createdAt is kept while nothing else changed."""
    path = ROOT / "bundle" / package / csv_path(package)
    if not path.exists():
        return None
    csv = yaml.safe_load(path.read_text())
    return csv if isinstance(csv, dict) else None


def expected_files() -> dict[Path, str]:
    """Every generated file of bundle/ and catalog/ with its expected content."""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    icon = ICON.read_bytes()
    image_template = BUNDLE_IMAGE_TEMPLATE.format(
        registry=IMAGE_REGISTRY, package="{{.Package}}", version="{{.Version}}"
    )
    files: dict[Path, str] = {}
    now = datetime.now(UTC)
    with tempfile.TemporaryDirectory() as scratch:
        for module_name in OPERATORS:
            inputs, others = _inputs(importlib.import_module(module_name), version, icon)
            package = inputs.spec.name
            generated = bundle_files(inputs, others, _previous_csv(package), now)
            for relative, content in generated.items():
                files[ROOT / "bundle" / package / relative] = content
                path = Path(scratch) / package / relative
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(content)
            rendered = _run(
                _tool("opm"),
                "render",
                str(Path(scratch) / package),
                "--alpha-image-ref-template",
                image_template,
                "--output",
                "yaml",
            )
            catalog = catalog_yaml(inputs, list(rendered_objects(rendered)))
            files[ROOT / "catalog" / package / "catalog.yaml"] = catalog
    return files


def _generated_on_disk() -> set[Path]:
    present = set()
    for directory in ("bundle", "catalog"):
        for path in (ROOT / directory).rglob("*"):
            if path.is_file() and path.name != "README.md":
                present.add(path)
    return present


def main() -> int:
    return run(
        __doc__.splitlines()[0],
        expected_files,
        root=ROOT,
        make_target="bundle",
        what="bundle and catalog files",
        on_disk=_generated_on_disk,
    )


if __name__ == "__main__":
    sys.exit(main())
