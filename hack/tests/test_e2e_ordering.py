"""The e2e tests that judge the whole run (marked ``after_suite``) run after every other one,
whatever the file names, the selection or the order pytest collected them in."""

from __future__ import annotations

import importlib
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
