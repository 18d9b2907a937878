"""hack/module-dir.sh on a fresh Go module cache, as on a new CI runner (the OLM job's step)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OLM = "github.com/operator-framework/operator-lifecycle-manager"


def _run(tmp_path: Path, module: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GOMODCACHE": str(tmp_path / "mod"), "GOFLAGS": "-modcacherw"}
    return subprocess.run(
        [str(ROOT / "hack" / "module-dir.sh"), str(ROOT / "hack" / "tools" / "olm"), module],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_downloads_the_pinned_module_into_an_empty_cache(tmp_path: Path) -> None:
    result = _run(tmp_path, OLM)
    assert result.returncode == 0, result.stderr
    directory = Path(result.stdout.strip())
    assert directory.is_relative_to(tmp_path / "mod")
    pinned = (ROOT / "hack" / "tools" / "olm" / "go.mod").read_text()
    assert f"{OLM} {directory.name.partition('@')[2]}" in pinned
    assert (directory / "deploy" / "upstream" / "quickstart" / "olm.yaml").is_file()


def test_a_module_the_tool_does_not_pin_fails_with_the_reason(tmp_path: Path) -> None:
    result = _run(tmp_path, "example.com/not/a/dependency")
    assert result.returncode != 0
    assert "not a known dependency" in result.stderr
