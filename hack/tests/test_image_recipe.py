"""The images' recipe without Docker: the Dockerfile's build and install scripts, run here.

hack/image/build-wheel.sh builds the wheel and locked requirements, hack/image/install-runtime.sh
installs them into a fresh virtualenv (the very steps of the Dockerfile's builder and install
stages); then each console script must start, write nothing, and find exactly poetry.lock's
runtime versions.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.markers import Marker

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import poetry_requirements

from opsuite_packaging.operators import OPERATORS

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())
SCRIPTS = sorted(PYPROJECT["project"]["scripts"])
# Poetry and its export plugin for build-wheel.sh, kept between runs (the image's is throwaway).
POETRY_VENV = (
    Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "opsuite/image-poetry"
)
INSTALLERS = {"pip", "setuptools", "wheel"}


def canonical(name: str) -> str:
    """A distribution name as PEP 503 normalises it."""
    return re.sub(r"[-_.]+", "-", name).lower()


def clean_env() -> dict[str, str]:
    """The environment without anything that would point Python at another environment or stop
    it writing bytecode (so that a missing ahead-of-time compilation shows)."""
    drop = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONDONTWRITEBYTECODE"}
    return {k: v for k, v in os.environ.items() if k not in drop}


def files(tree: Path) -> set[Path]:
    """Every path under ``tree``."""
    return set(tree.rglob("*"))


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The runtime virtualenv, made as the Dockerfile makes /opt/venv."""
    dist = tmp_path_factory.mktemp("dist")
    target = tmp_path_factory.mktemp("image") / "venv"
    env = clean_env()
    subprocess.run([ROOT / "hack/image/build-wheel.sh", dist, POETRY_VENV], check=True, env=env)
    subprocess.run([ROOT / "hack/image/install-runtime.sh", dist, target], check=True, env=env)
    return target


@pytest.fixture(scope="module")
def installed(venv: Path) -> dict[str, str]:
    """Distribution versions in the virtualenv, by canonical name."""
    code = (
        "import json, importlib.metadata as m;"
        "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"
    )
    out = subprocess.run(
        [venv / "bin/python", "-c", code], check=True, capture_output=True, text=True
    ).stdout
    return {canonical(name): version for name, version in json.loads(out).items()}


def locked_runtime() -> dict[str, str]:
    """poetry.lock's versions of the main group that apply to this interpreter and platform."""
    lock = tomllib.loads((ROOT / "poetry.lock").read_text())
    versions = {}
    for package in lock["package"]:
        if "main" not in package["groups"]:
            continue
        markers = package.get("markers")
        marker = markers.get("main") if isinstance(markers, dict) else markers
        if marker is None or Marker(marker).evaluate():
            versions[canonical(package["name"])] = package["version"]
    return versions


def test_no_installer_in_the_runtime(venv: Path, installed: dict[str, str]) -> None:
    assert INSTALLERS.isdisjoint(installed)
    assert not list((venv / "bin").glob("pip*"))


def test_exactly_the_locked_runtime_versions(installed: dict[str, str]) -> None:
    runtime = dict(installed)
    assert runtime.pop(canonical(PYPROJECT["project"]["name"])) == PYPROJECT["project"]["version"]
    assert runtime == locked_runtime()


@pytest.mark.parametrize("script", SCRIPTS)
def test_console_script_starts_and_writes_nothing(venv: Path, script: str, tmp_path: Path) -> None:
    before = files(venv)
    result = subprocess.run(
        [venv / "bin" / script, "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_env(),
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: {script} "), result.stdout
    assert files(venv) == before, "bytecode was not all compiled at install time"
    assert not list(tmp_path.iterdir())


RUNTIME_PACKAGES = {"opsuite_common", *(op.package for op in OPERATORS)}
BUILD_TIME = {
    "opsuite_packaging",
    "opsuite_testkit",
    *(op.manifests for op in OPERATORS),
    "hypothesis",
    "pytest",
    "matplotlib",
}


def test_only_runtime_code_and_every_module_imports(venv: Path) -> None:
    """The image's virtualenv holds the runtime packages and none of the generators, packaging
    specs, test kit or dev-only libraries; every module of the runtime packages imports there,
    so none of them needs what is left out."""
    code = (
        "import importlib, json, pkgutil, sys\n"
        "top = sorted({m.name for m in pkgutil.iter_modules()})\n"
        f"runtime = {sorted(RUNTIME_PACKAGES)!r}\n"
        "imported = []\n"
        "for name in runtime:\n"
        "    package = importlib.import_module(name)\n"
        "    for m in pkgutil.iter_modules(package.__path__, name + '.'):\n"
        "        if not m.name.endswith('__main__'):\n"
        "            importlib.import_module(m.name)\n"
        "            imported.append(m.name)\n"
        "print(json.dumps({'top': top, 'imported': imported}))\n"
    )
    out = subprocess.run(
        [venv / "bin/python", "-c", code],
        check=True,
        capture_output=True,
        text=True,
        env=clean_env(),
        cwd=venv,
    ).stdout
    found = json.loads(out)
    assert set(found["top"]) >= RUNTIME_PACKAGES
    assert not set(found["top"]) & BUILD_TIME, sorted(set(found["top"]) & BUILD_TIME)
    generators = {f"opsuite_common.{m}" for m in ("crd", "chart", "bundle", "testing")}
    specs = {f"{package}.manifests" for package in RUNTIME_PACKAGES}
    assert not set(found["imported"]) & (generators | specs)
    assert "podset_operator.handlers" in found["imported"]
    assert "opsuite_common.manager" in found["imported"]


def test_the_image_and_the_development_environment_install_poetry_by_hash() -> None:
    """#31, item 9: every package of poetry is pinned and hashed, poetry and its export plugin
    at the versions build-wheel.sh checks for (and install-deps.sh installs); a pin only some
    Pythons need names them."""
    text = (ROOT / "hack/image/poetry-requirements.txt").read_text()
    entries = re.split(r"\n(?=\S)", text.split("\n", 1)[1].strip())
    pins = {}
    for entry in entries:
        requirement, *hashes = entry.split(" \\\n    ")
        requirement, _, marker = requirement.partition(" ; ")
        assert not marker or re.fullmatch(r'python_version == "3\.1\d"( or .*)?', marker), entry
        name, version = requirement.split("==")
        assert hashes, entry
        assert all(re.fullmatch(r"--hash=sha256:[0-9a-f]{64}", h) for h in hashes), entry
        pins[name] = version
    assert {k: pins[k] for k in ("poetry", "poetry-plugin-export")} == (
        poetry_requirements.pinned_versions()
    )
    assert len(pins) > 2
    script = (ROOT / "hack/image/build-wheel.sh").read_text()
    assert "--require-hashes -r hack/image/poetry-requirements.txt" in script
    assert "hack/image/poetry-requirements.txt" in (ROOT / "Dockerfile").read_text()
    install_deps = (ROOT / "hack/install-deps.sh").read_text()
    assert "--require-hashes -r hack/image/poetry-requirements.txt" in install_deps
    assert f'poetry_version="{pins["poetry"]}"' in install_deps


def test_a_pin_only_some_pythons_need_is_marked_with_them() -> None:
    """pip's reports by Python version become one pin per package and version, with every
    wheel's hash; one that not every Python needs carries a marker that holds exactly there."""

    def item(name: str, version: str, digest: str) -> dict[str, object]:
        info = {"archive_info": {"hashes": {"sha256": digest}}}
        return {"metadata": {"name": name, "version": version}, "download_info": info}

    common = item("Poetry", "2.5.1", "a" * 64)
    text = poetry_requirements.requirements_text(
        {
            "3.11": [[common, item("backports.zstd", "1.8.0", "b" * 64)]],
            "3.14": [[common, item("zstandard", "0.25.0", "c" * 64)]],
        }
    )
    lines = {line.split(" ")[0]: line for line in text.splitlines() if "==" in line}
    assert lines["poetry==2.5.1"] == "poetry==2.5.1 \\"
    marker = lines["backports-zstd==1.8.0"].split(" ; ")[1].removesuffix(" \\")
    assert Marker(marker).evaluate({"python_version": "3.11"})
    assert not Marker(marker).evaluate({"python_version": "3.14"})
