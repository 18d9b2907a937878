"""The catalog's upgrade graph (hack/bundle.py): released bundles are kept, a new version
replaces the newest of them and skips every earlier one, and the version never goes back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import bundle
from opsuite_packaging.operators import OPERATORS
from opsuite_packaging.previous_release import without_spec_field

PACKAGES = tuple(op.image for op in OPERATORS)


def _documents(root: Path, package: str) -> list[dict[str, Any]]:
    text = (root / "catalog" / package / "catalog.yaml").read_text()
    return [d for d in yaml.safe_load_all(text) if d]


def _channel(root: Path, package: str) -> list[dict[str, Any]]:
    (channel,) = [d for d in _documents(root, package) if d["schema"] == "olm.channel"]
    entries: list[dict[str, Any]] = channel["entries"]
    return entries


def _bundle_texts(root: Path, package: str) -> list[str]:
    """The catalog's olm.bundle documents as the file spells them."""
    text = (root / "catalog" / package / "catalog.yaml").read_text()
    parts = [part.strip("\n") for part in text.split("\n---\n")]
    return [part for part in parts if "\nschema: olm.bundle" in f"\n{part}"]


def _csv(root: Path, package: str) -> dict[str, Any]:
    path = root / "bundle" / package / "manifests" / f"{package}.clusterserviceversion.yaml"
    csv: dict[str, Any] = yaml.safe_load(path.read_text())
    return csv


def _write(files: dict[Path, str]) -> None:
    for path, content in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """0.0.1 from an empty catalog, then 0.1.0 and 0.2.0, each after the one before."""
    roots: dict[str, Path] = {}
    history = tmp_path_factory.mktemp("empty")
    for version in ("0.0.1", "0.1.0", "0.2.0"):
        root = tmp_path_factory.mktemp(f"v{version}")
        _write(bundle.generate(version, history / "catalog", root))
        roots[version] = history = root
    return roots


def test_a_first_release_has_one_entry_skipping_every_earlier_version(
    releases: dict[str, Path],
) -> None:
    for package in PACKAGES:
        assert _channel(releases["0.0.1"], package) == [
            {"name": f"{package}.v0.0.1", "skipRange": ">=0.0.0 <0.0.1"}
        ]
        csv = _csv(releases["0.0.1"], package)
        assert "replaces" not in csv["spec"]
        assert csv["metadata"]["annotations"]["olm.skipRange"] == ">=0.0.0 <0.0.1"


def test_a_version_bump_adds_an_entry_replacing_the_newest_and_keeps_the_history(
    releases: dict[str, Path],
) -> None:
    for package in PACKAGES:
        assert _channel(releases["0.2.0"], package) == [
            {"name": f"{package}.v0.0.1", "skipRange": ">=0.0.0 <0.0.1"},
            {
                "name": f"{package}.v0.1.0",
                "replaces": f"{package}.v0.0.1",
                "skipRange": ">=0.0.0 <0.1.0",
            },
            {
                "name": f"{package}.v0.2.0",
                "replaces": f"{package}.v0.1.0",
                "skipRange": ">=0.0.0 <0.2.0",
            },
        ]
        # The released bundles are the earlier catalogs' documents, byte for byte.
        kept = _bundle_texts(releases["0.2.0"], package)
        assert kept[:2] == _bundle_texts(releases["0.1.0"], package)[:2]
        assert kept[0] == _bundle_texts(releases["0.0.1"], package)[0]
        assert len(kept) == 3
        csv = _csv(releases["0.2.0"], package)
        assert csv["spec"]["replaces"] == f"{package}.v0.1.0"
        assert csv["metadata"]["annotations"]["olm.skipRange"] == ">=0.0.0 <0.2.0"


def test_regenerating_the_same_version_changes_nothing(releases: dict[str, Path]) -> None:
    root = releases["0.2.0"]
    for path, content in bundle.generate("0.2.0", root / "catalog", root).items():
        assert path.read_text() == content, path


def test_the_catalog_with_its_history_passes_opm_validate(releases: dict[str, Path]) -> None:
    opm = str(bundle.BIN / "opm")
    done = subprocess.run(
        [opm, "validate", str(releases["0.2.0"] / "catalog")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_a_version_below_the_catalogs_newest_is_refused(
    releases: dict[str, Path], tmp_path: Path
) -> None:
    with pytest.raises(SystemExit, match=r"already holds 0\.2\.0, newer than .*0\.1\.5"):
        bundle.generate("0.1.5", releases["0.2.0"] / "catalog", tmp_path)


def test_an_older_release_can_lack_an_optional_field(tmp_path: Path) -> None:
    files = bundle.generate(
        "0.0.1", tmp_path / "none", tmp_path, {"configmapsync-operator": "copyAnnotations"}
    )
    crd = yaml.safe_load(
        files[
            tmp_path
            / "bundle/configmapsync-operator/manifests/sync.opsuite.dev_configmapsyncs.yaml"
        ]
    )
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert "copyAnnotations" not in spec["properties"]
    assert "copyLabels" in spec["properties"]
    with pytest.raises(ValueError, match="configMapName is required"):
        without_spec_field(crd, "configMapName")
