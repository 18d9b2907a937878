"""One list of operators (operators/operators.toml): every operator it names has all its places,
no script, Dockerfile stage, workflow or generator names the operators by hand outside the
blocks ``make manifests`` writes from the list, and no test or benchmark names them all but
those that say why (docs/new-operator.md)."""

from __future__ import annotations

import importlib
import re
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
    "hack/run.py": "gives the demo the flags of two operators of their own (PodDebugger's demo "
    "policy, ConfigMapSync's --secrets for the SecretSync sample), not a list of all",
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


LOOPERS = sorted(
    {
        *ROOT.glob("e2e/*.py"),
        *ROOT.glob("bench/*.py"),
        *ROOT.glob("bench/tests/*.py"),
        *ROOT.glob("shared/opsuite_testkit/*.py"),
        *ROOT.glob("shared/tests/*.py"),
        *ROOT.glob("hack/tests/*.py"),
    }
)
"""The e2e suite, the benchmarks and the unit tests: where they loop over every operator they
read the list, so that a new entry is installed, measured and checked as the others are."""
PER_OPERATOR = "checks what each operator does of its own, which the others do not share"
BENCHMARK = "a benchmark of each operator against the Go reference written for it"
NAMING_EVERY_OPERATOR = {
    "bench/__main__.py": BENCHMARK,
    "bench/curve.py": BENCHMARK,
    "bench/curve_objects.py": BENCHMARK,
    "bench/curve_results.py": BENCHMARK,
    "bench/implementations.py": BENCHMARK,
    "bench/readme.py": BENCHMARK,
    "bench/versus.py": BENCHMARK,
    "bench/tests/test_curve.py": BENCHMARK,
    "bench/tests/test_versus.py": BENCHMARK,
    "bench/scale.py": "its load has a part for each operator",
    "e2e/invalid_inputs.py": PER_OPERATOR,
    "e2e/test_chaos.py": PER_OPERATOR,
    "e2e/test_network_faults.py": PER_OPERATOR,
    "e2e/test_olm_upgrade.py": PER_OPERATOR,
    "shared/tests/test_protowatch.py": PER_OPERATOR,
    "shared/tests/test_testing.py": PER_OPERATOR,
    "hack/tests/test_operator_list.py": "its test of the check itself",
}
"""Files of :data:`LOOPERS` that name every operator, and why."""


def named(text: str, operators: tuple[Operator, ...] = OPERATORS) -> set[str]:
    """The operators ``text`` names by image, package, manifests module, CRD or name."""
    return {
        op.name
        for op in operators
        if any(word in text for word in (op.image, op.package, op.manifests, *op.crds))
        or re.search(rf"\b{op.name}\b", text)
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


@pytest.mark.parametrize("path", LOOPERS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_test_or_benchmark_lists_the_operators_by_hand(path: Path) -> None:
    relative = str(path.relative_to(ROOT))
    every = named(path.read_text()) == {op.name for op in OPERATORS}
    if relative in NAMING_EVERY_OPERATOR:
        assert every, f"{relative} no longer names every operator: drop its exception"
    else:
        assert not every, f"{relative} names every operator: loop over the list instead"


def test_every_exception_is_a_file_that_is_checked() -> None:
    checked = {str(p.relative_to(ROOT)) for p in (*READERS, *LOOPERS)}
    assert set(EXCEPTIONS) | set(NAMING_EVERY_OPERATOR) <= checked


def test_a_hand_written_list_is_found() -> None:
    assert named("for c in podset-operator pod-debugger-operator; do") == {"podset", "poddebugger"}
    assert named('OPERATORS = ["podset", "configmapsync"]') == {"podset", "configmapsync"}
    assert named("from e2e import podset_support; kubectl get poddebuggers") == set()
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
