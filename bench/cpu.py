"""CPU time of local processes (from /proc), to see what a trial cost each component."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from bench.plane import LOCAL

PLANE_PROCESSES = LOCAL / "plane" / "processes.json"
"""Where hack/localplane.py records the components it started."""

_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds used so far by ``pid``; None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Fields after the command (which may contain spaces) start at field 3; utime and stime
    # are fields 14 and 15.
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def cpu_settled(
    pid: int, quiet: float = 0.02, interval: float = 1.0, limit: float = 120.0
) -> float:
    """``pid``'s CPU seconds once they rose by less than ``quiet`` in ``interval`` seconds (the
    process is idle: its trailing work done), or after ``limit`` seconds."""
    deadline = time.monotonic() + limit
    last = cpu_seconds(pid) or 0.0
    while time.monotonic() < deadline:
        time.sleep(interval)
        now = cpu_seconds(pid) or last
        if now - last < quiet:
            return now
        last = now
    return last


def plane_pid(component: str) -> int | None:
    """PID of a local-plane component (e.g. "kube-controller-manager"), if recorded."""
    try:
        state = json.loads(PLANE_PROCESSES.read_text())
        return int(state[component]["pid"])
    except (OSError, KeyError, ValueError, TypeError):
        return None


class CpuMeter:
    """CPU seconds a set of processes used between :meth:`start` and :meth:`stop`."""

    def __init__(self, pids: dict[str, int | None]) -> None:
        self._pids = {name: pid for name, pid in pids.items() if pid is not None}
        self._start: dict[str, float] = {}
        self.used: dict[str, float] = {}

    def start(self) -> None:
        """Take the starting readings."""
        for name, pid in self._pids.items():
            seconds = cpu_seconds(pid)
            if seconds is not None:
                self._start[name] = seconds

    def stop(self) -> dict[str, float]:
        """CPU seconds used per process since :meth:`start`."""
        for name, begin in self._start.items():
            end = cpu_seconds(self._pids[name])
            if end is not None:
                self.used[name] = round(end - begin, 2)
        return self.used


def rss_mib(pid: int) -> float | None:
    """Resident memory of ``pid`` in MiB (VmRSS); None when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


class RssSampler:
    """RSS of named processes every ``interval`` seconds, in a daemon thread."""

    def __init__(self, pids: dict[str, int | None], interval: float, began: float) -> None:
        self.pids = {name: pid for name, pid in pids.items() if pid is not None}
        self.interval = interval
        self.began = began
        """Monotonic origin of the samples' times."""
        self.samples: dict[str, list[tuple[float, float]]] = {name: [] for name in self.pids}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def start(self) -> RssSampler:
        """Start sampling."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling (one last sample is taken)."""
        self._stop.set()
        self._thread.join(timeout=5)

    def sample(self) -> dict[str, float]:
        """Take one sample of every process now; the readings (MiB)."""
        at = round(time.monotonic() - self.began, 1)
        readings: dict[str, float] = {}
        for name, pid in self.pids.items():
            mib = rss_mib(pid)
            if mib is not None:
                readings[name] = round(mib, 1)
                self.samples[name].append((at, readings[name]))
        return readings

    def _run(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.interval):
                self.sample()
                return
