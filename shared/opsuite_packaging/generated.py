"""Write generated files, or check that the files on disk are what a generator makes.

The command line of hack/manifests.py (make manifests / make verify) and hack/bundle.py (make
bundle).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path


def run(
    description: str,
    expected: Callable[[], Mapping[Path, str]],
    *,
    root: Path,
    make_target: str,
    what: str,
    on_disk: Callable[[], set[Path]] | None = None,
    argv: Sequence[str] | None = None,
) -> int:
    """``write``: bring every expected file up to date (and remove generated files no longer
    expected, when ``on_disk`` lists them); ``check``: exit status 1 listing what differs.
    Paths are printed relative to ``root``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("command", choices=["write", "check"])
    command = parser.parse_args(argv).command
    files = expected()
    extra = sorted(on_disk() - set(files)) if on_disk is not None else []
    if command == "write":
        for path in extra:
            path.unlink()
            print(f"removed {path.relative_to(root)}")
        for path, content in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists() or path.read_text() != content:
                path.write_text(content)
                print(f"wrote {path.relative_to(root)}")
        return 0
    stale = [p for p, c in files.items() if not p.exists() or p.read_text() != c]
    for path in stale:
        print(f"out of date: {path.relative_to(root)} (run `make {make_target}`)", file=sys.stderr)
    for path in extra:
        print(
            f"not generated: {path.relative_to(root)} (run `make {make_target}`)", file=sys.stderr
        )
    if not stale and not extra:
        print(f"{len(files)} {what} up to date")
    return 1 if stale or extra else 0
