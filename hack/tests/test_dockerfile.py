"""The Dockerfile's shape: one target per console script, non-root, built with hack/image."""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())
SCRIPTS: dict[str, str] = PYPROJECT["project"]["scripts"]
VENV = "/opt/venv"


@dataclass
class Stage:
    """One ``FROM`` section: its base (an image or an earlier stage) and its instructions."""

    name: str
    base: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def args(self, keyword: str) -> list[str]:
        """The arguments of every instruction ``keyword`` of this stage, in order."""
        return [args for kw, args in self.instructions if kw == keyword]


def parse_dockerfile(text: str) -> dict[str, Stage]:
    """Stages by name (or index), from the logical lines: comments dropped, continuations
    joined."""
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    assert not pending, "the Dockerfile ends inside a continued line"

    stages: dict[str, Stage] = {}
    current: Stage | None = None
    for line in lines:
        keyword, _sep, args = line.partition(" ")
        keyword, args = keyword.upper(), args.strip()
        if keyword == "FROM":
            words = [w for w in args.split() if not w.startswith("--")]
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else str(len(stages))
            current = stages[name] = Stage(name, words[0])
        elif current is not None:
            current.instructions.append((keyword, args))
    return stages


def lineage(stages: dict[str, Stage], name: str) -> list[Stage]:
    """The stage and the stages it is built on, base first."""
    chain = [stages[name]]
    while chain[0].base in stages:
        chain.insert(0, stages[chain[0].base])
    return chain


def assignments(args: str) -> dict[str, str]:
    """``KEY=value`` pairs of a LABEL or ENV instruction."""
    return dict(word.split("=", 1) for word in shlex.split(args))


def merged(chain: list[Stage], keyword: str) -> dict[str, str]:
    """The LABELs or ENVs in force at the end of ``chain``."""
    return {
        k: v
        for stage in chain
        for args in stage.args(keyword)
        for k, v in assignments(args).items()
    }


STAGES = parse_dockerfile((ROOT / "Dockerfile").read_text())
TARGETS = [name for name, stage in STAGES.items() if stage.args("ENTRYPOINT")]


def test_one_target_per_console_script() -> None:
    assert sorted(TARGETS) == sorted(SCRIPTS)


@pytest.mark.parametrize("target", TARGETS)
def test_entrypoint_is_the_console_script(target: str) -> None:
    *_, entrypoint = [a for stage in lineage(STAGES, target) for a in stage.args("ENTRYPOINT")]
    assert json.loads(entrypoint) == [f"{VENV}/bin/{target}"]


@pytest.mark.parametrize("target", TARGETS)
def test_runs_as_a_numeric_non_root_user(target: str) -> None:
    users = [a for stage in lineage(STAGES, target) for a in stage.args("USER")]
    assert users, "no USER: the image would run as root"
    assert re.fullmatch(r"[1-9][0-9]*:[1-9][0-9]*", users[-1]), users[-1]


@pytest.mark.parametrize("target", TARGETS)
def test_runtime_is_the_recipe_venv_without_build_stages(target: str) -> None:
    """The target gets /opt/venv from a stage that runs install-runtime.sh on the wheel built by
    build-wheel.sh, and is itself built on none of those stages (no poetry, no installer)."""
    chain = lineage(STAGES, target)
    copies = [a for stage in chain for a in stage.args("COPY") if a.endswith(f" {VENV} {VENV}")]
    assert len(copies) == 1, copies
    source = re.fullmatch(rf"--from=(\S+) {VENV} {VENV}", copies[0])
    assert source, copies[0]
    install = STAGES[source[1]]
    builder_mount = re.search(
        r"--mount=type=bind,from=(\S+?),source=/dist,", " ".join(install.args("RUN"))
    )
    assert builder_mount, "the install stage does not mount the builder's /dist"
    builder = STAGES[builder_mount[1]]
    assert "hack/image/install-runtime.sh hack/image/pip.sh /usr/local/bin/" in install.args("COPY")
    assert any(re.search(rf"\binstall-runtime\.sh /dist {VENV}$", a) for a in install.args("RUN"))
    assert any(re.search(r"\bhack/image/build-wheel\.sh /dist\b", a) for a in builder.args("RUN"))
    assert {install.name, builder.name}.isdisjoint(stage.name for stage in chain)


@pytest.mark.parametrize("target", TARGETS)
def test_oci_labels(target: str) -> None:
    labels = merged(lineage(STAGES, target), "LABEL")
    oci = {k.removeprefix("org.opencontainers.image."): v for k, v in labels.items()}
    assert oci["source"] == "${SOURCE}"
    assert oci["version"] == "${VERSION}"
    assert oci["revision"] == "${REVISION}"
    assert oci["licenses"] == PYPROJECT["project"]["license"]
    assert oci["title"] == target
    assert oci["description"]


@pytest.mark.parametrize("target", TARGETS)
def test_python_writes_no_bytecode(target: str) -> None:
    assert merged(lineage(STAGES, target), "ENV").get("PYTHONDONTWRITEBYTECODE") == "1"


def test_builder_copies_every_package_and_dockerignore_lets_it_through() -> None:
    packages = PYPROJECT["tool"]["poetry"]["packages"]
    needed = ["pyproject.toml", "poetry.lock", PYPROJECT["project"]["readme"]]
    needed += [f"{p['from']}/{p['include']}" for p in packages]
    needed += ["hack/image/build-wheel.sh", "hack/image/pip.sh"]
    builder = STAGES["builder"]
    copied = {w for a in builder.args("COPY") for w in a.split()[:-1] if not w.startswith("--")}
    allowed = [
        line[1:]
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    ]
    for path in needed:
        assert path in copied, f"{path} is not copied into the builder"
        assert any(
            fnmatch.fnmatch(path, pattern) or path.startswith(f"{pattern}/") for pattern in allowed
        ), f".dockerignore keeps {path} out of the build context"


def test_build_context_and_images_leave_out_the_go_references() -> None:
    """bench/reference (the Go operators benchmarks compare against) is never shipped: no file
    of it passes .dockerignore into the build context, and no COPY names bench/."""
    allowed = [
        line[1:]
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    ]
    files = [
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "bench" / "reference").rglob("*")
        if p.is_file()
    ]
    assert "bench/reference/go.mod" in files
    for path in files:
        assert not any(
            fnmatch.fnmatch(path, pattern) or path.startswith(f"{pattern}/") for pattern in allowed
        ), f".dockerignore lets {path} into the build context"
    for stage in STAGES.values():
        for args in stage.args("COPY"):
            assert "bench" not in args, f"stage {stage.name} copies {args}"


def test_builder_uses_the_poetry_of_install_deps() -> None:
    def poetry_version(script: str) -> str:
        found = re.search(r'^poetry_version="([^"]+)"', (ROOT / script).read_text(), re.M)
        assert found, script
        return found[1]

    assert poetry_version("hack/image/build-wheel.sh") == poetry_version("hack/install-deps.sh")


def test_no_syntax_directive() -> None:
    """A ``# syntax=`` line makes BuildKit pull the frontend image; hack/images.py builds offline
    with the built-in one."""
    first = (ROOT / "Dockerfile").read_text().splitlines()[0]
    assert not re.match(r"#\s*syntax\s*=", first, re.I), first


def test_package_index_steps_trust_the_optional_ca_secret() -> None:
    """Every step that runs pip mounts the CA bundle secret (optional, so a plain buildx build
    works) and points pip at it only when it is there; no step copies a bundle into a layer."""
    pip_steps = [
        run
        for stage in STAGES.values()
        for run in stage.args("RUN")
        if re.search(r"build-wheel\.sh|install-runtime\.sh", run)
    ]
    assert len(pip_steps) == 2, pip_steps
    for run in pip_steps:
        assert "--mount=type=secret,id=ca,required=false,target=/run/secrets/ca" in run, run
        assert "if [ -f /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi" in run, run
    copied = [a for stage in STAGES.values() for kw in ("COPY", "ADD") for a in stage.args(kw)]
    assert not [a for a in copied if re.search(r"\.(crt|pem)\b|ca-certificates", a)], copied


@pytest.mark.parametrize("target", TARGETS)
def test_runtime_cleanup_is_the_script_for_either_base(target: str) -> None:
    """The clean-up is hack/image/strip-runtime.sh, bind-mounted (not left in the image); no
    step assumes the official image's layout (/usr/local/lib, a ``python`` command)."""
    runs = [a for stage in lineage(STAGES, target) for a in stage.args("RUN")]
    assert any(
        "--mount=type=bind,source=hack/image/strip-runtime.sh," in a
        and a.endswith("sh /run/strip-runtime.sh")
        for a in runs
    ), runs
    for a in runs:
        assert "/usr/local/lib" not in a, a
        assert not re.search(r"(^|[\s;&|])python\s", a), a
