"""KubeApi counts every request it sends in rest_client_requests_total, as client-go does; the
bytes of a request cannot reach the API server long after they were sent."""

import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from kubernetes.client import ApiClient, Configuration
from kubernetes.config import kube_config
from urllib3.connection import HTTPConnection

from opsuite_common.fence import WriteFence
from opsuite_common.kube import UNACKNOWLEDGED_TIMEOUT, ApiException, KubeApi, load_api_client
from opsuite_common.leader_election import KubernetesLeaseApi, LeaderElectionConfig
from opsuite_common.metrics import REGISTRY


def requests(code: str, method: str, host: str) -> float:
    labels = {"code": code, "method": method, "host": host}
    return REGISTRY.get_sample_value("rest_client_requests_total", labels) or 0.0


def kube_api(host: str) -> KubeApi:
    fence = WriteFence()
    fence.open()
    return KubeApi(ApiClient(Configuration(host=f"http://{host}")), fence=fence, request_timeout=5)


@pytest.fixture
async def api_server() -> AsyncIterator[str]:
    async def pod(request: web.Request) -> web.Response:
        if request.match_info["name"] == "missing":
            status = {"kind": "Status", "code": 404, "reason": "NotFound"}
            return web.json_response(status, status=404)
        return web.json_response({"kind": "Pod", "metadata": {"name": "a"}})

    async def create(request: web.Request) -> web.Response:
        return web.json_response(await request.json(), status=201)

    async def lease(request: web.Request) -> web.Response:
        return web.json_response({"kind": "Status", "code": 404}, status=404)

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/ns/pods/{name}", pod)
    app.router.add_post("/api/v1/namespaces/ns/pods", create)
    app.router.add_get("/apis/coordination.k8s.io/v1/namespaces/ns/leases/{name}", lease)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_every_request_is_counted_by_code_method_and_host(api_server: str) -> None:
    host = api_server
    kube = kube_api(host)
    assert await kube.get("/api/v1/namespaces/ns/pods/a") is not None
    assert await kube.get("/api/v1/namespaces/ns/pods/missing") is None
    with pytest.raises(ApiException):
        await kube.request("GET", "/api/v1/namespaces/ns/pods/missing")
    await kube.create("/api/v1/namespaces/ns/pods", {"kind": "Pod"})
    # A KubeApi sharing the client (Events) and the Lease API on it count once each.
    await kube.with_parallelism(1).get("/api/v1/namespaces/ns/pods/a")
    assert await KubernetesLeaseApi(kube.api_client).get("ns", "lock") is None
    assert requests("200", "GET", host) == 2
    assert requests("404", "GET", host) == 3
    assert requests("201", "POST", host) == 1


async def test_a_request_that_gets_no_response_counts_as_an_error() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        host = f"127.0.0.1:{sock.getsockname()[1]}"
    kube = kube_api(host)
    with pytest.raises(Exception, match=r"(?i)connect|refused"):
        await kube.get("/api/v1/namespaces/ns/pods/a")
    assert requests("<error>", "GET", host) == 1


def test_bytes_sent_to_a_vanished_api_server_are_dropped_before_a_standby_can_lead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api_server: str
) -> None:
    """#20: a request sent just before a partition sits in the kernel's send queue and would be
    retransmitted, and executed, when the partition heals, however long after. TCP_USER_TIMEOUT
    on every connection to the API server drops the connection, and the bytes, once they stay
    unacknowledged for UNACKNOWLEDGED_TIMEOUT: less than the time between the fence closing at
    the renew deadline and the lease expiring for a standby."""
    config = LeaderElectionConfig(name="x", namespace="ns", identity="a")
    margin = config.lease_duration - config.retry_period - config.renew_deadline
    assert 0 < UNACKNOWLEDGED_TIMEOUT < margin
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": f"http://{api_server}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    (tmp_path / "kubeconfig").write_text(json.dumps(kubeconfig))
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(tmp_path / "kubeconfig"))
    api_client = load_api_client("test")
    pool = api_client.rest_client.pool_manager.connection_from_url(f"http://{api_server}/")
    connection = pool._get_conn()
    assert isinstance(connection, HTTPConnection)
    connection.connect()
    try:
        sock = connection.sock
        option = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT)
        assert option == int(UNACKNOWLEDGED_TIMEOUT * 1000)
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    finally:
        connection.close()
