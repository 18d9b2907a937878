"""Where the API server is and how to log in to it: the pod's service account, else a
kubeconfig, as client-go's ``rest.InClusterConfig`` and ``clientcmd`` find them.

In a cluster: ``KUBERNETES_SERVICE_HOST``/``_PORT``, the service account's CA, and its token
file. Elsewhere: the files of ``KUBECONFIG`` (a list, merged as client-go merges it: the first
file that sets a name or the current context wins), else ``~/.kube/config``, in the current
context: the server, its CA (file or data), ``insecure-skip-tls-verify``, ``tls-server-name``
and ``proxy-url``; the user's bearer token (inline or ``tokenFile``), client certificate and key
(files or data), basic credentials, or an exec credential plugin (a client certificate it gives
is taken at start); :mod:`opsuite_common.credentials` holds what each kind of credential does
for a request. Relative paths are relative to the file that names them. Certificate or key
*data* is written to a private temporary directory, removed at exit: Python's ``ssl`` loads
certificates and keys from files only. The legacy ``auth-provider`` plugins (gcp, oidc, azure)
are refused with a clear error, as client-go no longer has them.

This is what the operators need of the ``kubernetes`` package's loaders, without importing it:
that package (its generated client, which kopf imports whenever the package is installed)
costs an operator memory and start-up time at every start (#19, bench/README.md).
"""

from __future__ import annotations

import atexit
import base64
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from opsuite_common.credentials import (
    BasicAuth,
    ConfigError,
    Credentials,
    ExecPlugin,
    StaticToken,
    TokenFile,
)

__all__ = ["SERVICE_ACCOUNT", "Configuration", "load_configuration"]

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where the kubelet mounts the pod's service account token and the cluster's CA."""


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
