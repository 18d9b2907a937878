"""/readyz follows the watch streams; /healthz follows the event loop (kopf #957, #1276).

A kopf watch that stops delivering (API server hung, connection half-open) raises no error: the
operator just stops seeing changes. Readiness must say so. Here the local plane's kube-apiserver
is paused with SIGSTOP: the operator's watches go silent, /readyz fails naming them while
/healthz stays 200 (the operator itself is fine); after SIGCONT readiness recovers and changes
are reconciled again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from e2e.cluster import ROOT, Cluster
from e2e.operators import OperatorProcess, http_get
from e2e.podset_support import PodSets, podset, start_podset_operator

pytestmark = pytest.mark.local_operators(
    "pauses the API server under a local operator process and reads its /readyz"
)

WATCH_TIMEOUT = 5.0  # --watch-timeout: the API server ends each watch (bookmark first) after it
STALE_AFTER = 2 * WATCH_TIMEOUT  # /readyz fails once a watch is silent for longer
QUIET_PERIOD = 20.0
MAX_PAUSE = 25.0  # other tests share this API server
WATCHED = ("podsets", "pods")
PROCESSES = ROOT / ".local" / "plane" / "processes.json"


@pytest.fixture
def operator(
    cluster: Cluster, podset_crd: None, namespace: str, tmp_path: Path
) -> Iterator[OperatorProcess]:
    proc = start_podset_operator(cluster, namespace, tmp_path, f"--watch-timeout={WATCH_TIMEOUT:g}")
    proc.wait_ready()
    yield proc
    code = proc.stop()
    assert code == 0, f"operator exited {code} on SIGTERM; log:\n{proc.log_tail()}"


@pytest.fixture
def apiserver_pid(cluster: Cluster) -> int:
    """PID of the local plane's kube-apiserver, checked against /proc."""
    if cluster.kind != "local":
        pytest.skip(f"pauses the local plane's kube-apiserver; the cluster is {cluster.kind}")
    pid = int(json.loads(PROCESSES.read_text())["kube-apiserver"]["pid"])
    argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    assert Path(argv0).name == "kube-apiserver", f"pid {pid} is {argv0!r}, not kube-apiserver"
    return pid


def healthz(proc: OperatorProcess) -> tuple[int, str]:
    return http_get(f"http://127.0.0.1:{proc.health_port}/healthz?verbose")


class Probes:
    """Samples /readyz and /healthz; /healthz must answer 200 at every sample."""

    def __init__(self, proc: OperatorProcess) -> None:
        self.proc = proc
        self.samples: list[tuple[float, int, str]] = []  # (monotonic, readyz status, body)

    def sample(self) -> tuple[int, str]:
        status, body = self.proc.readyz()
        health, health_body = healthz(self.proc)
        self.samples.append((time.monotonic(), status, body))
        assert health == 200, f"/healthz answered {health}: {health_body}\n{self.proc.log_tail()}"
        return status, body

    def until(self, ready: bool, timeout: float, interval: float = 0.2) -> tuple[int, str]:
        """Sample until /readyz is (not) 200; the last answer."""
        deadline = time.monotonic() + timeout
        while True:
            status, body = self.sample()
            if (status == 200) == ready or time.monotonic() >= deadline:
                return status, body
            time.sleep(interval)


def test_readiness_follows_the_watch(
    api: client.ApiClient, namespace: str, operator: OperatorProcess, apiserver_pid: int
) -> None:
    probes = Probes(operator)

    # A quiet, healthy period: bookmarks keep the watches fresh, readiness must not flap.
    end = time.monotonic() + QUIET_PERIOD
    while time.monotonic() < end:
        status, body = probes.sample()
        assert status == 200, f"/readyz flapped in a quiet healthy period: {status} {body}"
        time.sleep(0.2)

    # The API server hangs: the watches go silent and /readyz says which.
    # A detached watchdog resumes the API server even if this test process dies meanwhile.
    watchdog = subprocess.Popen(
        ["sh", "-c", f"sleep {MAX_PAUSE + 5:g}; kill -CONT {apiserver_pid}"],
        start_new_session=True,
    )
    paused_at = time.monotonic()
    try:
        os.kill(apiserver_pid, signal.SIGSTOP)
        status, body = probes.until(ready=False, timeout=MAX_PAUSE - 2)
    finally:
        os.kill(apiserver_pid, signal.SIGCONT)
        paused_for = time.monotonic() - paused_at
        os.killpg(watchdog.pid, signal.SIGKILL)  # its own session: the shell and its sleep
        watchdog.wait()
    print(f"\nAPI server paused for {paused_for:.1f} s")
    assert status != 200, f"/readyz still {status} after {paused_for:.1f} s of silence"
    failing = [line for line in body.splitlines() if line.startswith("[-]")]
    assert failing, body
    assert any(f"silent for over {STALE_AFTER:.0f} s" in line for line in failing), body
    assert any(plural in line for line in failing for plural in WATCHED), body
    went_stale = next(t for t, s, _ in probes.samples if t >= paused_at and s != 200) - paused_at
    # The last bookmark before the pause came at most about one watch timeout earlier.
    assert went_stale >= STALE_AFTER - WATCH_TIMEOUT - 1, f"failed {went_stale:.1f} s into it"

    # Resumed: readiness comes back, and a change made now is reconciled.
    status, body = probes.until(ready=True, timeout=60)
    assert status == 200, body
    print(f"/readyz back {probes.samples[-1][0] - paused_at - paused_for:.1f} s after SIGCONT")
    podsets = PodSets(api, namespace)
    podsets.create(podset("after-pause", 2))
    podsets.wait_running("app=after-pause", 2)
    podsets.wait_status("after-pause", replicas=2, readyReplicas=2)
    status, body = probes.until(ready=True, timeout=30)  # no one-shot probe under load
    assert status == 200, body
