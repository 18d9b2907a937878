"""What every image build shares: where it writes (``.local/images``, the cache), how it runs
commands (as root where it must), and how it skips an image whose inputs have not changed (a
stamp of their digest next to the archive)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import subprocess
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
LOCAL = ROOT / ".local"
BIN = LOCAL / "bin"
OUT = LOCAL / "images"
CACHE = (
    Path(
        os.environ.get("OPSUITE_CACHE")
        or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "opsuite"
    )
    / "images"
)
TOOLCHAIN = Path(__file__).resolve().parent
"""This package's sources: part of the inputs of the images built from files alone (busybox,
pause), so that a change to how they are written rebuilds them."""


@dataclass
class Built:
    """An image archive and the names it carries."""

    archive: Path
    names: list[str]


def log(message: str) -> None:
    print(f">> {message}", flush=True)


def run(cmd: Sequence[str | Path], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], check=True, text=True, **kwargs)


def as_root(cmd: Sequence[str | Path]) -> list[str]:
    """``cmd``, through sudo unless this already runs as root."""
    return [str(c) for c in cmd] if os.geteuid() == 0 else ["sudo", *map(str, cmd)]


def hash_inputs(paths: Iterable[Path], *extra: str) -> str:
    """A digest of the files under ``paths`` (names and contents; bytecode left out)."""
    h = hashlib.sha256()
    for item in extra:
        h.update(item.encode() + b"\0")
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += [
                p
                for p in path.rglob("*")
                if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
            ]
        elif path.exists():
            files.append(path)
    for f in sorted(set(files)):
        name = f.relative_to(ROOT) if f.is_relative_to(ROOT) else f
        h.update(name.as_posix().encode() + b"\0")
        h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (two builds at once wait for each other)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def fresh(stamp: Path, inputs: str, archives: Iterable[Path]) -> bool:
    """True when ``stamp`` records ``inputs`` and every archive is there: nothing to build."""
    return (
        stamp.exists() and stamp.read_text().strip() == inputs and all(a.exists() for a in archives)
    )


def write_stamp(stamp: Path, inputs: str) -> None:
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(inputs + "\n")
