"""Processes the e2e tests and the benchmarks start (operators, references)."""

from __future__ import annotations

import signal
import subprocess
from typing import Any


def terminate(process: subprocess.Popen[Any], timeout: float) -> int:
    """SIGTERM, then SIGKILL after ``timeout`` seconds; the exit code."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode
