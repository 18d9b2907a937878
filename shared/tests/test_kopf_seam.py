"""docs/architecture.md lists exactly the private kopf symbols that ``opsuite_common.kopfwatch``
uses, so a newcomer sees each, with why, and a new one cannot come in unlisted."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SEAM = ROOT / "shared" / "opsuite_common" / "kopfwatch"
PAGE = ROOT / "docs" / "architecture.md"


def private_kopf_symbols(source: str) -> set[str]:
    """``kopf._….module.name`` for each ``module.name`` used, where ``module`` was imported
    ``from kopf._… import module``."""
    tree = ast.parse(source)
    modules = {
        alias.asname or alias.name: f"{node.module}.{alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kopf._")
        for alias in node.names
    }
    return {
        f"{modules[node.value.id]}.{node.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in modules
    }


def listed_on_the_page() -> set[str]:
    section = PAGE.read_text().partition("## kopf behind one seam")[2].partition("\n## ")[0]
    return set(re.findall(r"`(kopf\._[\w.]+)`", section))


def test_the_page_lists_each_private_symbol_the_seam_uses() -> None:
    used: set[str] = set()
    for path in SEAM.rglob("*.py"):
        used |= private_kopf_symbols(path.read_text())
    assert used, "the walk found no private kopf symbol"
    assert listed_on_the_page() == used


def test_a_new_private_symbol_is_seen() -> None:
    source = "from kopf._cogs.clients import watching\nwatching.continuous_watch()\n"
    assert private_kopf_symbols(source) == {"kopf._cogs.clients.watching.continuous_watch"}
