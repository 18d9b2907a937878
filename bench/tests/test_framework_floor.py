"""The floor probe's figures (bench.framework_floor)."""

from __future__ import annotations

import subprocess
import sys

from bench.framework_floor import IMPORT_KOPF


def test_the_peak_rss_is_the_probes_own_not_its_parents() -> None:
    """A parent holding 300 MiB (the benchmark's process holds over 100) starts the probe:
    ``ru_maxrss`` would report the parent's peak, carried over fork and exec."""
    ballast = bytearray(300 * 2**20)
    ballast[::4096] = b"x" * len(ballast[::4096])  # touched, so resident
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_KOPF], check=True, capture_output=True, text=True
    )
    peak_mib = int(done.stdout) / 1024
    assert 10 < peak_mib < 200, peak_mib
    assert len(ballast) == 300 * 2**20
