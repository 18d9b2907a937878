"""Tests drive the manager through its public surface (#33): no test, nor the test kit, reads or
writes a private attribute of a manager or imports a private name of its module, so that the
manager's insides can change without touching the tests."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEST_CODE = [
    ROOT / "shared" / "tests",
    ROOT / "shared" / "opsuite_testkit",
    ROOT / "bench" / "tests",
    *sorted((ROOT / "operators").glob("*/tests")),
]
PRIVATE = re.compile(r"\bmanager\._\w|from opsuite_common\.manager import [^\n]*\b_[a-z]\w*")


def private_uses(source: str) -> list[str]:
    """The lines of ``source`` that reach into a manager's private attributes or names."""
    return [line.strip() for line in source.splitlines() if PRIVATE.search(line)]


def test_no_test_reaches_into_the_manager() -> None:
    found = {
        f"{path.relative_to(ROOT)}: {line}"
        for folder in TEST_CODE
        for path in folder.rglob("*.py")
        if path != Path(__file__)
        for line in private_uses(path.read_text())
    }
    assert not found, sorted(found)


def test_a_private_use_is_seen() -> None:
    assert private_uses("deliver = wired.manager._routes[key]\nmanager.watch()\n") == [
        "deliver = wired.manager._routes[key]"
    ]
    assert private_uses("from opsuite_common.manager import WatchDead, _serve\n") != []
    assert private_uses("from opsuite_common.manager import WatchDead\n") == []
