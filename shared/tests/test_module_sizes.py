"""No runtime module over 400 lines without saying why: past :data:`LIMIT`, its docstring
has a paragraph that begins "Length:" (a long module usually does several jobs, which belong in
modules named for each)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 400
RUNTIME = sorted(
    [*ROOT.glob("shared/opsuite_common/**/*.py"), *ROOT.glob("operators/*/*_operator/*.py")]
)


def unexplained(path: Path) -> bool:
    """Whether ``path`` is over the limit without a "Length:" paragraph in its docstring."""
    text = path.read_text()
    if text.count("\n") <= LIMIT:
        return False
    doc = ast.get_docstring(ast.parse(text)) or ""
    return not any(paragraph.startswith("Length:") for paragraph in doc.split("\n\n"))


@pytest.mark.parametrize("path", RUNTIME, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_long_runtime_module_says_why(path: Path) -> None:
    assert not unexplained(path)


def test_a_long_module_without_a_reason_is_found(tmp_path: Path) -> None:
    body = "x = 1\n" * (LIMIT + 1)
    (tmp_path / "long.py").write_text(f'"""Does things."""\n{body}')
    (tmp_path / "said.py").write_text(f'"""Does things.\n\nLength: data."""\n{body}')
    assert unexplained(tmp_path / "long.py")
    assert not unexplained(tmp_path / "said.py")
