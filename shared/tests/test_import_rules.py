"""The import rules of docs/architecture.md, checked on the source (an AST walk, no import).

- The runtime an operator's image runs (everything its ``__main__`` imports, transitively) holds
  nothing of the build-time packages (``opsuite_packaging``: CRD, chart, bundle generators;
  ``opsuite_testkit``; the packaging specs ``<operator>_manifests``), nor the dev-only libraries.
- Layers: the runtime packages import no build-time package; the shared runtime imports no
  operator; an operator imports no other operator; none imports e2e, bench or hack code.
- Every module of a runtime package runs in an operator (is reached from a console script's
  module): the wheel ships them all, so code only the tests use belongs in the test kit.
- kopf behind one seam: of the runtime, only ``opsuite_common.kopfwatch`` imports kopf.
- No import cycles among the modules of a runtime package, counting imports inside functions
  and ``TYPE_CHECKING`` blocks: a cycle means code sits in the wrong module, and it makes what a
  module finds at import time depend on which module of the cycle was imported first.
"""

from __future__ import annotations

import ast
import tomllib
from collections import deque
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from opsuite_packaging import operators as operator_list

ROOT = Path(__file__).resolve().parents[2]
OPERATORS = [op.name for op in operator_list.OPERATORS]
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
ENTRY_POINTS = sorted(
    script.partition(":")[0]
    for script in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "scripts"
    ].values()
)
"""The modules of the console scripts, which the images run."""


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
        ".".join((package, *p.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")
        for p in sorted(root.rglob("*.py"))
    ]


@pytest.mark.parametrize("operator", OPERATORS)
def test_the_runtime_holds_no_generator_packaging_spec_or_test_kit(operator: str) -> None:
    closure = runtime_closure(f"{operator}_operator.__main__")
    assert f"{operator}_operator.handlers" in closure  # the walk follows the real wiring
    build_time = {m for m in closure if m.split(".")[0] in BUILD_TIME}
    assert not build_time, sorted(build_time)
    dev = {m for m in closure if m.split(".")[0] in DEV_ONLY}
    assert not dev, sorted(dev)


@pytest.mark.parametrize("package", list(RUNTIME))
def test_every_runtime_module_runs_in_an_operator(package: str) -> None:
    """The wheel ships every module of the runtime packages: one that no console script reaches
    is dead code or a test helper, which the images would carry for nothing."""
    assert len(ENTRY_POINTS) == len(OPERATORS), ENTRY_POINTS
    reached = set().union(*(runtime_closure(entry) for entry in ENTRY_POINTS))
    unreached = set(_modules(package)) - reached
    assert not unreached, sorted(unreached)


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


def import_graph(package: str) -> dict[str, set[str]]:
    """Each module of ``package`` and the modules of ``package`` it imports, wherever the import
    stands (module level, a function, a ``TYPE_CHECKING`` block)."""
    modules = set(_modules(package))
    return {module: set(_imports(module)) & modules for module in modules}


def _reached(graph: Mapping[str, set[str]], start: str) -> dict[str, str]:
    """The modules ``start`` imports transitively, each with the module it is first reached from
    (breadth first: following these back gives a shortest path)."""
    parents: dict[str, str] = {}
    todo = deque([start])
    while todo:
        module = todo.popleft()
        for imported in sorted(graph[module]):
            if imported not in parents:
                parents[imported] = module
                todo.append(imported)
    return parents


def import_cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """One shortest cycle, ``[a, b, ..., a]``, per group of modules that import each other."""
    reached = {module: _reached(graph, module) for module in graph}
    cycles: list[list[str]] = []
    grouped: set[str] = set()
    for start in sorted(graph):
        if start in grouped or start not in reached[start]:
            continue
        grouped |= {m for m in reached[start] if start in reached[m]}
        cycle = [start]
        while len(cycle) == 1 or cycle[-1] != start:
            cycle.append(reached[start][cycle[-1]])
        cycles.append(cycle[::-1])
    return cycles


@pytest.mark.parametrize("package", list(RUNTIME))
def test_no_import_cycles(package: str) -> None:
    cycles = import_cycles(import_graph(package))
    assert not cycles, "; ".join(" -> ".join(cycle) for cycle in cycles)


def test_the_cycle_check_finds_each_cycle_once() -> None:
    """The check can fail: a cycle is found from any of its modules, reported once, and a
    module that only imports into it is not part of it."""
    graph = {"a": {"b"}, "b": {"c", "d"}, "c": {"a"}, "d": {"d2"}, "d2": {"d"}, "e": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c", "a"], ["d", "d2", "d"]]


def test_the_walk_sees_an_import_inside_a_function() -> None:
    """protowatch imports protodecode (and the protobuf runtime) only when a decoder is made."""
    assert "opsuite_common.protodecode" in set(_imports("opsuite_common.protowatch"))


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


KOPF_SEAM = "opsuite_common.kopfwatch"


@pytest.mark.parametrize("package", sorted(RUNTIME))
def test_only_the_kopf_seam_imports_kopf(package: str) -> None:
    outside = sorted(
        module
        for module in _modules(package)
        if not (module == KOPF_SEAM or module.startswith(f"{KOPF_SEAM}."))
        and any(name == "kopf" or name.startswith("kopf.") for name in _imports(module))
    )
    assert outside == []


def test_the_walk_sees_the_modules_of_a_subpackage() -> None:
    assert f"{KOPF_SEAM}.streams" in _modules("opsuite_common")
    assert KOPF_SEAM in _modules("opsuite_common")
