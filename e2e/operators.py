"""Run operators of this repo as real processes against the cluster under test."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from e2e.cluster import Cluster, wait_until

VENV_BIN = Path(sys.executable).parent


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def http_get(url: str, timeout: float = 2.0) -> tuple[int, str]:
    """(status, body) of a GET; status 0 when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


@dataclass
class OperatorProcess:
    """One operator process, its probe and metrics ports, and its log file."""

    command: str
    args: list[str]
    log_path: Path
    env: dict[str, str]
    metrics_port: int = field(default_factory=free_port)
    health_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> OperatorProcess:
        """Start the process (logs appended to ``log_path``)."""
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    str(VENV_BIN / self.command),
                    f"--metrics-bind-address=127.0.0.1:{self.metrics_port}",
                    f"--health-probe-bind-address=127.0.0.1:{self.health_port}",
                    "--log-format=text",
                    "--log-level=debug",
                    *self.args,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
            )
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def readyz(self) -> tuple[int, str]:
        return http_get(f"http://127.0.0.1:{self.health_port}/readyz?verbose")

    def metrics(self) -> str:
        status, body = http_get(f"http://127.0.0.1:{self.metrics_port}/metrics")
        assert status == 200, f"metrics endpoint answered {status}"
        return body

    def wait_ready(self, timeout: float = 60) -> None:
        """Wait until /readyz answers 200 (fails early if the process exits)."""

        def probe() -> tuple[int, str]:
            if not self.alive():
                raise AssertionError(f"{self.command} exited; log:\n{self.log_tail()}")
            return self.readyz()

        try:
            wait_until(probe, lambda r: r[0] == 200, timeout=timeout, what=f"{self.command} ready")
        except BaseException:
            self.stop(timeout=5)  # a failed fixture must not leave the process running
            raise

    def signal(self, sig: int) -> None:
        assert self.process is not None
        self.process.send_signal(sig)

    def stop(self, timeout: float = 20) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout``; the exit code."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def operator_env(cluster: Cluster, command: str, **extra: str) -> dict[str, str]:
    """Environment of the operator ``command``: its kubeconfig (its chart's identity, see
    e2e.charts), nothing inherited that would change its flags."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPSUITE_")}
    env["KUBECONFIG"] = str(cluster.operator_kubeconfig(command))
    env.update(extra)
    return env


def wait_exit(proc: OperatorProcess, timeout: float) -> int:
    """Wait for the process to exit; its exit code."""
    deadline = time.monotonic() + timeout
    while proc.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not proc.alive(), f"{proc.command} still running after {timeout} s"
    assert proc.process is not None
    return int(proc.process.returncode)
