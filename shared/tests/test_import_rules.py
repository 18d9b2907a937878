"""The import rules of docs/architecture.md, checked on the source (an AST walk, no import).

- The runtime an operator's image runs (everything its ``__main__`` imports, transitively) holds
  no build-time generator (CRD, chart, bundle, generated-file checks), no
  packaging spec (``<operator>.manifests``) and no test kit, nor the dev-only libraries they use.
- Layers: the shared library imports no operator, e2e, bench or hack code; an operator imports
  no other operator, e2e, bench or hack code.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {
    "opsuite_common": ROOT / "shared" / "opsuite_common",
    "podset_operator": ROOT / "operators" / "podset" / "podset_operator",
    "configmapsync_operator": ROOT / "operators" / "configmapsync" / "configmapsync_operator",
    "poddebugger_operator": ROOT / "operators" / "poddebugger" / "poddebugger_operator",
}
OPERATORS = [name for name in PACKAGES if name != "opsuite_common"]
BUILD_TIME = {
    "opsuite_common.crd",
    "opsuite_common.chart",
    "opsuite_common.chart_values",
    "opsuite_common.bundle",
    "opsuite_common.generated",
    "opsuite_common.testing",
    *(f"{operator}.manifests" for operator in OPERATORS),
}
"""Modules for make manifests, make bundle and the tests: never part of what an image runs.
(``opsuite_common.admission`` is runtime: the PodDebugger's gate compares the policy in force
with the one it builds.)"""
DEV_ONLY = {"hypothesis", "pytest", "matplotlib", "mypy", "ruff"}
OUTSIDE = {"e2e", "bench", "hack"}


def _path(module: str) -> Path | None:
    top, _, rest = module.partition(".")
    if top not in PACKAGES:
        return None
    base = PACKAGES[top].joinpath(*rest.split(".")) if rest else PACKAGES[top]
    if base.is_dir():
        return base / "__init__.py"
    file = base.with_suffix(".py")
    return file if file.exists() else None


def _imports(module: str) -> Iterator[str]:
    path = _path(module)
    assert path is not None, module
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            # ``from package import module`` imports the module
            for alias in node.names:
                if _path(f"{node.module}.{alias.name}") is not None:
                    yield f"{node.module}.{alias.name}"


def runtime_closure(entry: str) -> set[str]:
    """Every module ``entry`` imports, transitively (first-party modules followed)."""
    seen: set[str] = set()
    todo = [entry]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        if _path(module) is not None:
            todo.extend(_imports(module))
    return seen


def _modules(package: str) -> list[str]:
    root = PACKAGES[package]
    return [
        package if p.name == "__init__.py" else f"{package}.{p.stem}"
        for p in sorted(root.glob("*.py"))
    ]


@pytest.mark.parametrize("operator", OPERATORS)
def test_the_runtime_holds_no_generator_packaging_spec_or_test_kit(operator: str) -> None:
    closure = runtime_closure(f"{operator}.__main__")
    assert f"{operator}.handlers" in closure  # the walk follows the real wiring
    assert not closure & BUILD_TIME, sorted(closure & BUILD_TIME)
    dev = {m for m in closure if m.split(".")[0] in DEV_ONLY}
    assert not dev, sorted(dev)


def test_the_walk_sees_a_generator_imported_by_the_runtime() -> None:
    """The rule can fail: packaging is reachable from the manifests module."""
    assert "opsuite_common.crd" in runtime_closure("podset_operator.manifests")


@pytest.mark.parametrize("package", list(PACKAGES))
def test_layers(package: str) -> None:
    forbidden = set(OUTSIDE)
    if package == "opsuite_common":
        forbidden |= set(OPERATORS)
    else:
        forbidden |= set(OPERATORS) - {package}
    for module in _modules(package):
        tops = {m.split(".")[0] for m in _imports(module)}
        assert not tops & forbidden, f"{module} imports {sorted(tops & forbidden)}"
