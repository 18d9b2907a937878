"""The floor under a Python operator's start and memory: the interpreter importing kopf.

The operators are built on kopf (the project's design card), and a fresh interpreter of the
runtime virtualenv that does nothing but ``import kopf`` (which brings aiohttp, asyncio and
OpenSSL) already takes time and memory that no opsuite operator can go below. ``bench versus``
measures it in the same run as the Go references and reports it next to their start to Ready
and RSS: a target below that floor cannot be met by cutting opsuite's own work.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass

from bench.runtime import runtime_bin

PROBES = 5
IMPORT_KOPF = (
    "import kopf\n"
    "with open('/proc/self/status') as status:\n"
    "    print(next(line.split()[1] for line in status if line.startswith('VmHWM:')))"
)
"""Imports kopf, then prints the process's peak RSS in KiB: ``VmHWM``, its own address
space's (``ru_maxrss`` would be the forking benchmark's, which exec does not reset)."""


@dataclass(frozen=True)
class Floor:
    """The least wall time and peak RSS of :data:`PROBES` fresh interpreters importing kopf."""

    start_s: float
    rss_mib: float


def measure(probes: int = PROBES) -> Floor:
    """Run the probes (a few seconds); each figure is the least seen."""
    python = str(runtime_bin() / "python")
    walls, peaks = [], []
    for _ in range(probes):
        began = time.perf_counter()
        done = subprocess.run(
            [python, "-c", IMPORT_KOPF], check=True, capture_output=True, text=True, timeout=120
        )
        walls.append(time.perf_counter() - began)
        peaks.append(int(done.stdout) / 1024)
    return Floor(start_s=round(min(walls), 3), rss_mib=round(min(peaks), 1))
