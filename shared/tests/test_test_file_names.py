"""One naming scheme for the operators' unit tests: ``test_<operator>_<module>.py`` tests that
module of the operator's package (``manifests``: its packaging spec), and
``test_<operator>_<module>_<aspect>.py`` one aspect of it (``..._reconcile_properties.py``: the
planner's hypothesis suite). A module's tests are found from its name, and no two operators'
test modules share a name (mypy maps each test directory to the package ``tests``)."""

from __future__ import annotations

from pathlib import Path

import pytest

OPERATORS = Path(__file__).parents[2] / "operators"


def _misnamed(operator: str, tests: Path, package: Path) -> list[str]:
    modules = {p.stem for p in package.glob("*.py") if not p.stem.startswith("__")}
    modules.add("manifests")
    return sorted(
        test.name
        for test in tests.glob("test_*.py")
        if not any(
            test.stem == f"test_{operator}_{module}"
            or test.stem.startswith(f"test_{operator}_{module}_")
            for module in modules
        )
    )


@pytest.mark.parametrize("operator", sorted(p.parent.name for p in OPERATORS.glob("*/tests")))
def test_each_test_file_names_its_operator_and_the_module_it_tests(operator: str) -> None:
    root = OPERATORS / operator
    assert _misnamed(operator, root / "tests", root / f"{operator}_operator") == []


def test_a_file_named_for_no_module_is_found(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "reconcile.py").touch()
    for name in ("test_op_reconcile", "test_op_reconcile_properties", "test_op_pods", "test_x"):
        (tmp_path / f"{name}.py").touch()
    assert _misnamed("op", tmp_path, tmp_path / "pkg") == ["test_op_pods.py", "test_x.py"]
