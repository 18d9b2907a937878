"""Run a console script under tracemalloc; SIGUSR1 writes its top allocators as JSON.

    python -X tracemalloc=10 -m bench.memprofile DUMP.json SCRIPT [ARGS...]

The scale benchmark starts the operator with the largest RSS this way after its quiet window
(tracemalloc's own bookkeeping inflates RSS, so the RSS figures come from a plain run). Nothing
in the operators changes: the wrapper installs the signal handler, then runs the script as
``__main__``.
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import sys
import tracemalloc
from pathlib import Path
from types import FrameType
from typing import Any

MIB = 1024 * 1024
IGNORED = (tracemalloc.__file__, "<frozen importlib._bootstrap>", "<unknown>")


def _site(frame: tracemalloc.Frame) -> str:
    """``path:line`` with the path shortened to what follows site-packages/ or the repo."""
    name = frame.filename
    for marker in ("site-packages/", "/shared/", "/operators/", "/lib/python3"):
        cut = name.find(marker)
        if cut >= 0:
            name = name[cut + len(marker) :].lstrip("/")
            break
    return f"{name}:{frame.lineno}"


PLUMBING = ("/json/", "/asyncio/", "/aiohttp/", "/importlib/", "/typing.py")
"""Modules that allocate on someone else's behalf: a caller is the first frame outside them."""


def _plumbing(filename: str) -> bool:
    """Whether ``filename`` is one of :data:`PLUMBING`'s modules, looked for in the library part
    of its path only (a checkout may sit in a folder named like one, e.g. ``aiohttp``)."""
    if filename.startswith("<frozen"):
        return True
    for marker in ("site-packages/", "/lib/python3"):
        cut = filename.find(marker)
        if cut >= 0:
            library = filename[cut + len(marker) - 1 :]
            return any(p in library for p in PLUMBING)
    return False


def _caller(trace: tracemalloc.Traceback) -> str:
    """The innermost frame outside :data:`PLUMBING` (e.g. kopf's listing, a Store)."""
    frames = list(trace)[::-1]  # a Traceback runs from the oldest frame to the newest
    for frame in frames:
        if not _plumbing(frame.filename):
            return _site(frame)
    return "(plumbing only: " + _site(frames[0]) + ")"


def summarize(snapshot: tracemalloc.Snapshot, limit: int = 20) -> dict[str, Any]:
    """Top allocators of a snapshot: by line, by file, and by calling line (:func:`_caller`)."""
    snapshot = snapshot.filter_traces([tracemalloc.Filter(False, f) for f in IGNORED])
    total = sum(s.size for s in snapshot.statistics("filename"))
    by_line = [
        {"site": _site(s.traceback[0]), "mib": round(s.size / MIB, 2), "blocks": s.count}
        for s in snapshot.statistics("lineno")[:limit]
    ]
    by_file = [
        {"file": _site(s.traceback[0]).rsplit(":", 1)[0], "mib": round(s.size / MIB, 2)}
        for s in snapshot.statistics("filename")[:limit]
    ]
    callers: dict[str, int] = {}
    for stat in snapshot.statistics("traceback"):
        caller = _caller(stat.traceback)
        callers[caller] = callers.get(caller, 0) + stat.size
    by_caller = [
        {"caller": c, "mib": round(size / MIB, 2)}
        for c, size in sorted(callers.items(), key=lambda kv: -kv[1])[:limit]
    ]
    return {
        "traced_mib": round(total / MIB, 2),
        "by_line": by_line,
        "by_file": by_file,
        "by_caller": by_caller,
    }


def _dump(path: Path) -> None:
    current, peak = tracemalloc.get_traced_memory()
    document = summarize(tracemalloc.take_snapshot())
    document.update(current_mib=round(current / MIB, 2), peak_mib=round(peak / MIB, 2))
    document["frames"] = tracemalloc.get_traceback_limit()
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(document, indent=2) + "\n")
    os.replace(partial, path)


def main(argv: list[str]) -> None:
    """Install the SIGUSR1 handler and run the script."""
    if len(argv) < 2:
        raise SystemExit(__doc__)
    if not tracemalloc.is_tracing():
        tracemalloc.start(10)
    dump, script, *args = argv
    path = Path(dump)

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        _dump(path)

    signal.signal(signal.SIGUSR1, on_signal)
    sys.argv = [script, *args]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
