"""bench.cpu.cpu_settled: a phase's CPU counts until the process's trailing work is done."""

from __future__ import annotations

import subprocess
import sys
import time

from bench.cpu import cpu_seconds, cpu_settled

BUSY_THEN_IDLE = """
import time
end = time.process_time() + 0.6
while time.process_time() < end:
    pass
time.sleep(60)
"""


def test_waits_for_the_work_after_the_start_then_returns_once_idle() -> None:
    child = subprocess.Popen([sys.executable, "-c", BUSY_THEN_IDLE])
    try:
        began = time.monotonic()
        settled = cpu_settled(child.pid, quiet=0.02, interval=0.3, limit=30)
        assert settled >= 0.6  # the busy part, though it was still running when asked
        assert time.monotonic() - began < 20  # returned once idle, not at the limit
        time.sleep(0.3)
        assert (cpu_seconds(child.pid) or 0.0) - settled < 0.05  # nothing more came after
    finally:
        child.kill()
        child.wait()
