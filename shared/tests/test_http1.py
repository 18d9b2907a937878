"""The HTTP/1.1 client under KubeApi against raw local servers: body framings, keep-alive and
its limits, what is sent again after a closed idle connection and what never is, the first
line of a streamed body, CONNECT proxies, and responses cut at any byte (hypothesis)."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from opsuite_common.http1 import ConnectionPool, Server
from opsuite_common.http1_connection import Connection, HttpConnectionError, Response
from opsuite_common.metrics_auth import self_signed_certificate

Reply = Callable[[bytes], Awaitable[bytes | None]]
"""Given a request's head, the bytes to answer (None: close the connection unanswered)."""


@dataclass
class RawServer:
    """A TCP server answering each request by ``reply``; records heads and connections."""

    reply: Reply
    heads: list[bytes] = field(default_factory=list)
    connections: int = 0
    server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                if length:
                    head += await reader.readexactly(length)
                self.heads.append(head)
                answer = await self.reply(head)
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    @property
    def port(self) -> int:
        assert self.server is not None
        port: int = self.server.sockets[0].getsockname()[1]
        return port


@pytest.fixture
async def raw_server() -> AsyncIterator[Callable[[Reply], Awaitable[RawServer]]]:
    servers: list[asyncio.Server] = []

    async def start(reply: Reply, context: ssl.SSLContext | None = None) -> RawServer:
        raw = RawServer(reply)
        raw.server = await asyncio.start_server(raw.handle, "127.0.0.1", 0, ssl=context)
        servers.append(raw.server)
        return raw

    yield start
    for server in servers:
        server.close()


def plain_socket(info: tuple[Any, ...]) -> socket.socket:
    return socket.socket(info[0], info[1], info[2])


def pool_for(port: int, **kwargs: Any) -> ConnectionPool:
    options: dict[str, Any] = {"idle_timeout": 90.0, "socket_factory": plain_socket}
    options.update(kwargs)
    return ConnectionPool(Server(f"http://127.0.0.1:{port}"), **options)


def head(method: str, path: str) -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()


def ok(body: bytes, *extra: str) -> bytes:
    headers = "".join(f"{h}\r\n" for h in extra)
    return f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n{headers}\r\n".encode() + body


def chunked(*chunks: bytes) -> bytes:
    body = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks)
    return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body + b"0\r\n\r\n"


async def answered(raw_server: Any, answers: list[bytes]) -> tuple[list[Response], Any]:
    """The responses to one GET per answer, sent in turn on a pool to a server that gives
    each its answer, and the server."""
    replies = iter(answers)

    async def reply(_head: bytes) -> bytes:
        return next(replies)

    server = await raw_server(reply)
    pool = pool_for(server.port)
    got = [await pool.request("GET", head("GET", f"/{i}"), None) for i in range(len(answers))]
    pool.close()
    return got, server


async def test_length_chunked_and_empty_bodies_come_whole_on_one_kept_connection(
    raw_server: Any,
) -> None:
    got, server = await answered(
        raw_server,
        [
            ok(b'{"a":1}'),
            chunked(b'{"items":', b"[1,2,", b"3]}"),
            b"HTTP/1.1 204 No Content\r\n\r\n",
            b"HTTP/1.1 100 Continue\r\n\r\n" + ok(b"after interim"),
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}",
        ],
    )
    assert got == [
        Response(200, "OK", b'{"a":1}'),
        Response(200, "OK", b'{"items":[1,2,3]}'),
        Response(204, "No Content", b""),
        Response(200, "OK", b"after interim"),
        Response(404, "Not Found", b"{}"),
    ]
    assert server.connections == 1


async def test_a_retry_after_in_seconds_comes_with_its_response(raw_server: Any) -> None:
    """Each response carries its own Retry-After, when given in seconds (what KubeApi's retries
    wait for); an HTTP date is not read, as client-go does not read one."""
    got, _server = await answered(
        raw_server,
        [
            b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 2\r\nContent-Length: 2\r\n\r\n{}",
            ok(b"{}"),
            b"HTTP/1.1 503 Service Unavailable\r\nretry-after: Fri, 31 Dec 1999 23:59:59 GMT\r\n"
            b"Content-Length: 2\r\n\r\n{}",
        ],
    )
    assert [(r.status, r.retry_after) for r in got] == [(429, 2), (200, None), (503, None)]


async def test_a_body_sent_is_received_whole(raw_server: Any) -> None:
    async def echo(request: bytes) -> bytes:
        return ok(request.split(b"\r\n\r\n", 1)[1])

    server = await raw_server(echo)
    pool = pool_for(server.port)
    body = b"x" * 200_000
    message = b"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
    assert (await pool.request("POST", message, body)).body == body
    pool.close()


async def test_a_connection_the_server_marks_close_carries_no_other_request(
    raw_server: Any,
) -> None:
    answers = iter([ok(b"one", "Connection: close"), ok(b"two"), ok(b"three")])

    async def reply(_head: bytes) -> bytes:
        return next(answers)

    server = await raw_server(reply)  # it keeps the connection open all the same
    pool = pool_for(server.port)
    bodies = [(await pool.request("GET", head("GET", "/"), None)).body for _ in range(3)]
    pool.close()
    assert bodies == [b"one", b"two", b"three"]
    assert server.connections == 2


async def test_a_body_without_length_ends_with_the_connection() -> None:
    async def until_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\n\r\nall of ")
        await writer.drain()
        writer.write(b"it")
        writer.close()

    server = await asyncio.start_server(until_close, "127.0.0.1", 0)
    pool = pool_for(server.sockets[0].getsockname()[1])
    try:
        assert (await pool.request("GET", head("GET", "/"), None)).body == b"all of it"
    finally:
        pool.close()
        server.close()


async def test_a_get_is_sent_again_when_its_reused_connection_was_closed_a_post_never(
    raw_server: Any,
) -> None:
    """As Go's net/http: the server closed the idle connection just as the request went."""
    closing = {"GET /again", "POST /once"}

    async def reply(request: bytes) -> bytes | None:
        line = request.split(b" HTTP/1.1")[0].decode()
        if line in closing:
            closing.discard(line)
            return None  # drop it unanswered, once
        return ok(line.encode())

    server = await raw_server(reply)
    pool = pool_for(server.port)
    await pool.request("GET", head("GET", "/warm"), None)
    assert (await pool.request("GET", head("GET", "/again"), None)).body == b"GET /again"
    await pool.request("GET", head("GET", "/warm"), None)
    with pytest.raises(HttpConnectionError):
        await pool.request("POST", head("POST", "/once"), None)
    pool.close()
    lines = [h.split(b" HTTP")[0].decode() for h in server.heads]
    assert lines == ["GET /warm", "GET /again", "GET /again", "GET /warm", "POST /once"]


async def test_a_get_on_a_new_connection_is_not_sent_twice(raw_server: Any) -> None:
    async def reply(_request: bytes) -> None:
        return None

    server = await raw_server(reply)
    pool = pool_for(server.port)
    with pytest.raises(HttpConnectionError):
        await pool.request("GET", head("GET", "/"), None)
    pool.close()
    assert len(server.heads) == 1


async def test_idle_connections_expire_and_closed_ones_are_not_taken(raw_server: Any) -> None:
    async def reply(_request: bytes) -> bytes:
        return ok(b"{}")

    server = await raw_server(reply)
    now = [0.0]
    pool = pool_for(server.port, idle_timeout=10.0, clock=lambda: now[0])
    await pool.request("GET", head("GET", "/"), None)
    now[0] = 9.0
    await pool.request("GET", head("GET", "/"), None)
    assert server.connections == 1
    now[0] = 19.5  # idle for 10.5 s since the last answer
    await pool.request("GET", head("GET", "/"), None)
    assert server.connections == 2
    pool.close()
    with pytest.raises(HttpConnectionError, match="closed"):
        await pool.request("GET", head("GET", "/"), None)


async def test_the_first_line_of_a_streamed_body_and_the_connection_dropped(
    raw_server: Any,
) -> None:
    held = asyncio.Event()

    async def watch(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        event = b'{"type":"ADDED"}\n'
        writer.write(b"%x\r\n%s\r\n" % (len(event), event))
        await writer.drain()
        await held.wait()  # the stream goes on
        writer.close()

    server = await asyncio.start_server(watch, "127.0.0.1", 0)
    pool = pool_for(server.sockets[0].getsockname()[1])
    try:
        response = await pool.request("GET", head("GET", "/?watch=true"), None, first_line=True)
        assert response == Response(200, "OK", b'{"type":"ADDED"}')
        assert not pool._open  # closed, not kept
    finally:
        held.set()
        pool.close()
        server.close()


async def test_a_malformed_response_fails_the_request(raw_server: Any) -> None:
    async def reply(_request: bytes) -> bytes:
        return b"SSH-2.0-OpenSSH\r\n\r\n"

    server = await raw_server(reply)
    pool = pool_for(server.port)
    with pytest.raises(HttpConnectionError, match="not an HTTP"):
        await pool.request("GET", head("GET", "/"), None)
    pool.close()


async def test_a_cancelled_request_closes_its_connection(raw_server: Any) -> None:
    async def slow(_request: bytes) -> bytes:
        await asyncio.sleep(5)
        return ok(b"late")

    server = await raw_server(slow)
    pool = pool_for(server.port)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2):
            await pool.request("GET", head("GET", "/"), None)
    assert not pool._open
    pool.close()


async def test_https_through_a_connect_proxy_with_credentials(
    raw_server: Any, tmp_path: Path
) -> None:
    cert, key = self_signed_certificate("localhost")
    (tmp_path / "ca.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(tmp_path / "ca.crt", tmp_path / "tls.key")

    async def reply(_request: bytes) -> bytes:
        return ok(b"through the tunnel")

    target = await raw_server(reply, server_context)
    connects: list[bytes] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connects.append(await reader.readuntil(b"\r\n\r\n"))
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", target.port)
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))

    proxy_server = await asyncio.start_server(proxy, "127.0.0.1", 0)
    client_context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_context.load_verify_locations(cafile=tmp_path / "ca.crt")
    server = Server(
        f"https://127.0.0.1:{target.port}",
        tls=client_context,
        server_hostname="localhost",
        proxy=f"http://me:s%40cret@127.0.0.1:{proxy_server.sockets[0].getsockname()[1]}",
    )
    pool = ConnectionPool(server, idle_timeout=90.0, socket_factory=plain_socket)
    try:
        response = await pool.request("GET", head("GET", "/"), None)
    finally:
        pool.close()
        proxy_server.close()
    assert response.body == b"through the tunnel"
    [connect] = connects
    assert connect.startswith(f"CONNECT 127.0.0.1:{target.port} HTTP/1.1\r\n".encode())
    assert b"Proxy-Authorization: Basic bWU6c0BjcmV0\r\n" in connect  # me:s@cret


def test_the_request_target_carries_the_path_prefix_and_the_absolute_form_to_a_proxy() -> None:
    direct = ConnectionPool(
        Server("https://api.example:6443/k8s/clusters/c1", tls=ssl.create_default_context()),
        idle_timeout=1.0,
        socket_factory=plain_socket,
    )
    assert direct.target("/api/v1/pods?limit=1") == "/k8s/clusters/c1/api/v1/pods?limit=1"
    proxied = ConnectionPool(
        Server("http://api.example:8080", proxy="http://proxy:3128"),
        idle_timeout=1.0,
        socket_factory=plain_socket,
    )
    assert proxied.target("/api/v1/pods") == "http://api.example:8080/api/v1/pods"
    with pytest.raises(ValueError, match="proxies"):
        ConnectionPool(
            Server("http://a:1", proxy="socks5://p:1"),
            idle_timeout=1.0,
            socket_factory=plain_socket,
        )


RESPONSES = [
    ok(b'{"kind":"Pod"}'),
    chunked(b'{"kind":', b'"PodList",', b'"items":[]}'),
    b"HTTP/1.1 204 No Content\r\nX-A: b\r\n\r\n",
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}",
    chunked(b"x" * 70_000),
]


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = b""
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += bytes(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


@given(
    answer=st.sampled_from(RESPONSES),
    cuts=st.lists(st.integers(min_value=0, max_value=80_000), max_size=12),
)
def test_a_response_parses_the_same_however_its_bytes_are_split(
    answer: bytes, cuts: list[int]
) -> None:
    whole = _parse_all([answer])
    points = sorted({c % (len(answer) + 1) for c in cuts})
    pieces = [answer[a:b] for a, b in zip([0, *points], [*points, len(answer)], strict=True)]
    assert _parse_all(pieces) == whole
    assert whole.status in (200, 201, 204)


def _parse_all(pieces: list[bytes]) -> Response:
    loop = asyncio.new_event_loop()
    try:

        async def run() -> Response:
            connection = Connection()
            connection.connection_made(FakeTransport())
            future = connection.send(b"GET / HTTP/1.1\r\n\r\n")
            for piece in pieces:
                if piece:
                    connection.data_received(piece)
            assert connection.reusable
            return await future

        return loop.run_until_complete(run())
    finally:
        loop.close()
