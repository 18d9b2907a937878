"""Generate the OLM bundles (bundle/<chart>/), the file-based catalog (catalog/) and the plain
install manifests (deploy/<chart>/), or check them.

    python hack/bundle.py write   # make bundle
    python hack/bundle.py check   # make verify: exit 1 listing stale, missing or extra files

Sources: each operator's ``manifests`` module (CRD, SAMPLES, CHART_SPEC, BUNDLE_TEXT), its
chart under charts/ rendered by ``helm template`` with the default values (Deployment, metrics
Service, metrics-reader ClusterRole), pyproject's version and docs/assets/opsuite-icon.svg. Each
catalog bundle entry is what ``opm render`` makes of the bundle directory; deploy/<chart>/ holds
the chart rendered as plain manifests (opsuite_packaging/plain_install.py). The CSV's createdAt
is the one on disk while nothing else in the CSV changed, else the time of the run. helm and opm
come from ``make tools``.

The catalog keeps its channel's history: the bundles it holds of versions below pyproject's are
released and stay as they are, with their channel entries; pyproject's version is (re)generated
as the channel's head, replacing the newest of them and skipping every earlier version. Raising
the version thus adds an entry; a version below the catalog's newest is an error.
"""

from __future__ import annotations

import dataclasses
import importlib
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import yaml

from opsuite_common.store import JSON
from opsuite_packaging.bundle import (
    BUNDLE_IMAGE_TEMPLATE,
    SUGGESTED_NAMESPACE,
    BundleInputs,
    ChannelHistory,
    bundle_files,
    catalog_yaml,
    channel_history,
    csv_path,
    find,
    rendered_objects,
)
from opsuite_packaging.chart import MIN_KUBE_VERSION, ChartSpec
from opsuite_packaging.chart_values import CHART_REPOSITORY, IMAGE_REGISTRY
from opsuite_packaging.crd import build_crd
from opsuite_packaging.generated import run
from opsuite_packaging.operators import OPERATORS
from opsuite_packaging.plain_install import MUTATION_API, MUTATION_KUBE_VERSION, install_files
from opsuite_packaging.previous_release import without_spec_field

ROOT = Path(__file__).resolve().parent.parent
ICON = ROOT / "docs" / "assets" / "opsuite-icon.svg"
BIN = ROOT / ".local" / "bin"
READER = "-metrics-reader"
"""The suffix of the chart's metrics-reader ClusterRole, which the bundle ships too."""

MANIFESTS = tuple(op.manifests for op in OPERATORS)
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


def _chart_dir(spec: ChartSpec, version: str, scratch: Path) -> Path:
    """The chart as released at ``version``: charts/<chart> with its Chart.yaml for that
    version (the image tag and the version labels follow)."""
    chart = scratch / "charts" / spec.name
    shutil.copytree(ROOT / "charts" / spec.name, chart)
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    meta["version"] = meta["appVersion"] = version
    (chart / "Chart.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    return chart


def _template(
    spec: ChartSpec, chart_dir: Path, *flags: str, kube_version: str = MIN_KUBE_VERSION
) -> list[JSON]:
    """The chart's objects with its default values, as installed in the suggested namespace."""
    command = [_tool("helm"), "template", spec.name, str(chart_dir)]
    command += ["--namespace", SUGGESTED_NAMESPACE, "--kube-version", kube_version, *flags]
    return list(rendered_objects(_run(*command)))


def _inputs(
    module: ModuleType, version: str, icon: bytes, scratch: Path, without: str | None
) -> tuple[BundleInputs, list[JSON]]:
    spec = module.CHART_SPEC
    chart_dir = _chart_dir(spec, version, scratch)
    rendered = _template(spec, chart_dir)
    (deployment,) = find(rendered, "Deployment")
    readers = [r for r in find(rendered, "ClusterRole") if r["metadata"]["name"].endswith(READER)]
    crds = [build_crd(d) for d in (module.CRD, *getattr(module, "EXTRA_CRDS", ()))]
    if without is not None:
        crds[0] = without_spec_field(crds[0], without)
    inputs = BundleInputs(
        spec=spec,
        text=module.BUNDLE_TEXT,
        version=version,
        chart=yaml.safe_load((chart_dir / "Chart.yaml").read_text()),
        crds=crds,
        deployment=deployment,
        samples=module.SAMPLES,
        icon_svg=icon,
        chart_repository=CHART_REPOSITORY,
    )
    return inputs, find(rendered, "Service") + readers


def _previous_csv(out: Path, package: str) -> JSON | None:
    """The CSV on disk under ``out``, whose createdAt is kept while nothing else changed."""
    path = out / "bundle" / package / csv_path(package)
    if not path.exists():
        return None
    csv = yaml.safe_load(path.read_text())
    return csv if isinstance(csv, dict) else None


def _history(catalog: Path, package: str, version: str) -> ChannelHistory:
    path = catalog / package / "catalog.yaml"
    if not path.exists():
        return ChannelHistory()
    try:
        return channel_history(list(rendered_objects(path.read_text())), package, version)
    except ValueError as error:
        sys.exit(f"{path}: {error}")


def project_version() -> str:
    """pyproject.toml's version: the bundles' and the CSVs'."""
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def generate(
    version: str, history: Path, out: Path, without: Mapping[str, str] | None = None
) -> dict[Path, str]:
    """The bundles and the catalog of ``version`` under ``out`` (``bundle/<chart>/``,
    ``catalog/<chart>/catalog.yaml``), keeping the released history of the catalog under
    ``history``. ``without`` maps a chart to an optional spec field its CRD lacks (the upgrade
    test's older release)."""
    icon = ICON.read_bytes()
    image_template = BUNDLE_IMAGE_TEMPLATE.format(
        registry=IMAGE_REGISTRY, package="{{.Package}}", version="{{.Version}}"
    )
    files: dict[Path, str] = {}
    now = datetime.now(UTC)
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        for module_name in MANIFESTS:
            module = importlib.import_module(module_name)
            package = module.CHART_SPEC.name
            released = _history(history, package, version)
            inputs, others = _inputs(module, version, icon, scratch, (without or {}).get(package))
            inputs = dataclasses.replace(inputs, replaces=released.newest)
            generated = bundle_files(inputs, others, _previous_csv(out, package), now)
            for relative, content in generated.items():
                files[out / "bundle" / package / relative] = content
                path = scratch / "bundle" / package / relative
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(content)
            rendered = _run(
                _tool("opm"),
                "render",
                str(scratch / "bundle" / package),
                "--alpha-image-ref-template",
                image_template,
                "--output",
                "yaml",
            )
            catalog = catalog_yaml(inputs, list(rendered_objects(rendered)), released)
            files[out / "catalog" / package / "catalog.yaml"] = catalog
    return files


def plain_installs(version: str, out: Path) -> dict[Path, str]:
    """deploy/<chart>/install.yaml and requester-mutation.yaml of ``version`` under ``out``."""
    files: dict[Path, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for module_name in MANIFESTS:
            spec = importlib.import_module(module_name).CHART_SPEC
            chart_dir = _chart_dir(spec, version, Path(tmp))
            plain = ("--include-crds", "--no-hooks")
            rendered = _template(spec, chart_dir, *plain)
            with_mutation = _template(
                spec,
                chart_dir,
                *plain,
                "--api-versions",
                MUTATION_API,
                kube_version=MUTATION_KUBE_VERSION,
            )
            generated = install_files(
                spec.name, version, SUGGESTED_NAMESPACE, rendered, with_mutation
            )
            for name, content in generated.items():
                files[out / "deploy" / spec.name / name] = content
    return files


def expected_files() -> dict[Path, str]:
    """Every generated file of bundle/, catalog/ and deploy/ with its expected content:
    pyproject's version, after the released history catalog/ holds."""
    version = project_version()
    return generate(version, ROOT / "catalog", ROOT) | plain_installs(version, ROOT)


def _generated_on_disk() -> set[Path]:
    present = set()
    for directory in ("bundle", "catalog", "deploy"):
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
        what="bundle, catalog and plain install files",
        on_disk=_generated_on_disk,
    )


if __name__ == "__main__":
    sys.exit(main())
