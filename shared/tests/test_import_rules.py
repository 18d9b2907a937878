"""The import rules of docs/architecture.md, checked on the source (an AST walk, no import).

- The runtime an operator's image runs (everything its ``__main__`` imports, transitively) holds
  nothing of the build-time packages (``opsuite_packaging``: CRD, chart, bundle generators;
  ``opsuite_testkit``; the packaging specs ``<operator>_manifests``), nor the dev-only libraries.
- Layers: the runtime packages import no build-time package; the shared runtime imports no
  operator; an operator imports no other operator; none imports e2e, bench or hack code.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OPERATORS = ["podset", "configmapsync", "poddebugger"]
RUNTIME = {
    "opsuite_common": ROOT / "shared" / "opsuite_common",
    **{f"{op}_operator": ROOT / "operators" / op / f"{op}_operator" for op in OPERATORS},
}
"""The packages the images ship."""
BUILD_TIME = {
    "opsuite_packaging": ROOT / "shared" / "opsuite_packaging",
    "opsuite_testkit": ROOT / "shared" / "opsuite_testkit",
    **{f"{op}_manifests": ROOT / "operators" / op / f"{op}_manifests.py" for op in OPERATORS},
}
"""Generators, the test kit and the packaging specs: make manifests, make bundle and the tests."""
PACKAGES = {**RUNTIME, **BUILD_TIME}
DEV_ONLY = {
    "hypothesis",
    "pytest",
    "matplotlib",
    "mypy",
    "ruff",
    "kubernetes",
    "pykube",
    "grpc_tools",
}
OUTSIDE = {"e2e", "bench", "hack"}


def _path(module: str) -> Path | None:
    top, _, rest = module.partition(".")
    if top not in PACKAGES:
        return None
    if PACKAGES[top].suffix == ".py":
        return None if rest else PACKAGES[top]
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
    if root.suffix == ".py":
        return [package]
    return [
        package if p.name == "__init__.py" else f"{package}.{p.stem}"
        for p in sorted(root.glob("*.py"))
    ]


@pytest.mark.parametrize("operator", OPERATORS)
def test_the_runtime_holds_no_generator_packaging_spec_or_test_kit(operator: str) -> None:
    closure = runtime_closure(f"{operator}_operator.__main__")
    assert f"{operator}_operator.handlers" in closure  # the walk follows the real wiring
    build_time = {m for m in closure if m.split(".")[0] in BUILD_TIME}
    assert not build_time, sorted(build_time)
    dev = {m for m in closure if m.split(".")[0] in DEV_ONLY}
    assert not dev, sorted(dev)


def test_the_walk_sees_a_generator_imported_by_a_packaging_spec() -> None:
    """The rule can fail: the generators are reachable from a manifests module."""
    assert "opsuite_packaging.crd" in runtime_closure("podset_manifests")


@pytest.mark.parametrize("package", list(PACKAGES))
def test_layers(package: str) -> None:
    """Runtime: no build-time package, no other operator, nothing of e2e, bench or hack.
    Build time: no e2e, bench or hack."""
    operators = {f"{op}_operator" for op in OPERATORS}
    forbidden = set(OUTSIDE)
    if package == "opsuite_common":
        forbidden |= operators | set(BUILD_TIME)
    elif package in RUNTIME:
        forbidden |= (operators - {package}) | set(BUILD_TIME)
    for module in _modules(package):
        tops = {m.split(".")[0] for m in _imports(module)}
        assert not tops & forbidden, f"{module} imports {sorted(tops & forbidden)}"


@pytest.mark.parametrize("package", list(PACKAGES))
def test_no_module_imports_a_private_name_of_another(package: str) -> None:
    """A module uses what another module makes public: a private name is free to change."""
    for module in _modules(package):
        path = _path(module)
        assert path is not None, module
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and _path(node.module):
                private = [a.name for a in node.names if a.name.startswith("_")]
                assert not private, f"{module} imports {private} from {node.module}"
