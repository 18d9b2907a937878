"""Where the API server is and how to log in to it: the pod's service account, else a
kubeconfig, as client-go's ``rest.InClusterConfig`` and ``clientcmd`` find them.

In a cluster: ``KUBERNETES_SERVICE_HOST``/``_PORT``, the service account's CA, and its token,
read again from the file a minute after it was last read, as the kubelet rotates it (client-go
does the same). Elsewhere: the files of ``KUBECONFIG`` (a list, merged as client-go merges it:
the first file that sets a name or the current context wins), else ``~/.kube/config``, in the
current context: the server, its CA (file or data), ``insecure-skip-tls-verify``,
``tls-server-name`` and ``proxy-url``; the user's bearer token (inline or ``tokenFile``), client
certificate and key (files or data), basic credentials, or an exec credential plugin
(``client.authentication.k8s.io`` ExecCredential; a client certificate it gives is taken at
start). An exec plugin runs at start, then again ahead of its token's expiry, in a thread: a
cloud provider's can take seconds, which on the event loop would stall everything, the Lease's
renewal included (#32, item 2). Relative paths are relative to the file that names
them. Certificate or key *data* is written to a private temporary directory, removed at exit:
Python's ``ssl`` loads certificates and keys from files only. The legacy ``auth-provider``
plugins (gcp, oidc, azure) are refused with a clear error, as client-go no longer has them.

This is what the operators need of the ``kubernetes`` package's loaders, without importing it:
that package (its generated client, which kopf imports whenever the package is installed)
costs an operator memory and start-up time at every start (#19, bench/README.md).
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import concurrent.futures
import json
import logging
import math
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import yaml

__all__ = [
    "SERVICE_ACCOUNT",
    "ConfigError",
    "Configuration",
    "Credentials",
    "load_configuration",
]

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where the kubelet mounts the pod's service account token and the cluster's CA."""
TOKEN_REREAD_AFTER = 60.0
"""Seconds after which a token file is read again (client-go's cachingTokenSource: 1 min)."""
EXEC_TIMEOUT = 60.0
"""Seconds an exec credential plugin may run. It runs again that long before its token expires
(or half the token's lifetime before, if shorter), so that the run ends, or gives up, while
the token is still valid."""

log = logging.getLogger(__name__)


class ConfigError(Exception):
    """No usable configuration: not in a cluster and no (usable) kubeconfig."""


class Credentials(Protocol):
    """What a request's ``Authorization`` header carries, asked for before every request."""

    async def authorization(self) -> str | None:
        """The header's value (``Bearer <token>``, ``Basic <…>``), or None."""
        ...


@dataclass(frozen=True)
class Configuration:
    """The API server and how to reach and log in to it."""

    host: str
    """``https://host:port`` (perhaps with a path prefix), or ``http://…``."""
    ca_file: str | None = None
    """The CA bundle that verifies the server (None: the system's)."""
    cert_file: str | None = None
    """The client certificate (PEM), with ``key_file`` its key."""
    key_file: str | None = None
    verify: bool = True
    """False: the server's certificate is not verified (insecure-skip-tls-verify)."""
    tls_server_name: str | None = None
    """The name the server's certificate is verified against (default: the host)."""
    proxy: str | None = None
    """An ``http://`` proxy to go through."""
    credentials: Credentials | None = None

    async def authorization(self) -> str | None:
        """The ``Authorization`` header for the next request, or None."""
        return await self.credentials.authorization() if self.credentials is not None else None

    async def bearer_token(self) -> str | None:
        """The bearer token the credentials carry now, or None."""
        header = await self.authorization() or ""
        scheme, _, token = header.partition(" ")
        return token if scheme.lower() == "bearer" and token else None


@dataclass
class StaticToken:
    """A bearer token given inline."""

    token: str

    async def authorization(self) -> str | None:
        """``Bearer <token>``."""
        return f"Bearer {self.token}"


@dataclass
class TokenFile:
    """A bearer token read from a file, and read again once ``reread_after`` has passed."""

    path: Path
    reread_after: float = TOKEN_REREAD_AFTER
    clock: Callable[[], float] = time.monotonic
    _token: str = ""
    _read_at: float | None = None

    async def authorization(self) -> str | None:
        """``Bearer <token>`` from the file as last read (again if due)."""
        now = self.clock()
        if self._read_at is None or now - self._read_at >= self.reread_after:
            try:
                self._token = self.path.read_text().strip()
            except OSError:
                if self._read_at is None:
                    raise
            self._read_at = now
        return f"Bearer {self._token}" if self._token else None


@dataclass
class BasicAuth:
    """A username and password (basic authentication)."""

    username: str
    password: str

    async def authorization(self) -> str | None:
        """``Basic <base64 of username:password>``."""
        pair = f"{self.username}:{self.password}".encode()
        return f"Basic {base64.b64encode(pair).decode()}"


@dataclass(frozen=True)
class _ExecCredential:
    """What one run of an exec plugin gave, and when (``ExecPlugin.clock`` time) it is due to
    run again and when its token expires (``math.inf``: never)."""

    status: Mapping[str, Any]
    refresh_at: float
    expires: float


@dataclass
class ExecPlugin:
    """A client-go exec credential plugin: runs ``command`` for an ExecCredential, and again
    ahead of its token's expiry. Runs after the first take place in a thread of their own, off
    the event loop; every caller, on any event loop, shares the one under way."""

    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    api_version: str = "client.authentication.k8s.io/v1"
    cluster: Mapping[str, Any] | None = None
    """The cluster, when the plugin asks for it (``provideClusterInfo``)."""
    clock: Callable[[], float] = time.time
    _credential: _ExecCredential | None = field(default=None, init=False, repr=False)
    _run: concurrent.futures.Future[_ExecCredential] | None = field(
        default=None, init=False, repr=False
    )
    """The last run started in a thread."""
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @property
    def status(self) -> Mapping[str, Any]:
        """The last ExecCredential's status (empty before the first run)."""
        return self._credential.status if self._credential is not None else {}

    def run_now(self) -> None:
        """Run the plugin now, blocking: at start, so that a broken plugin fails the start and
        not a request."""
        self._credential = self._execute()

    async def authorization(self) -> str | None:
        """``Bearer <token>``. Once the token is due, the plugin runs again while it is still
        used; once it has expired, callers wait for that run."""
        credential = self._credential
        now = self.clock()
        if credential is None or now >= credential.expires:
            credential = await asyncio.wrap_future(self._running(after_failure=True))
        elif now >= credential.refresh_at:
            self._running(after_failure=False)
        token = credential.status.get("token")
        return f"Bearer {token}" if token else None

    def _running(self, *, after_failure: bool) -> concurrent.futures.Future[_ExecCredential]:
        """The run under way, else a new one; after a failed run, a new one only if
        ``after_failure`` (the token has expired): a plugin that fails ahead of the expiry is
        not run again on every request until then."""
        with self._lock:
            last = self._run
            if last is not None and not (
                last.done() and (after_failure or last.exception() is None)
            ):
                return last
            run: concurrent.futures.Future[_ExecCredential] = concurrent.futures.Future()
            run.set_running_or_notify_cancel()  # a caller that stops waiting cannot cancel it
            self._run = run
        threading.Thread(target=self._run_in_thread, args=(run,), daemon=True).start()
        return run

    def _run_in_thread(self, run: concurrent.futures.Future[_ExecCredential]) -> None:
        try:
            credential = self._execute()
        except Exception as exc:  # handed to the callers waiting for it
            run.set_exception(exc)
            log.warning("exec credential plugin %r failed: %s", self.command, exc)
        else:
            self._credential = credential
            run.set_result(credential)

    def _execute(self) -> _ExecCredential:
        """Run the plugin (blocking) and read its ExecCredential."""
        spec: dict[str, Any] = {"interactive": False}
        if self.cluster is not None:
            spec["cluster"] = dict(self.cluster)
        info = {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": spec}
        env = {**os.environ, **self.env, "KUBERNETES_EXEC_INFO": json.dumps(info)}
        try:
            done = subprocess.run(
                [self.command, *self.args],
                env=env,
                capture_output=True,
                text=True,
                timeout=EXEC_TIMEOUT,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ConfigError(f"exec credential plugin {self.command!r}: {exc}") from exc
        if done.returncode != 0:
            raise ConfigError(
                f"exec credential plugin {self.command!r} exited {done.returncode}: "
                f"{done.stderr.strip()[:500]}"
            )
        try:
            status = json.loads(done.stdout)["status"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"exec credential plugin {self.command!r}: no status") from exc
        expiry = status.get("expirationTimestamp")
        expires = (
            datetime.fromisoformat(expiry.replace("Z", "+00:00")).timestamp()
            if expiry
            else math.inf
        )
        refresh_at = expires - min(EXEC_TIMEOUT, (expires - self.clock()) / 2)
        return _ExecCredential(status, refresh_at, expires)


def load_configuration(
    environ: Mapping[str, str] | None = None, service_account: Path = SERVICE_ACCOUNT
) -> Configuration:
    """The pod's service account when in a cluster, else the kubeconfig's current context."""
    env = os.environ if environ is None else environ
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    token = service_account / "token"
    if host and port and token.exists():
        if ":" in host:  # IPv6
            host = f"[{host}]"
        return Configuration(
            host=f"https://{host}:{port}",
            ca_file=str(service_account / "ca.crt"),
            credentials=TokenFile(token),
        )
    paths = [p for p in env.get("KUBECONFIG", "").split(os.pathsep) if p]
    if not paths:
        paths = [str(Path(env.get("HOME", str(Path.home()))) / ".kube" / "config")]
    return from_kubeconfig([Path(p).expanduser() for p in paths])


def from_kubeconfig(paths: Sequence[Path]) -> Configuration:
    """The current context of the kubeconfig files ``paths``, merged as client-go merges
    them (files that do not exist are skipped; none at all is an error)."""
    merged: dict[str, dict[str, tuple[Path, dict[str, Any]]]] = {
        "clusters": {},
        "users": {},
        "contexts": {},
    }
    current: str | None = None
    found = False
    for path in paths:
        if not path.is_file():
            continue
        found = True
        document = yaml.safe_load(path.read_text()) or {}
        if not isinstance(document, dict):
            raise ConfigError(f"{path}: not a kubeconfig")
        current = current or document.get("current-context") or None
        for section, key in (("clusters", "cluster"), ("users", "user"), ("contexts", "context")):
            for entry in document.get(section) or ():
                name = entry.get("name")
                if name is not None and name not in merged[section]:
                    merged[section][name] = (path.parent, entry.get(key) or {})
    if not found:
        raise ConfigError(
            "not in a cluster (no service account) and no kubeconfig at "
            + os.pathsep.join(str(p) for p in paths)
        )
    if not current or current not in merged["contexts"]:
        raise ConfigError(f"kubeconfig: current context {current!r} not found")
    _, context = merged["contexts"][current]
    cluster_name, user_name = context.get("cluster"), context.get("user")
    if cluster_name not in merged["clusters"]:
        raise ConfigError(f"kubeconfig: cluster {cluster_name!r} of context {current!r} not found")
    base, cluster = merged["clusters"][cluster_name]
    user_base, user = merged["users"].get(str(user_name), (base, {}))
    server = cluster.get("server")
    if not server:
        raise ConfigError(f"kubeconfig: cluster {cluster_name!r} has no server")
    cert_file, key_file = (
        _file(user_base, user, "client-certificate"),
        _file(user_base, user, "client-key"),
    )
    credentials, exec_cert = _credentials(user_base, user, cluster, server)
    if exec_cert is not None:
        cert_file, key_file = exec_cert
    return Configuration(
        host=server.rstrip("/"),
        ca_file=_file(base, cluster, "certificate-authority"),
        cert_file=cert_file,
        key_file=key_file,
        verify=not cluster.get("insecure-skip-tls-verify", False),
        tls_server_name=cluster.get("tls-server-name") or None,
        proxy=cluster.get("proxy-url") or None,
        credentials=credentials,
    )


def _credentials(
    base: Path, user: Mapping[str, Any], cluster: Mapping[str, Any], server: str
) -> tuple[Credentials | None, tuple[str, str] | None]:
    """The user's credentials, and the client certificate and key an exec plugin gave."""
    if "auth-provider" in user:
        name = (user["auth-provider"] or {}).get("name", "?")
        raise ConfigError(
            f"kubeconfig: the {name!r} auth-provider is not supported (client-go dropped the "
            "auth-provider plugins); use an exec credential plugin"
        )
    if user.get("token"):
        return StaticToken(str(user["token"])), None
    if user.get("tokenFile"):
        return TokenFile(base / user["tokenFile"]), None
    if user.get("username") is not None:
        return BasicAuth(str(user["username"]), str(user.get("password", ""))), None
    spec = user.get("exec")
    if not spec:
        return None, None
    exec_cluster = None
    if spec.get("provideClusterInfo"):
        exec_cluster = {"server": server, **{k: v for k, v in cluster.items() if k != "extensions"}}
    command = str(spec["command"])
    if os.sep in command and not Path(command).is_absolute():
        command = str(base / command)
    plugin = ExecPlugin(
        command=command,
        args=[str(a) for a in spec.get("args") or ()],
        env={e["name"]: str(e["value"]) for e in spec.get("env") or ()},
        api_version=spec.get("apiVersion", "client.authentication.k8s.io/v1"),
        cluster=exec_cluster,
    )
    plugin.run_now()
    cert, key = plugin.status.get("clientCertificateData"), plugin.status.get("clientKeyData")
    if cert and key:
        return plugin, (
            _scratch_file("client.crt", cert.encode()),
            _scratch_file("client.key", key.encode()),
        )
    return plugin, None


def _file(base: Path, section: Mapping[str, Any], name: str) -> str | None:
    """A kubeconfig ``name`` (a path) or ``name-data`` (base64) as a file path, or None."""
    data = section.get(f"{name}-data")
    if data:
        return _scratch_file(name, base64.b64decode(data))
    path = section.get(name)
    return str(base / Path(path).expanduser()) if path else None


_scratch: Path | None = None


def _scratch_file(name: str, content: bytes) -> str:
    """Write ``content`` to a private temporary file, removed when the process exits."""
    global _scratch  # one directory per process
    if _scratch is None:
        _scratch = Path(tempfile.mkdtemp(prefix="opsuite-kubeconfig-"))
        atexit.register(shutil.rmtree, _scratch, ignore_errors=True)
    path = _scratch / f"{len(list(_scratch.iterdir()))}-{name}"
    path.touch(mode=0o600)
    path.write_bytes(content)
    return str(path)
