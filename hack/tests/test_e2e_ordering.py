"""The e2e tests that judge the whole run (marked ``after_suite``) run after every other one,
whatever the file names, the selection or the order pytest collected them in."""

from __future__ import annotations

import importlib
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from e2e.ordering import AFTER_SUITE, after_suite_last


@dataclass
class Item:
    """What the ordering reads of a pytest item: its markers."""

    name: str
    markers: set[str] = field(default_factory=set)

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.markers else None


def test_tests_marked_after_suite_move_to_the_end_in_their_order() -> None:
    items = [
        Item("a_audit", {AFTER_SUITE}),
        Item("b"),
        Item("c_hygiene", {AFTER_SUITE}),
        Item("d", {"smoke"}),
    ]
    after_suite_last(items)
    assert [i.name for i in items] == ["b", "d", "a_audit", "c_hygiene"]


def test_the_marker_is_registered() -> None:
    config = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    markers = config["tool"]["pytest"]["ini_options"]["markers"]
    assert any(m.startswith(f"{AFTER_SUITE}:") for m in markers)


@pytest.mark.parametrize("module", ["test_hygiene", "test_least_privilege"])
def test_the_whole_run_checks_are_marked(module: str) -> None:
    marks = getattr(importlib.import_module(f"e2e.{module}"), "pytestmark", [])
    marks = marks if isinstance(marks, list) else [marks]
    assert AFTER_SUITE in {m.name for m in marks}


@pytest.mark.parametrize("selection", [[], ["-m", "smoke or after_suite"]], ids=["all", "subset"])
def test_e2e_collection_puts_the_after_suite_tests_last(selection: list[str]) -> None:
    """The real collection, with e2e/conftest.py's hook (no cluster needed to collect)."""
    root = Path(__file__).parents[2]
    collect = [sys.executable, "-m", "pytest", "e2e", "--collect-only", "-q", "-p", "no:kind"]
    done = subprocess.run(
        [*collect, "-p", "no:cacheprovider", *selection],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    last = {"e2e/test_hygiene.py", "e2e/test_least_privilege.py"}
    marked = [i for i, test in enumerate(ids) if test.partition("::")[0] in last]
    assert len(marked) == 2
    assert marked == [len(ids) - 2, len(ids) - 1], ids[marked[0] :]
