"""KubeApi against a real local HTTP(S) server: credentials (KUBECONFIG, and in-cluster with a
rotated token) and the User-Agent on every request, error statuses, pagination, the bound on
requests in flight, rest_client_requests_total as client-go counts it, no byte of a request
reaching the API server long after it was sent (TCP_USER_TIMEOUT), and the retries the API
server asks for (429 or 5xx with Retry-After)."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from opsuite_common import kube as kube_module
from opsuite_common import kube_transport
from opsuite_common.credentials import TokenFile
from opsuite_common.fence import WriteFence, WriteFenced
from opsuite_common.kube import ApiException, KubeApi
from opsuite_common.kube_transport import (
    TLS_READ_BUFFER,
    UNACKNOWLEDGED_TIMEOUT,
    ResumingContext,
    bound_tls_read_buffers,
)
from opsuite_common.kubeconfig import Configuration, load_configuration
from opsuite_common.leader_election import LeaderElectionConfig
from opsuite_common.lease_api import KubernetesLeaseApi
from opsuite_common.metrics import REGISTRY
from opsuite_common.metrics_auth import self_signed_certificate
from opsuite_testkit.local_server import serve

PODS = "/api/v1/namespaces/ns/pods"
SLOW = "/api/v1/namespaces/ns/configmaps"


def requests(code: str, method: str, host: str) -> float:
    labels = {"code": code, "method": method, "host": host}
    return REGISTRY.get_sample_value("rest_client_requests_total", labels) or 0.0


@dataclass
class Seen:
    """What the server received, and the most requests it had in flight at once."""

    requests: list[web.Request] = field(default_factory=list)
    in_flight: int = 0
    peak: int = 0
    release: asyncio.Event = field(default_factory=asyncio.Event)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)


def api_app(seen: Seen) -> web.Application:
    async def pod(request: web.Request) -> web.Response:
        seen.requests.append(request)
        if request.match_info["name"] == "missing":
            status = {"kind": "Status", "code": 404, "reason": "NotFound"}
            return web.json_response(status, status=404)
        return web.json_response({"kind": "Pod", "metadata": {"name": "a"}})

    async def create(request: web.Request) -> web.Response:
        seen.requests.append(request)
        body = await request.json()
        if body["metadata"]["name"] == "invalid":
            status = {"kind": "Status", "code": 422, "message": 'Pod "invalid" is invalid'}
            return web.json_response(status, status=422, reason="Unprocessable Entity")
        return web.json_response(body, status=201)

    async def pods(request: web.Request) -> web.Response:
        """Five pods, at most two a page (the server may return fewer than ``limit``); the
        continue token is the next index."""
        seen.requests.append(request)
        start = int(request.query.get("continue", "0"))
        end = start + min(int(request.query["limit"]), 2)
        items = [{"metadata": {"name": f"p{i}"}} for i in range(start, min(end, 5))]
        meta = {"continue": str(end)} if end < 5 else {}
        return web.json_response({"kind": "PodList", "metadata": meta, "items": items})

    async def slow(request: web.Request) -> web.Response:
        """Held until the test releases it."""
        seen.requests.append(request)
        seen.in_flight += 1
        seen.peak = max(seen.peak, seen.in_flight)
        seen.arrived.set()
        await seen.release.wait()
        seen.in_flight -= 1
        return web.json_response({}, status=201)

    app = web.Application()
    app.router.add_get(PODS + "/{name}", pod)
    app.router.add_post(PODS, create)
    app.router.add_get(PODS, pods)
    app.router.add_post(SLOW, slow)
    return app


@pytest.fixture
async def api_server() -> AsyncIterator[tuple[str, Seen]]:
    seen = Seen()
    runner = await serve(api_app(seen))
    try:
        yield f"127.0.0.1:{runner.addresses[0][1]}", seen
    finally:
        seen.release.set()
        await runner.cleanup()


@pytest.fixture
async def kube_of() -> AsyncIterator[Any]:
    """KubeApis on plain Configurations (an open fence unless given), closed at the end."""
    made: list[KubeApi] = []

    def make(host: str, *, fence: WriteFence | None = None, max_parallel: int = 64) -> KubeApi:
        if fence is None:
            fence = WriteFence()
            fence.open()
        api = KubeApi(
            Configuration(host=f"http://{host}"),
            user_agent="test",
            fence=fence,
            request_timeout=5,
            max_parallel=max_parallel,
        )
        made.append(api)
        return api

    yield make
    for api in made:
        await api.close()


def write_kubeconfig(path: Path, server: str, user: dict[str, str]) -> None:
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )


async def test_every_request_carries_the_kubeconfig_token_and_the_user_agent(
    api_server: tuple[str, Seen], tmp_path: Path
) -> None:
    host, seen = api_server
    write_kubeconfig(tmp_path / "kubeconfig", f"http://{host}", {"token": "t0k"})
    fence = WriteFence()
    fence.open()
    configuration = load_configuration({"KUBECONFIG": str(tmp_path / "kubeconfig")})
    kube = KubeApi(configuration, user_agent="podset/1.2.3 (pod-a)", fence=fence)
    try:
        await kube.get(f"{PODS}/a")
        await kube.create(PODS, {"metadata": {"name": "b"}})
        await kube.with_parallelism(1).get(f"{PODS}/a")
    finally:
        await kube.close()
    assert [r.headers["Authorization"] for r in seen.requests] == ["Bearer t0k"] * 3
    assert [r.headers["User-Agent"] for r in seen.requests] == ["podset/1.2.3 (pod-a)"] * 3
    assert seen.requests[1].headers["Content-Type"] == "application/json"


async def test_in_cluster_it_verifies_the_server_and_reads_a_rotated_token_again(
    tmp_path: Path,
) -> None:
    """The service account's token is rotated by the kubelet: a request a minute after the
    token was read carries the new one, as client-go's token source would."""
    cert, key = self_signed_certificate("localhost")
    (tmp_path / "ca.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "ca.crt", tmp_path / "tls.key")
    seen = Seen()
    runner = await serve(api_app(seen), ssl_context=context)
    (tmp_path / "token").write_text("first")
    environ = {
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": str(runner.addresses[0][1]),
    }
    configuration = load_configuration(environ, service_account=tmp_path)
    assert isinstance(configuration.credentials, TokenFile)
    now = [0.0]
    configuration.credentials.clock = lambda: now[0]
    kube = KubeApi(configuration, user_agent="test", fence=None)
    try:
        await kube.get(f"{PODS}/a")
        (tmp_path / "token").write_text("second")
        now[0] = 59.0
        await kube.get(f"{PODS}/a")  # within the minute: still the first
        now[0] = 61.0
        await kube.get(f"{PODS}/a")
    finally:
        await kube.close()
        await runner.cleanup()
    tokens = [r.headers["Authorization"] for r in seen.requests]
    assert tokens == ["Bearer first", "Bearer first", "Bearer second"]


async def test_tls_connections_read_through_a_small_buffer_and_get_large_bodies_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After bound_tls_read_buffers a TLS connection holds TLS_READ_BUFFER bytes, not asyncio's
    256 KiB (#21), and a response many times that size still arrives whole."""
    protocol = asyncio.sslproto.SSLProtocol
    monkeypatch.setattr(protocol, "max_size", protocol.max_size)  # restored after the test
    buffers: list[int] = []
    original_init = protocol.__init__

    def init(self: asyncio.sslproto.SSLProtocol, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        buffers.append(len(self._ssl_buffer))  # type: ignore[attr-defined]  # asyncio internal

    monkeypatch.setattr(protocol, "__init__", init)
    bound_tls_read_buffers()
    cert, key = self_signed_certificate("localhost")
    (tmp_path / "ca.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "ca.crt", tmp_path / "tls.key")
    data = {f"key-{i}": "x" * 1000 for i in range(1000)}  # about 1 MiB

    async def configmap(_request: web.Request) -> web.Response:
        return web.json_response({"kind": "ConfigMap", "data": data})

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/ns/configmaps/big", configmap)
    runner = await serve(app, ssl_context=context)
    configuration = Configuration(
        host=f"https://127.0.0.1:{runner.addresses[0][1]}", ca_file=str(tmp_path / "ca.crt")
    )
    kube = KubeApi(configuration, user_agent="test", fence=None)
    try:
        got = await kube.get("/api/v1/namespaces/ns/configmaps/big")
    finally:
        await kube.close()
        await runner.cleanup()
    assert got == {"kind": "ConfigMap", "data": data}
    assert len(buffers) == 2  # the client's connection and the server's
    assert all(size <= TLS_READ_BUFFER for size in buffers), buffers


async def test_the_connections_of_a_burst_resume_the_tls_session_of_the_first(
    tmp_path: Path,
) -> None:
    """A new connection resumes the TLS session of an earlier one instead of a full handshake
    (with a client certificate, a signature with its key each): the first request of a burst
    goes alone, the others once it has its answer and its session (#19)."""
    cert, key = self_signed_certificate("localhost")
    (tmp_path / "ca.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "ca.crt", tmp_path / "tls.key")
    handshakes: dict[ssl.SSLObject, bool] = {}
    """Each connection the server accepted: whether it resumed a session."""

    async def handler(request: web.Request) -> web.Response:
        connection = request.transport.get_extra_info("ssl_object") if request.transport else None
        assert isinstance(connection, ssl.SSLObject)
        handshakes[connection] = connection.session_reused
        await asyncio.sleep(0.05)  # the burst's requests overlap
        return web.json_response({"kind": "Pod"})

    app = web.Application()
    app.router.add_get(PODS + "/{name}", handler)
    runner = await serve(app, ssl_context=context)
    configuration = Configuration(
        host=f"https://127.0.0.1:{runner.addresses[0][1]}", ca_file=str(tmp_path / "ca.crt")
    )
    kube = KubeApi(configuration, user_agent="test", fence=None)
    unknown = Configuration(host=configuration.host)  # the server's CA not given
    stranger = KubeApi(unknown, user_agent="test", fence=None)
    try:
        await asyncio.gather(*(kube.get(f"{PODS}/p{i}") for i in range(5)))
        with pytest.raises(ssl.SSLCertVerificationError):
            await stranger.get(f"{PODS}/p0")  # the server's certificate is still verified
    finally:
        await kube.close()
        await stranger.close()
        await runner.cleanup()
    # One full handshake; the other connections (the first is reused too) resumed its session.
    assert len(handshakes) >= 3
    assert sorted(handshakes.values()) == [False] + [True] * (len(handshakes) - 1)


async def test_a_declined_session_is_replaced_by_the_next_full_handshakes(tmp_path: Path) -> None:
    """A server that no longer accepts the session offered (restarted: new ticket keys) makes a
    full handshake; its session is offered from then on."""
    cert, key = self_signed_certificate("localhost")
    (tmp_path / "ca.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)

    async def greet(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"hello\n")
        await writer.drain()
        writer.close()

    async def server() -> asyncio.Server:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)  # its own ticket keys
        context.load_cert_chain(tmp_path / "ca.crt", tmp_path / "tls.key")
        return await asyncio.start_server(greet, "127.0.0.1", 0, ssl=context)

    client = ResumingContext(ssl.PROTOCOL_TLS_CLIENT)
    client.load_verify_locations(cafile=tmp_path / "ca.crt")

    async def resumed(to: asyncio.Server) -> bool:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", to.sockets[0].getsockname()[1], ssl=client
        )
        await reader.readline()  # the session ticket came before it
        connection = writer.get_extra_info("ssl_object")
        writer.close()
        assert isinstance(connection, ssl.SSLObject)
        return connection.session_reused

    first, restarted = await server(), await server()
    try:
        assert [await resumed(first) for _ in range(3)] == [False, True, True]
        assert [await resumed(restarted) for _ in range(3)] == [False, True, True]
    finally:
        first.close()
        restarted.close()


async def test_an_error_status_raises_api_exception_and_get_of_a_missing_object_is_none(
    api_server: tuple[str, Seen], kube_of: Any
) -> None:
    host, _seen = api_server
    kube = kube_of(host)
    assert await kube.get(f"{PODS}/missing") is None
    with pytest.raises(ApiException) as missing:
        await kube.request("GET", f"{PODS}/missing")
    assert missing.value.status == 404
    with pytest.raises(ApiException) as invalid:
        await kube.create(PODS, {"metadata": {"name": "invalid"}})
    assert (invalid.value.status, invalid.value.reason) == (422, "Unprocessable Entity")
    assert json.loads(invalid.value.body)["message"] == 'Pod "invalid" is invalid'
    assert await kube.create(PODS, {"metadata": {"name": "b"}}) == {"metadata": {"name": "b"}}


async def test_list_follows_the_continue_tokens_through_every_page(
    api_server: tuple[str, Seen], kube_of: Any
) -> None:
    host, seen = api_server
    items = await kube_of(host).list(PODS, label_selector="app=x")
    assert [i["metadata"]["name"] for i in items] == [f"p{i}" for i in range(5)]
    assert [r.query.get("continue") for r in seen.requests] == [None, "2", "4"]
    assert {(r.query["limit"], r.query["labelSelector"]) for r in seen.requests} == {
        ("500", "app=x")
    }


async def test_a_closed_fence_refuses_writes_before_they_reach_the_server(
    api_server: tuple[str, Seen], kube_of: Any
) -> None:
    host, seen = api_server
    kube = kube_of(host, fence=WriteFence())  # never opened: a standby
    with pytest.raises(WriteFenced):
        await kube.create(PODS, {"metadata": {"name": "b"}})
    with pytest.raises(WriteFenced):
        await kube.delete(f"{PODS}/a")
    assert await kube.get(f"{PODS}/a") is not None
    assert [r.method for r in seen.requests] == ["GET"]
    assert await kube.unfenced(1).create(PODS, {"metadata": {"name": "lease-like"}})
    assert [r.method for r in seen.requests] == ["GET", "POST"]


async def test_at_most_max_parallel_requests_are_in_flight_each_bound_its_own(
    api_server: tuple[str, Seen], kube_of: Any
) -> None:
    """The operator's 64 (here 3) and the Event writers' 2 (here 1) are separate bounds: an
    Event is not queued behind a burst of the operator's writes."""
    host, seen = api_server
    kube = kube_of(host, max_parallel=3)
    burst = [kube.create(SLOW, {"metadata": {"name": f"c{i}"}}) for i in range(8)]
    events = kube.with_parallelism(1)
    event_writes = [events.create(SLOW, {"metadata": {"name": f"e{i}"}}) for i in range(2)]
    async with asyncio.timeout(5):
        while len(seen.requests) < 4:
            seen.arrived.clear()
            await seen.arrived.wait()
    await asyncio.sleep(0.1)  # nothing more arrives while the four are held
    names = sorted([(await r.json())["metadata"]["name"] for r in seen.requests])
    assert names == ["c0", "c1", "c2", "e0"]
    seen.release.set()
    await asyncio.gather(*burst, *event_writes)
    assert seen.peak == 4
    assert len(seen.requests) == 10


async def test_every_request_is_counted_by_code_method_and_host(
    api_server: tuple[str, Seen], kube_of: Any
) -> None:
    host, _seen = api_server
    kube = kube_of(host)
    assert await kube.get(f"{PODS}/a") is not None
    assert await kube.get(f"{PODS}/missing") is None
    with pytest.raises(ApiException):
        await kube.request("GET", f"{PODS}/missing")
    await kube.create(PODS, {"metadata": {"name": "b"}})
    # A KubeApi derived from it (Events) and the Lease API on it count too.
    await kube.with_parallelism(1).get(f"{PODS}/a")
    assert await KubernetesLeaseApi(kube).get("ns", "lock") is None  # no route: 404
    assert requests("200", "GET", host) == 2
    assert requests("404", "GET", host) == 3
    assert requests("201", "POST", host) == 1


async def test_a_request_that_gets_no_response_counts_as_an_error(kube_of: Any) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        host = f"127.0.0.1:{sock.getsockname()[1]}"
    kube = kube_of(host)
    with pytest.raises(Exception, match=r"(?i)connect|refused"):
        await kube.get(f"{PODS}/a")
    assert requests("<error>", "GET", host) == 1


@pytest.fixture
def sockets(monkeypatch: pytest.MonkeyPatch) -> list[socket.socket]:
    """The sockets KubeApi's connections are made with."""
    made: list[socket.socket] = []
    original = kube_transport.api_socket

    def recording(addr_info: tuple[Any, ...]) -> socket.socket:
        made.append(original(addr_info))
        return made[-1]

    monkeypatch.setattr(kube_transport, "api_socket", recording)
    return made


async def test_bytes_sent_to_a_vanished_api_server_are_dropped_before_a_standby_can_lead(
    api_server: tuple[str, Seen], kube_of: Any, sockets: list[socket.socket]
) -> None:
    """#20: a request sent just before a partition sits in the kernel's send queue and would be
    retransmitted, and executed, when the partition heals, however long after. TCP_USER_TIMEOUT
    on every connection to the API server drops the connection, and the bytes, once they stay
    unacknowledged for UNACKNOWLEDGED_TIMEOUT: less than the time between the fence closing at
    the renew deadline and the lease expiring for a standby, both counted from when the last
    renewal was sent (at the latest)."""
    config = LeaderElectionConfig(name="x", namespace="ns", identity="a")
    margin = config.lease_duration - config.renew_deadline
    assert 0 < UNACKNOWLEDGED_TIMEOUT < margin
    host, seen = api_server
    kube = kube_of(host)
    await kube.get(f"{PODS}/a")
    await kube.get(f"{PODS}/a")
    [sock] = sockets  # one connection, reused
    assert sock.getsockname() == seen.requests[0].transport.get_extra_info("peername")  # type: ignore[union-attr]
    option = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT)
    assert option == int(UNACKNOWLEDGED_TIMEOUT * 1000)
    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


async def test_a_kubeapi_serves_the_event_loop_of_another_thread_on_connections_of_its_own(
    api_server: tuple[str, Seen], kube_of: Any
) -> None:
    """The metrics server runs its own event loop in a thread and reviews tokens through the
    operator's KubeApi: each loop gets its own connections (a connection belongs to the loop
    that made it), and both keep working, before and after the other's requests."""
    host, seen = api_server
    kube = kube_of(host)
    reviews = kube.unfenced(4)
    await kube.get(f"{PODS}/a")

    def in_thread() -> list[dict[str, Any] | None]:
        async def requests() -> list[dict[str, Any] | None]:
            return [await reviews.get(f"{PODS}/a") for _ in range(3)]

        return asyncio.run(requests())

    async with asyncio.timeout(10):
        answers = await asyncio.to_thread(in_thread)
        assert answers == [{"kind": "Pod", "metadata": {"name": "a"}}] * 3
        assert await kube.get(f"{PODS}/a") is not None
    ports = {r.transport.get_extra_info("peername")[1] for r in seen.requests}  # type: ignore[union-attr]
    assert len(seen.requests) == 5
    assert len(ports) == 2  # one connection per loop, each reused


async def test_a_failed_request_fails_its_future_and_its_task_ends_cleanly(
    api_server: tuple[str, Seen], kube_of: Any
) -> None:
    """kopf re-raises at shutdown the error of every task that ended meanwhile: a request's
    task must not end with the API error it hands its caller (an operator stopped while a 422
    came back exited 1)."""
    host, _seen = api_server
    kube = kube_of(host)
    before = asyncio.all_tasks()
    future = kube.request("GET", f"{PODS}/missing")
    [task] = asyncio.all_tasks() - before - {asyncio.current_task()}
    with pytest.raises(ApiException) as missing:
        await future
    assert missing.value.status == 404
    await asyncio.wait_for(task, 5)
    assert task.result() is None


THROTTLED = "/api/v1/namespaces/ns/secrets"


@dataclass
class Script:
    """A server's answers to THROTTLED in turn, each a status and its Retry-After (None: no
    such header); the last repeats. ``arrivals`` are the loop times the requests came."""

    answers: list[tuple[int, str | None]]
    arrivals: list[float] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    on_request: list[Callable[[], None]] = field(default_factory=list)
    """Called (no argument) as each request arrives, before it is answered."""

    def app(self) -> web.Application:
        async def answer(request: web.Request) -> web.Response:
            self.arrivals.append(asyncio.get_running_loop().time())
            self.arrived.set()
            for call in self.on_request:
                call()
            status, retry_after = self.answers[min(len(self.arrivals), len(self.answers)) - 1]
            headers = {} if retry_after is None else {"Retry-After": retry_after}
            if status < 300:
                return web.json_response({"kind": "Secret"}, status=status, headers=headers)
            body = {"kind": "Status", "code": status, "message": f"answer {len(self.arrivals)}"}
            return web.json_response(body, status=status, headers=headers)

        app = web.Application()
        app.router.add_route("*", THROTTLED, answer)
        app.router.add_route("*", THROTTLED + "/{name}", answer)
        return app


@pytest.fixture
async def scripted() -> AsyncIterator[Any]:
    """``scripted(answers)``: a server answering THROTTLED as scripted; its host and Script."""
    runners: list[web.AppRunner] = []

    async def serve_script(answers: list[tuple[int, str | None]]) -> tuple[str, Script]:
        script = Script(answers)
        runner = await serve(script.app())
        runners.append(runner)
        return f"127.0.0.1:{runner.addresses[0][1]}", script

    yield serve_script
    for runner in runners:
        await runner.cleanup()


async def test_a_throttled_write_is_sent_again_when_the_retry_after_says_and_succeeds(
    scripted: Any, kube_of: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """API Priority and Fairness rejects a request before executing it, with 429 and a
    Retry-After: as client-go's rest client, KubeApi sends it again that many seconds later,
    so the caller (a reconcile, its work queue) never sees a throttle that resolved; each
    attempt is counted by its code, and each retry logged."""
    host, script = await scripted([(429, "1"), (429, "1"), (201, None)])
    caplog.set_level(logging.DEBUG, logger="opsuite_common.kube")
    assert await kube_of(host).create(THROTTLED, {"metadata": {"name": "s"}}) == {"kind": "Secret"}
    assert len(script.arrivals) == 3
    assert all(later - earlier >= 1.0 for earlier, later in pairwise(script.arrivals))
    assert requests("429", "POST", host) == 2
    assert requests("201", "POST", host) == 1
    retries = [r for r in caplog.records if r.name == "opsuite_common.kube"]
    assert [(r.levelno, "429" in r.getMessage()) for r in retries] == [(logging.DEBUG, True)] * 2


@pytest.mark.parametrize(
    ("method", "status", "retry_after"),
    [("POST", 500, None), ("GET", 503, None), ("POST", 429, None), ("GET", 409, "1")],
)
async def test_an_answer_without_a_retry_after_for_it_is_not_sent_again(
    scripted: Any, kube_of: Any, method: str, status: int, retry_after: str | None
) -> None:
    """As client-go's checkWait: only a 429 or a 5xx that says when to come back is sent
    again; a write that failed with a 500 may have been executed, and a 429 without a
    Retry-After (an eviction a PodDisruptionBudget blocks) is a refusal, not throttling."""
    host, script = await scripted([(status, retry_after), (201, None)])
    with pytest.raises(ApiException) as failed:
        await kube_of(host).request(method, f"{THROTTLED}/s" if method == "GET" else THROTTLED)
    assert failed.value.status == status
    assert len(script.arrivals) == 1


@pytest.mark.parametrize(("method", "status"), [("GET", 503), ("PUT", 500), ("DELETE", 429)])
async def test_any_method_is_sent_again_when_a_429_or_5xx_says_when(
    scripted: Any, kube_of: Any, method: str, status: int
) -> None:
    """client-go retries whatever the method when the answer carries a Retry-After: the API
    server sets it on answers to requests it did not carry out (throttled, shutting down,
    storage unreachable)."""
    host, script = await scripted([(status, "0"), (200, None)])
    answer = await kube_of(host).request(method, f"{THROTTLED}/s", body={})
    assert answer == {"kind": "Secret"}
    assert len(script.arrivals) == 2


async def test_eleven_throttled_answers_in_a_row_end_in_the_last_one(
    scripted: Any, kube_of: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Ten retries at most (client-go's maxRetries): the eleventh 429 is the caller's error,
    the same ApiException as without retries, and a warning says the retries are spent."""
    host, script = await scripted([(429, "0")])
    with pytest.raises(ApiException) as throttled:
        await kube_of(host).create(THROTTLED, {"metadata": {"name": "s"}})
    assert throttled.value.status == 429
    assert json.loads(throttled.value.body)["message"] == "answer 11"
    assert len(script.arrivals) == 11
    assert requests("429", "POST", host) == 11
    [warning] = [r for r in caplog.records if r.name == "opsuite_common.kube"]
    assert warning.levelno == logging.WARNING
    assert "429 after 10 retries" in warning.getMessage()


async def test_a_throttled_burst_is_sent_again_spread_out(scripted: Any, kube_of: Any) -> None:
    """A burst throttled at once gets one Retry-After for all: its requests are sent again
    spread over up to RETRY_JITTER times that much more, not all together into the same full
    priority level."""
    burst = 20
    host, script = await scripted([(429, "1")] * burst + [(201, None)])
    kube = kube_of(host)
    await asyncio.gather(
        *(kube.create(THROTTLED, {"metadata": {"name": f"s{i}"}}) for i in range(burst))
    )
    first, retries = script.arrivals[:burst], script.arrivals[burst:]
    assert len(retries) == burst
    assert min(retries) - max(first) >= 1.0
    assert max(retries) - min(retries) >= 0.25, "the retries came together"
    assert max(retries) - min(first) <= 1.0 + kube_module.RETRY_JITTER + 0.5


async def test_a_retry_after_is_waited_for_at_most_max_retry_after(
    scripted: Any, kube_of: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server asking for an hour does not hold the request for an hour."""
    monkeypatch.setattr(kube_module, "MAX_RETRY_AFTER", 0.05)
    host, script = await scripted([(429, "3600"), (201, None)])
    async with asyncio.timeout(5):
        await kube_of(host).create(THROTTLED, {"metadata": {"name": "s"}})
    assert len(script.arrivals) == 2


async def test_a_write_retried_after_leadership_ended_is_refused_unsent(
    scripted: Any, kube_of: Any
) -> None:
    """Every attempt passes the write fence: a write throttled while this process led, whose
    retry comes after leadership ended, is refused and never sent again."""
    host, script = await scripted([(429, "0"), (201, None)])
    fence = WriteFence()
    fence.open()
    script.on_request.append(fence.close)
    with pytest.raises(WriteFenced):
        await kube_of(host, fence=fence).create(THROTTLED, {"metadata": {"name": "s"}})
    assert len(script.arrivals) == 1
    assert fence.in_flight == 0


async def test_the_retries_stop_when_the_caller_stops_waiting(scripted: Any, kube_of: Any) -> None:
    """A request runs to its end even when its caller is cancelled, but the retries of nobody's
    request are not sent: the Lease renewal the elector gave up on is not sent again later."""
    host, script = await scripted([(429, "5")])
    before = asyncio.all_tasks()
    future = kube_of(host).create(THROTTLED, {"metadata": {"name": "s"}})
    [task] = asyncio.all_tasks() - before - {asyncio.current_task()}
    await script.arrived.wait()
    future.cancel()
    await asyncio.wait_for(task, 4)  # before the Retry-After is over
    assert len(script.arrivals) == 1


async def test_a_throttled_watch_is_sent_again(scripted: Any, kube_of: Any) -> None:
    """The Lease watch goes through the same retries as every other request."""
    host, script = await scripted([(429, "0"), (200, None)])
    await kube_of(host).wait_for_event(THROTTLED, {"timeoutSeconds": "5"}, 5)
    assert len(script.arrivals) == 2
    assert requests("429", "GET", host) == 1
    assert requests("200", "GET", host) == 1
