"""Which cluster the e2e suite runs against, and small helpers to talk to it.

Order of preference: ``E2E_KUBECONFIG``; a kind cluster through pytest-kind when a Docker
engine answers (GitHub Actions); otherwise the local control plane (hack/localplane.py),
started here when it is not up.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client, config
from kubernetes.client.rest import ApiException

from e2e import argocd_health

ROOT = Path(__file__).resolve().parent.parent
KUBECTL_CACHE = tempfile.mkdtemp(prefix="opsuite-e2e-kubectl-cache-")
"""kubectl's discovery cache for this run only: a cache kept from an earlier cluster on the same
address would list resource types this one does not have."""
LOCAL_KUBECONFIG = ROOT / ".local" / "kubeconfig"
LOCAL_AUDIT_LOG = ROOT / ".local" / "audit.log"
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
"""The audit log's verbs of requests that change objects."""

T = TypeVar("T")


@dataclass(frozen=True)
class Cluster:
    """A cluster under test: its kubeconfig and, where the suite can read it, its audit log."""

    kind: str  # "external" | "kind" | "local"
    kubeconfig: Path
    audit_log: Path | None
    operator_kubeconfigs: dict[str, Path] = field(default_factory=dict, compare=False)
    """Kubeconfig of each operator (by console script) when it runs as its chart's identity."""

    def operator_kubeconfig(self, command: str) -> Path:
        """The kubeconfig an operator process uses: its chart's identity, else the admin's."""
        return self.operator_kubeconfigs.get(command, self.kubeconfig)

    def api_client(self) -> client.ApiClient:
        """A fresh API client for this cluster's admin identity."""
        api_client: client.ApiClient = config.new_client_from_config(
            config_file=str(self.kubeconfig)
        )
        return api_client

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        """Run kubectl against this cluster and return stdout; raise with stderr on failure."""
        out = subprocess.run(
            [
                kubectl_binary(),
                "--kubeconfig",
                str(self.kubeconfig),
                f"--cache-dir={KUBECTL_CACHE}",
                *args,
            ],
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed: {out.stderr.strip()}")
        return out.stdout


def kubectl_binary() -> str:
    """kubectl on PATH, else the one hack/build-tools.sh built."""
    return shutil.which("kubectl") or str(ROOT / ".local" / "bin" / "kubectl")


def docker_available() -> bool:
    """True when a Docker engine answers (kind can run)."""
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True, check=False).returncode == 0


def start_local_plane() -> Cluster:
    """Bring up the local control plane (no-op when running) and describe it."""
    subprocess.run([sys.executable, str(ROOT / "hack" / "localplane.py"), "up"], check=True)
    return Cluster("local", LOCAL_KUBECONFIG, LOCAL_AUDIT_LOG)


def service_account_client(
    api: client.ApiClient, namespace: str, name: str, *, user_agent: str | None = None
) -> client.ApiClient:
    """An API client authenticating as an existing ServiceAccount, through a TokenRequest."""
    token = (
        client.CoreV1Api(api)
        .create_namespaced_service_account_token(
            name, namespace, {"spec": {"expirationSeconds": 600}}
        )
        .status.token
    )
    conf = client.Configuration()
    conf.host = api.configuration.host
    conf.ssl_ca_cert = api.configuration.ssl_ca_cert
    conf.api_key = {"authorization": f"Bearer {token}"}
    sa_client = client.ApiClient(conf)
    if user_agent is not None:
        sa_client.user_agent = user_agent
    return sa_client


class WaitTimeout(AssertionError):
    """A wait ran out of time; the message says what was last seen."""


def wait_until(
    probe: Callable[[], T],
    done: Callable[[T], bool],
    *,
    timeout: float,
    what: str,
    interval: float = 0.25,
) -> T:
    """Poll ``probe`` until ``done(value)``; on timeout fail with the last value seen.

    Exceptions from ``probe`` count as "not yet" and are reported if nothing better was seen.
    """
    deadline = time.monotonic() + timeout
    last: object = "<nothing observed>"
    while True:
        try:
            value = probe()
            if done(value):
                return value
            last = value
        except Exception as exc:  # reported on timeout
            last = f"{type(exc).__name__}: {exc}"
        if time.monotonic() >= deadline:
            raise WaitTimeout(
                f"timed out after {timeout:.0f} s waiting for {what}; last seen: {last}"
            )
        time.sleep(interval)


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    """The condition of ``type_`` in ``obj.status.conditions`` ({} when absent). The object is
    also kept for e2e/test_argocd_health.py, which checks what Argo CD would make of it."""
    argocd_health.observe(obj)
    for c in obj.get("status", {}).get("conditions", []):
        if c["type"] == type_:
            return dict(c)
    return {}


def wait_observed(
    read: Callable[[], dict[str, Any]],
    done: Callable[[dict[str, Any]], bool],
    *,
    what: str,
    timeout: float = 60,
) -> dict[str, Any]:
    """Wait until the custom resource ``read`` returns satisfies ``done`` with a status of its
    current generation (status.observedGeneration == metadata.generation)."""

    def current(obj: dict[str, Any]) -> bool:
        observed = obj.get("status", {}).get("observedGeneration")
        return observed == obj["metadata"]["generation"] and done(obj)

    return wait_until(read, current, timeout=timeout, what=what)


def audit_events(path: Path, needle: str | None = None) -> Iterator[dict[str, Any]]:
    """Parsed audit-log events (JSON lines), rotated files included; with ``needle``, only
    the lines containing it are parsed (a cheap filter for a large log)."""
    for line in _audit_lines(path):
        if needle is not None and needle not in line:
            continue
        try:
            event: dict[str, Any] = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line being written
        yield event


def flush_audit_log(cluster: Cluster, api: client.ApiClient) -> Path:
    """Make a marker request and wait until the (batched) audit log holds it: every request
    made before it is then in the log too. The log's path."""
    assert cluster.audit_log is not None
    audit_log = cluster.audit_log
    marker = f"audit-marker-{uuid.uuid4().hex[:8]}"
    with contextlib.suppress(ApiException):  # 404: the marker does not exist
        client.CoreV1Api(api).read_namespaced_config_map(marker, "default")

    def seen() -> bool:
        return any(marker in line for line in _audit_lines(audit_log, newest_only=True))

    wait_until(seen, bool, timeout=30, interval=0.5, what=f"audit event for {marker}")
    return audit_log


def _audit_lines(path: Path, *, newest_only: bool = False) -> Iterator[str]:
    files = sorted(path.parent.glob(path.stem + "*" + path.suffix))
    for f in [path] if newest_only else files:
        with f.open() as lines:
            yield from lines
