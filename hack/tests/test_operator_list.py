"""One list of operators (operators/operators.toml): every operator it names has all its places,
and no script, Dockerfile stage, workflow or generator names the operators by hand outside the
blocks ``make manifests`` writes from the list (docs/new-operator.md)."""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

import pytest

from opsuite_packaging import operator_blocks
from opsuite_packaging.operator_blocks import BEGIN, BLOCKS, END
from opsuite_packaging.operators import OPERATORS, Operator

ROOT = Path(__file__).resolve().parents[2]
READERS = sorted(
    {
        *ROOT.glob("hack/*.py"),
        *ROOT.glob("hack/*.sh"),
        *ROOT.glob("hack/image/*"),
        *ROOT.glob(".github/workflows/*.yaml"),
        *ROOT.glob(".ci/*"),
        *ROOT.glob("shared/opsuite_packaging/*.py"),
        ROOT / "Dockerfile",
        ROOT / "Makefile",
    }
)
"""What must read the list rather than name the operators."""
EXCEPTIONS = {
    "hack/e2e-olm.sh": "renders the admission policies that PodSet's and PodDebugger's docs ask "
    "an OLM user's admin to apply: those two operators' own, not a list of all",
}


def _outside_blocks(text: str) -> str:
    kept, inside = [], False
    for line in text.splitlines():
        if line.strip().startswith(BEGIN):
            inside = True
        elif line.strip().startswith(END):
            inside = False
        elif not inside:
            kept.append(line)
    return "\n".join(kept)


def named(text: str, operators: tuple[Operator, ...] = OPERATORS) -> set[str]:
    """The operators ``text`` names by image, manifests module or CRD."""
    return {
        op.name
        for op in operators
        if any(word in text for word in (op.image, op.manifests, *op.crds))
    }


@pytest.mark.parametrize("op", OPERATORS, ids=lambda op: op.name)
def test_each_operator_of_the_list_has_all_its_places(op: Operator) -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts[op.image].startswith(f"{op.package}.")
    assert (op.directory / op.package / "__main__.py").is_file()
    assert (op.directory / "tests").is_dir()
    assert (ROOT / "docs" / f"{op.name}.md").is_file()
    assert (op.chart / "Chart.yaml").is_file()
    assert (ROOT / "bundle" / op.image).is_dir()
    assert (ROOT / "catalog" / op.image).is_dir()
    manifests = importlib.import_module(op.manifests)
    assert manifests.CHART_SPEC.name == op.image
    extra = [crd.name for crd in getattr(manifests, "EXTRA_CRDS", ())]
    assert list(op.crds) == [manifests.CRD.name, *extra]


@pytest.mark.parametrize("path", READERS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_script_names_the_operators_by_hand(path: Path) -> None:
    relative = str(path.relative_to(ROOT))
    text = path.read_text()
    if relative in BLOCKS:
        text = _outside_blocks(text)
    if relative in EXCEPTIONS:
        return
    assert len(named(text)) <= 1, f"{relative} names {sorted(named(text))}: read the list"


def test_a_hand_written_list_is_found() -> None:
    assert named("for c in podset-operator pod-debugger-operator; do") == {"podset", "poddebugger"}
    script = f"{BEGIN} x\nFROM runtime AS podset-operator\n{END}\nCOPY configmapsync_manifests"
    assert named(_outside_blocks(script)) == {"configmapsync"}


def test_the_build_steps_take_the_pin_release_yaml_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    moved = "docker/build-push-action@" + "1" * 40 + " # v9.9.9"
    release = tmp_path / "release.yaml"
    release.write_text(f"      - uses: {moved}\n")
    monkeypatch.setattr(operator_blocks, "RELEASE", release)
    text = (ROOT / ".github" / "workflows" / "e2e.yaml").read_text()
    written = operator_blocks.rewritten(".github/workflows/e2e.yaml", text, OPERATORS)
    assert written.count(f"uses: {moved}") == len(OPERATORS)
