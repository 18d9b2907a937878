"""The operators as their images ship them, for the benchmarks to run.

A virtualenv of the project's wheel and its locked runtime dependencies only, made by the
image's own scripts (``hack/image/build-wheel.sh``, ``hack/image/install-runtime.sh``, bytecode
compiled ahead of time), so that a benchmarked operator imports what a deployed one imports.
The development virtualenv holds more: pytest-kind brings pykube-ng, which kopf imports
whenever it is installed, and that is start-up time no deployed operator spends. Kept under
``.local/bench-runtime/<digest>``, made again when the sources, the lock or the scripts change.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from bench.plane import LOCAL, ROOT

RUNTIME = LOCAL / "bench-runtime"
POETRY_VENV = (
    Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "opsuite/image-poetry"
)
"""Poetry and its export plugin for build-wheel.sh (hack/tests/test_image_recipe.py keeps the
same one)."""
SOURCES = ("shared/opsuite_common", "operators/*/*_operator", "hack/image")


def _digest() -> str:
    files = [ROOT / "pyproject.toml", ROOT / "poetry.lock"]
    for pattern in SOURCES:
        for top in sorted(ROOT.glob(pattern)):
            files.extend(sorted(p for p in top.rglob("*") if p.is_file() and p.suffix != ".pyc"))
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def runtime_bin() -> Path:
    """The ``bin`` directory of the runtime virtualenv of the current sources, made if needed
    (about half a minute; the packages come from pip's cache after the first time)."""
    venv = RUNTIME / _digest()
    if not (venv / "bin" / "python").exists():
        shutil.rmtree(RUNTIME, ignore_errors=True)
        RUNTIME.mkdir(parents=True)
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONDONTWRITEBYTECODE"}
        }
        with tempfile.TemporaryDirectory(dir=RUNTIME) as dist:
            image = ROOT / "hack" / "image"
            steps: list[list[str]] = [
                [str(image / "build-wheel.sh"), dist, str(POETRY_VENV)],
                [str(image / "install-runtime.sh"), dist, str(venv)],
            ]
            for step in steps:
                done = subprocess.run(step, capture_output=True, text=True, env=env, check=False)
                if done.returncode != 0:
                    raise RuntimeError(f"{step[0]} failed:\n{done.stdout}{done.stderr}")
    return venv / "bin"
