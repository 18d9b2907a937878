"""Run an operator of this repository as a local process for the duration of a benchmark."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO

from bench.plane import KUBECONFIG
from bench.runtime import runtime_bin
from opsuite_testkit.processes import terminate


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _readyz(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
            status: int = response.status
            return status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


class OperatorProcess:
    """An operator console script (from the runtime virtualenv, as the images ship it:
    bench/runtime.py) with its health endpoint.

    Its identity (``POD_NAME``) is "bench" unless ``env`` says otherwise, so its User-Agent
    reads "<name>/<version> (bench)" in the audit log; metrics are off; logs go to ``log_path``.
    """

    def __init__(
        self,
        command: str,
        args: list[str],
        log_path: Path,
        *,
        kubeconfig: Path = KUBECONFIG,
        launcher: list[str] | None = None,
        env: dict[str, str] | None = None,
        executable: Path | None = None,
    ) -> None:
        """``launcher`` runs the console script through it (e.g. a tracemalloc wrapper);
        ``env`` is added to the process's environment; ``executable`` runs that program (a Go
        reference binary, a script of another virtualenv) instead of the console script
        ``command``."""
        self.command = command
        self.executable = executable or runtime_bin() / command
        self.args = args
        self.log_path = log_path
        self.kubeconfig = kubeconfig
        self.launcher = launcher or []
        self.extra_env = env or {}
        self.health_port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.ready_s: float | None = None
        """Seconds from the process start to its first /readyz 200."""

    def start(self, ready_timeout: float = 60.0) -> OperatorProcess:
        """Start the process and wait until its /readyz answers 200."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPSUITE_")}
        env.update({"KUBECONFIG": str(self.kubeconfig), "POD_NAME": "bench"} | self.extra_env)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("wb")
        began = time.monotonic()
        self.process = subprocess.Popen(
            [
                *self.launcher,
                str(self.executable),
                "--metrics-bind-address=0",
                f"--health-probe-bind-address=127.0.0.1:{self.health_port}",
                *self.args,
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )
        deadline = time.monotonic() + ready_timeout
        while _readyz(self.health_port) != 200:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.command} exited; see {self.log_path}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.command} not ready after {ready_timeout:.0f} s")
            time.sleep(0.05)
        self.ready_s = time.monotonic() - began
        return self

    @property
    def pid(self) -> int | None:
        """The process id once started."""
        return self.process.pid if self.process is not None else None

    def alive(self) -> bool:
        """True while the process runs."""
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM, SIGKILL after ``timeout``; the exit code (None if never started)."""
        if self.process is None:
            return None
        code = terminate(self.process, timeout)
        if self._log is not None:
            self._log.close()
        return code
