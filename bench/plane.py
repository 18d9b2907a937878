"""The local control plane as the benchmarks use it: start-up, client, namespaces, CRDs."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.client.rest import RESTResponse

from opsuite_common.kube import resource_path

ROOT = Path(__file__).resolve().parent.parent
LOCAL = ROOT / ".local"
KUBECONFIG = LOCAL / "kubeconfig"
AUDIT_LOG = LOCAL / "audit.log"
KUBECTL = LOCAL / "bin" / "kubectl"
USER_AGENT = "opsuite-bench"


def ensure_up(fake_nodes: int | None = None) -> None:
    """Start the local plane unless it is running (hack/localplane.py up is idempotent);
    ``fake_nodes`` adds kwok nodes to a running plane when it has fewer. A plane that answers
    and has that many Ready kwok nodes is left alone (no localplane.py run at all)."""
    if _ready_fake_nodes() >= (fake_nodes or 0):
        return
    env = dict(os.environ)
    if fake_nodes is not None:
        env["OPSUITE_PLANE_FAKE_NODES"] = str(fake_nodes)
    localplane = [sys.executable, str(ROOT / "hack" / "localplane.py"), "up"]
    subprocess.run(localplane, check=True, env=env)


FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"


def _ready_fake_nodes() -> int:
    """Ready kwok nodes of the plane; -1 when it does not answer."""
    try:
        nodes = request_json(api_client(), "GET", resource_path("v1", "nodes"))
    except Exception:  # no kubeconfig, refused, TLS, 5xx: not running as far as we can tell
        return -1
    return sum(
        1
        for n in nodes.get("items") or []
        if (n["metadata"].get("annotations") or {}).get(FAKE_NODE_ANNOTATION) == "fake"
        and any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (n.get("status") or {}).get("conditions") or []
        )
    )


def api_client(kubeconfig: Path = KUBECONFIG) -> client.ApiClient:
    """An admin client whose requests the audit log shows as the benchmark's."""
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)  # type: ignore[no-untyped-call]
    configuration.connection_pool_maxsize = 16
    api = client.ApiClient(configuration)
    api.user_agent = USER_AGENT
    return api


def request(
    api: client.ApiClient,
    method: str,
    path: str,
    *,
    query: Mapping[str, str] | None = None,
    body: object = None,
    content_type: str = "application/json",
    timeout: float | tuple[float, float] = 30.0,
) -> RESTResponse:
    """One raw API request; the response body is not read yet (so it can be streamed).

    Raises ``ApiException`` on a status outside 2xx.
    """
    serialized = api.param_serialize(
        method,
        path,
        query_params=list((query or {}).items()),
        header_params={"Accept": "application/json", "Content-Type": content_type},
        body=body,
        auth_settings=["BearerToken"],
    )
    response = api.call_api(*serialized, _request_timeout=timeout)
    if not 200 <= response.status <= 299:
        raw = read(response)
        raise ApiException.from_response(http_resp=response, body=raw.decode(), data=None)
    return response


def read(response: RESTResponse) -> bytes:
    """The whole body of a response from :func:`request`."""
    data = response.read()  # type: ignore[no-untyped-call]
    return bytes(data or b"")


def request_json(
    api: client.ApiClient,
    method: str,
    path: str,
    *,
    body: object = None,
    content_type: str = "application/json",
) -> dict[str, Any]:
    """One API request; the parsed JSON response."""
    raw = read(request(api, method, path, body=body, content_type=content_type))
    parsed: dict[str, Any] = json.loads(raw) if raw else {}
    return parsed


def _exists(api: client.ApiClient, path: str) -> bool:
    try:
        read(request(api, "GET", path))
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def kubectl(*args: str) -> str:
    """Run kubectl as admin; stdout. Raises RuntimeError with stderr on failure."""
    out = subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(KUBECONFIG), *args],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


def apply_crds(directory: Path, *names: str) -> None:
    """Apply the CRDs in ``directory`` and wait until ``names`` are established."""
    kubectl("apply", "--server-side", "--force-conflicts", "-f", str(directory))
    for name in names:
        kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{name}")


def create_namespace(
    api: client.ApiClient, name: str, labels: dict[str, str], timeout: float = 60.0
) -> None:
    """Create a namespace and wait for its default ServiceAccount (pod admission needs it)."""
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
    request_json(api, "POST", resource_path("v1", "namespaces"), body=body)
    deadline = time.monotonic() + timeout
    while not _exists(api, resource_path("v1", "serviceaccounts", name, "default")):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no default ServiceAccount in namespace {name}")
        time.sleep(0.2)


def delete_namespaces(api: client.ApiClient, names: list[str], timeout: float = 120.0) -> list[str]:
    """Delete namespaces and wait until they are gone; the names still there at the timeout."""
    options = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
    for name in names:
        with contextlib.suppress(ApiException):
            read(
                request(api, "DELETE", resource_path("v1", "namespaces", None, name), body=options)
            )
    deadline = time.monotonic() + timeout
    remaining = list(names)
    while remaining and time.monotonic() < deadline:
        remaining = [
            n for n in remaining if _exists(api, resource_path("v1", "namespaces", None, n))
        ]
        if remaining:
            time.sleep(1.0)
    return remaining


def server_version(api: client.ApiClient) -> str:
    """The API server's gitVersion."""
    return str(request_json(api, "GET", "/version").get("gitVersion", "unknown"))


WATCH_SECONDS = 300
"""Server-side timeout of one watch request; the trackers re-watch from the last version."""
READ_TIMEOUT = 40.0
"""Client read timeout: longer than a stalled API server (e2e chaos stops it for up to 25 s)."""


def watch_events(
    api: client.ApiClient,
    path: str,
    query: dict[str, str],
    resource_version: str,
    hold: Callable[[Any], None],
) -> Iterator[tuple[float, dict[str, Any]]]:
    """Stream one watch request from ``resource_version``: (arrival time, event) per line.

    ``hold`` gets the open response (so another thread can close it to stop the watch), then
    None once it has ended.
    """
    params = {
        **query,
        "watch": "true",
        "resourceVersion": resource_version,
        "allowWatchBookmarks": "true",
        "timeoutSeconds": str(WATCH_SECONDS),
    }
    stream = request(api, "GET", path, query=params, timeout=(5, READ_TIMEOUT)).response
    hold(stream)
    buffer = b""
    try:
        for chunk in stream.stream(amt=None, decode_content=False):
            at = time.monotonic()
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if line.strip():
                    yield at, json.loads(line)
    finally:
        hold(None)
        stream.release_conn()
