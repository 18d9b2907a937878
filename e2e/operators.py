"""The operators a test talks to: local processes started by the suite (the default), or the
Deployments already running in the cluster (``E2E_OPERATORS=in-cluster``).

Tests get an :class:`OperatorHandle` and never ask which: :func:`operator_handle` gives a
:class:`LocalOperator` (the process ``start`` makes, serving the test's namespaces) or an
:class:`InClusterOperator` (the chart's Deployment that hack/e2e-install.sh, or OLM, installed in
``E2E_NAMESPACE``, serving every namespace). Tests that need what only a local process offers
(signals, several processes, flags of their own, the audit log of the local plane) carry the
``local_operators`` marker and are skipped in in-cluster mode.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from e2e.charts import CHARTS, RELEASE_NAMESPACE
from e2e.cluster import Cluster, wait_until
from opsuite_testkit.processes import terminate

VENV_BIN = Path(sys.executable).parent
Mode = Literal["local", "in-cluster"]
MODES: tuple[Mode, ...] = ("local", "in-cluster")


def operators_mode() -> Mode:
    """``E2E_OPERATORS``: ``local`` (default) or ``in-cluster``."""
    mode = os.environ.get("E2E_OPERATORS", "local")
    for known in MODES:
        if mode == known:
            return known
    raise ValueError(f"E2E_OPERATORS={mode!r}: expected one of {', '.join(MODES)}")


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
    host: str = "127.0.0.1"
    """Where the probes and metrics listen (a network namespace's address, see e2e.netns)."""
    wrapper: list[str] = field(default_factory=list)
    """Prefix of the command that execs the operator (``ip netns exec <name>``)."""
    metrics_port: int = field(default_factory=free_port)
    health_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> OperatorProcess:
        """Start the process (logs appended to ``log_path``)."""
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    *self.wrapper,
                    str(VENV_BIN / self.command),
                    f"--metrics-bind-address={self.host}:{self.metrics_port}",
                    f"--health-probe-bind-address={self.host}:{self.health_port}",
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
        return http_get(f"http://{self.host}:{self.health_port}/readyz?verbose")

    def metrics(self) -> str:
        status, body = http_get(f"http://{self.host}:{self.metrics_port}/metrics")
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
        return terminate(self.process, timeout)

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def operator_env(cluster: Cluster, command: str, **extra: str) -> dict[str, str]:
    """Environment of the operator ``command``: its kubeconfig (its chart's identity, see
    e2e.charts), nothing inherited that would change its flags."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPSUITE_")}
    env["KUBECONFIG"] = str(cluster.operator_kubeconfig(command))
    env.update(extra)
    return env


def start_operator(
    cluster: Cluster,
    command: str,
    namespaces: Iterable[str],
    log_dir: Path,
    *extra: str,
    **env: str,
) -> OperatorProcess:
    """A started ``command`` process serving exactly ``namespaces``, with the flags ``extra`` and
    the environment ``env`` beside :func:`operator_env`'s; its log is a new file in ``log_dir``."""
    return OperatorProcess(
        command,
        [*(f"--namespace={ns}" for ns in namespaces), *extra],
        log_dir / f"{command}-{uuid.uuid4().hex[:6]}.log",
        operator_env(cluster, command, **env),
    ).start()


def stopped_after(handle: OperatorHandle) -> Iterator[OperatorHandle]:
    """A fixture's body: ``handle`` for the test (or module), stopped after it."""
    yield handle
    handle.stop()


def wait_exit(proc: OperatorProcess, timeout: float) -> int:
    """Wait for the process to exit; its exit code."""
    deadline = time.monotonic() + timeout
    while proc.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not proc.alive(), f"{proc.command} still running after {timeout} s"
    assert proc.process is not None
    return int(proc.process.returncode)


class OperatorHandle(Protocol):
    """What a test may do with the operator under test, whichever mode runs it."""

    command: str

    def metrics(self) -> str:
        """The /metrics exposition text."""

    def alive(self) -> bool:
        """Running, and not restarted behind the test's back."""

    def restart(self) -> None:
        """Stop gracefully and start again; returns once the new one is ready."""

    def stop(self) -> None:
        """End of use: fail if the operator did not run (and, locally, exit) cleanly."""

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of its log, for assertion messages."""


class LocalOperator:
    """An operator process made by ``start``, replaced by a new one on restart."""

    def __init__(self, start: Callable[[], OperatorProcess]) -> None:
        self._start = start
        self.process = self._launch()
        self.command = self.process.command

    def _launch(self) -> OperatorProcess:
        process = self._start()
        process.wait_ready()
        return process

    def metrics(self) -> str:
        return self.process.metrics()

    def alive(self) -> bool:
        return self.process.alive()

    def restart(self) -> None:
        self.stop()
        self.process = self._launch()

    def stop(self) -> None:
        code = self.process.stop()
        assert code == 0, f"{self.command} exited {code} on SIGTERM; log:\n{self.log_tail()}"

    def log_tail(self, lines: int = 40) -> str:
        return self.process.log_tail(lines)


class InClusterOperator:
    """The Deployment of an operator's chart (release named like the chart) in ``namespace``.

    Metrics come through the API server's service proxy; a restart deletes the pod and waits for
    the Deployment's next one to be ready.
    """

    def __init__(self, cluster: Cluster, command: str, namespace: str) -> None:
        self.cluster, self.command, self.namespace = cluster, command, namespace
        self.name = CHARTS[command].name
        self._selector = (
            f"app.kubernetes.io/name={self.name},app.kubernetes.io/instance={self.name}"
        )
        self.wait_ready()
        self._pods = self._ready_pods()

    def _ready(self) -> list[dict[str, Any]]:
        """The Deployment's pods that are Ready and not being deleted."""
        listing = json.loads(
            self.cluster.kubectl("get", "pods", "-n", self.namespace, "-o", "json",
                                 "-l", self._selector)
        )  # fmt: skip
        ready = []
        for pod in listing["items"]:
            conditions = pod.get("status", {}).get("conditions", [])
            if "deletionTimestamp" not in pod["metadata"] and any(
                c["type"] == "Ready" and c["status"] == "True" for c in conditions
            ):
                ready.append(pod)
        return ready

    def _ready_pods(self) -> dict[str, int]:
        """Ready pods of the Deployment: uid -> restart count."""
        return {
            pod["metadata"]["uid"]: sum(
                c.get("restartCount", 0) for c in pod["status"].get("containerStatuses", [])
            )
            for pod in self._ready()
        }

    def wait_ready(self, timeout: float = 120) -> None:
        """Wait until exactly one pod of the Deployment is ready."""
        wait_until(
            self._ready_pods,
            lambda pods: len(pods) == 1,
            timeout=timeout,
            what=f"one ready pod of deployment {self.namespace}/{self.name}",
        )

    def metrics(self) -> str:
        """The leader's /metrics: the pod holding the Lease, through the API server's pod proxy.
        Through the Service, a standby or a pod on its way out (just after a scale-down) could
        answer, with counters of its own."""
        leader = wait_until(
            self._leader,
            lambda pod: pod is not None,
            timeout=60,
            what=f"a ready pod of {self.namespace}/{self.name} holding its Lease",
        )
        assert leader is not None
        (port,) = [
            p["containerPort"] for p in leader["spec"]["containers"][0]["ports"]
            if p["name"] == "metrics"
        ]  # fmt: skip
        name = leader["metadata"]["name"]
        path = f"/api/v1/namespaces/{self.namespace}/pods/{name}:{port}/proxy/metrics"
        return self.cluster.kubectl("get", "--raw", path)

    def _leader(self) -> dict[str, Any] | None:
        """The ready pod that holds the Lease (named after the Deployment), if one does."""
        holder = self.cluster.kubectl(
            "get", "lease", self.name, "-n", self.namespace, "-o", "jsonpath={.spec.holderIdentity}"
        )
        return next((pod for pod in self._ready() if pod["metadata"]["name"] == holder), None)

    def alive(self) -> bool:
        return self._ready_pods() == self._pods

    def restart(self) -> None:
        self.cluster.kubectl(
            "delete",
            "pods",
            "-n",
            self.namespace,
            "-l",
            self._selector,
            "--wait=true",
        )
        old = set(self._pods)
        self._pods = wait_until(
            self._ready_pods,
            lambda pods: len(pods) == 1 and not old & set(pods),
            timeout=120,
            what=f"a new ready pod of deployment {self.namespace}/{self.name}",
        )

    def stop(self) -> None:
        assert self.alive(), (
            f"{self.command} restarted or is not ready (pods {self._ready_pods()}, "
            f"expected {self._pods}); log:\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 40) -> str:
        try:
            return self.cluster.kubectl(
                "logs", "-n", self.namespace, f"deployment/{self.name}", f"--tail={lines}"
            )
        except RuntimeError as exc:
            return str(exc)


def operator_handle(
    cluster: Cluster, command: str, start: Callable[[], OperatorProcess]
) -> OperatorHandle:
    """The operator ``command`` for a test: the process ``start`` makes (local mode, ready when
    returned), or the one in the cluster (in-cluster mode; ``start`` is not called)."""
    if operators_mode() == "in-cluster":
        namespace = os.environ.get("E2E_NAMESPACE", RELEASE_NAMESPACE)
        return InClusterOperator(cluster, command, namespace)
    return LocalOperator(start)
