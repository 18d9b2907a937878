"""A lean HTTP/1.1 client on asyncio for the operators' requests to the API server (#19).

:class:`~opsuite_common.kube.KubeApi` sends every request through a :class:`ConnectionPool`:
keep-alive connections to one server (TLS or plain, directly or through an HTTP proxy's
CONNECT tunnel), reused newest first and closed after ``idle_timeout`` unused; each carries one
request at a time. A response body comes whole (``Content-Length``, chunked, or up to the
connection's end), or, for :meth:`ConnectionPool.first_line`, up to the first line of a
streamed body. aiohttp's client spent about five times the CPU of this one per request (its
request and response objects, header multidicts, URL parsing, payload registry and cookie
handling: docs/http-stack.md has the figures), and the operators send thousands in a burst;
kopf's watches keep their own aiohttp session.

Not supported, because the API server needs none of it: redirects, cookies, compression
(``Accept-Encoding`` is never sent), ``Expect: 100-continue``, pipelining, HTTP/2.

A request that fails before its whole response came raises :class:`HttpConnectionError` and
closes its connection; only a GET or HEAD that finds a reused connection closed before any
byte of the response arrived is sent again, once, on a new connection (as Go's net/http
retries a replayable request on a connection the server closed while it was idle). Any other
request may have reached the server, so it is never sent twice.

Length: one job, HTTP/1.1 on a pool of connections: writing requests, reading the
three body framings and streamed first lines, proxies' CONNECT tunnels, idle closing.
"""

from __future__ import annotations

import asyncio
import base64
import enum
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

__all__ = ["ConnectionPool", "HttpConnectionError", "Response", "Server"]

MAX_HEAD = 64 * 1024
"""Largest response head (status line and headers) accepted, in bytes."""
REPLAYABLE = frozenset({"GET", "HEAD"})
"""Methods sent again on a new connection when a reused one turns out closed."""

SocketFactory = Callable[[tuple[Any, ...]], socket.socket]
"""Makes the socket for one ``getaddrinfo`` result (family, type, proto, name, address)."""


class HttpConnectionError(ConnectionError):
    """No whole response came: the connection could not be made, or closed or broke first."""


@dataclass(frozen=True, slots=True)
class Response:
    """A response: its status code, reason phrase and body (all of it, or its first line)."""

    status: int
    reason: str
    body: bytes
    retry_after: int | None = None
    """Its Retry-After in seconds; None without one, or with an HTTP date (which the API server
    never sends, and client-go ignores)."""


@dataclass(frozen=True)
class Server:
    """Where requests go: the API server's URL and how to reach it."""

    url: str
    """``https://host[:port][/prefix]`` or ``http://…``; a path prefix goes before every path."""
    tls: ssl.SSLContext | None = None
    """The TLS context for an ``https`` URL."""
    server_hostname: str | None = None
    """The name to verify the server's certificate against (default: the URL's host)."""
    proxy: str | None = None
    """An ``http://[user:password@]host:port`` proxy: CONNECT tunnels to an ``https`` server,
    absolute-form requests to an ``http`` one."""

    @property
    def netloc(self) -> str:
        """``host[:port]`` of the URL, as the Host header carries it."""
        return urlsplit(self.url).netloc


class _State(enum.Enum):
    HEAD = enum.auto()
    LENGTH = enum.auto()
    CHUNK_SIZE = enum.auto()
    CHUNK_DATA = enum.auto()
    TRAILERS = enum.auto()
    UNTIL_CLOSE = enum.auto()
    IDLE = enum.auto()


def _parse_head(head: bytes) -> tuple[int, str, int | None, bool, bool, int | None]:
    """(status, reason, Content-Length, chunked, close, Retry-After) of a response head."""
    status_line, _, fields = head.partition(b"\r\n")
    version, _, rest = status_line.partition(b" ")
    code, _, reason = rest.partition(b" ")
    if not version.startswith(b"HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise HttpConnectionError(f"not an HTTP/1.x response: {status_line[:80]!r}")
    length: int | None = None
    chunked = False
    close = version == b"HTTP/1.0"
    retry_after: int | None = None
    for line in fields.split(b"\r\n"):
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding":
            chunked = value.strip().lower().endswith(b"chunked")
        elif name == b"connection":
            tokens = {token.strip().lower() for token in value.split(b",")}
            close = b"close" in tokens or (close and b"keep-alive" not in tokens)
        elif name == b"retry-after" and value.strip().isdigit():
            retry_after = int(value)
    return int(code), reason.decode("latin-1"), length, chunked, close, retry_after


class _Connection(asyncio.Protocol):
    """One connection: sends a request, parses its response as the bytes arrive."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self.reused = False
        self._buffer = bytearray()
        self._body = bytearray()
        self._state = _State.IDLE
        self._remaining = 0
        self._status = 0
        self._reason = ""
        self._retry_after: int | None = None
        self._keep_alive = True
        self._no_body = False
        self._first_line = False
        self._received = False
        self._waiter: asyncio.Future[Response] | None = None

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._waiter.done():
            self.close()  # bytes nobody asked for: the connection is out of step
            return
        self._received = True
        self._buffer += data
        try:
            self._parse()
        except (HttpConnectionError, ValueError) as exc:
            self._fail(HttpConnectionError(f"bad response: {exc}"))
            self.close()

    def eof_received(self) -> bool | None:
        self._end_of_stream(None)
        return None  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._end_of_stream(exc)

    # requests

    def send(
        self, request: bytes, *, no_body: bool = False, first_line: bool = False
    ) -> asyncio.Future[Response]:
        """Write ``request`` (its head and body); the future of its response."""
        assert self.transport is not None
        assert self._state is _State.IDLE
        self._waiter = asyncio.get_running_loop().create_future()
        self._state = _State.HEAD
        self._body = bytearray()
        self._no_body = no_body
        self._first_line = first_line
        self._received = False
        self.transport.write(request)
        return self._waiter

    @property
    def received(self) -> bool:
        """Whether any byte of the current response arrived."""
        return self._received

    @property
    def reusable(self) -> bool:
        """Whether the last response ended cleanly and the connection may carry another."""
        return (
            not self.closed
            and self._state is _State.IDLE
            and self._keep_alive
            and not self._buffer
            and self.transport is not None
            and not self.transport.is_closing()
        )

    def close(self) -> None:
        """Close the connection; a response still awaited fails."""
        self.closed = True
        if self.transport is not None:
            self.transport.close()
        self._fail(HttpConnectionError("connection closed"))

    # parsing

    def _parse(self) -> None:
        buffer = self._buffer
        while True:
            state = self._state
            if state is _State.HEAD:
                end = buffer.find(b"\r\n\r\n")
                if end < 0:
                    if len(buffer) > MAX_HEAD:
                        raise HttpConnectionError("response head too large")
                    return
                head = bytes(buffer[:end])
                del buffer[: end + 4]
                status, reason, length, chunked, close, retry_after = _parse_head(head)
                if 100 <= status < 200:
                    continue  # an interim response: the real one follows
                self._status, self._reason, self._keep_alive = status, reason, not close
                self._retry_after = retry_after
                if self._no_body or status in (204, 304):
                    self._complete()
                    return
                if chunked:
                    self._state = _State.CHUNK_SIZE
                elif length is not None:
                    self._state, self._remaining = _State.LENGTH, length
                else:
                    self._state, self._keep_alive = _State.UNTIL_CLOSE, False
            elif state is _State.LENGTH:
                if len(buffer) < self._remaining:
                    if self._first_line and b"\n" in buffer:
                        self._body += buffer
                        buffer.clear()
                        self._complete(reusable=False)
                    return
                self._body += buffer[: self._remaining]
                del buffer[: self._remaining]
                self._complete()
                return
            elif state is _State.CHUNK_SIZE:
                end = buffer.find(b"\r\n")
                if end < 0:
                    return
                size = int(bytes(buffer[:end]).split(b";", 1)[0], 16)
                del buffer[: end + 2]
                self._state = _State.CHUNK_DATA if size else _State.TRAILERS
                self._remaining = size
            elif state is _State.CHUNK_DATA:
                if len(buffer) < self._remaining + 2:
                    return
                self._body += buffer[: self._remaining]
                del buffer[: self._remaining + 2]
                self._state = _State.CHUNK_SIZE
                if self._first_line and b"\n" in self._body:
                    self._complete(reusable=False)
                    return
            elif state is _State.TRAILERS:
                end = buffer.find(b"\r\n")
                if end < 0:
                    return
                del buffer[: end + 2]
                if end == 0:
                    self._complete()
                    return
            elif state is _State.UNTIL_CLOSE:
                self._body += buffer
                buffer.clear()
                if self._first_line and b"\n" in self._body:
                    self._complete(reusable=False)
                return
            else:  # IDLE: cannot be, data_received only parses while a response is awaited
                raise HttpConnectionError("bytes after the response")

    def _complete(self, *, reusable: bool = True) -> None:
        self._state = _State.IDLE
        body = bytes(self._body)
        if self._first_line:
            body = body.split(b"\n", 1)[0]
        self._keep_alive = self._keep_alive and reusable
        self._body = bytearray()
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(Response(self._status, self._reason, body, self._retry_after))
        if self._buffer and self._state is _State.IDLE:
            self.close()

    def _end_of_stream(self, exc: Exception | None) -> None:
        if self._state is _State.UNTIL_CLOSE and exc is None:
            self._keep_alive = False
            self._complete()
        elif self._state is not _State.IDLE:
            self._fail(HttpConnectionError(f"connection closed mid-response: {exc or 'EOF'}"))
        self.closed = True

    def _fail(self, exc: Exception) -> None:
        self._state = _State.IDLE
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)


class ConnectionPool:
    """Keep-alive connections to one :class:`Server`, made on demand, without a bound: the
    callers bound their requests in flight. Belongs to the event loop of its first use."""

    def __init__(
        self,
        server: Server,
        *,
        idle_timeout: float,
        socket_factory: SocketFactory,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Connections to ``server``; idle ones are dropped after ``idle_timeout`` seconds;
        every socket is made by ``socket_factory``."""
        self._server = server
        split = urlsplit(server.url)
        if split.scheme not in ("http", "https") or not split.hostname:
            raise ValueError(f"not an http(s) URL: {server.url!r}")
        self._tls = server.tls if split.scheme == "https" else None
        if split.scheme == "https" and self._tls is None:
            raise ValueError("an https server needs a TLS context")
        self._address = (split.hostname, split.port or (443 if self._tls else 80))
        self._prefix = split.path.rstrip("/")
        self._hostname = server.server_hostname or split.hostname
        self._proxy = urlsplit(server.proxy) if server.proxy else None
        if self._proxy is not None and (self._proxy.scheme != "http" or not self._proxy.hostname):
            raise ValueError(f"only http:// proxies are supported: {server.proxy!r}")
        self._absolute = self._proxy is not None and self._tls is None
        self._idle_timeout = idle_timeout
        self._socket_factory = socket_factory
        self._clock = clock
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()
        self._closed = False

    def target(self, path_and_query: str) -> str:
        """The request-target of a path (with its query): the URL's path prefix before it,
        and in absolute form to a proxy that forwards plain HTTP."""
        target = self._prefix + path_and_query
        if self._absolute:
            return f"http://{self._server.netloc}{target}"
        return target

    async def request(
        self, method: str, head: bytes, body: bytes | None, *, first_line: bool = False
    ) -> Response:
        """Send ``head`` (request line and headers, ending in the blank line) and ``body``;
        the whole response, or with ``first_line`` the first line of its body (the
        connection is then closed)."""
        message = head + body if body else head
        for attempt in (1, 2):
            connection = await self._acquire()
            reused = connection.reused
            try:
                response = await connection.send(
                    message, no_body=method == "HEAD", first_line=first_line
                )
            except HttpConnectionError:
                connection.close()
                self._open.discard(connection)
                if attempt == 1 and reused and not connection.received and method in REPLAYABLE:
                    continue  # the server had closed the idle connection: send it again
                raise
            except BaseException:
                connection.close()  # cancelled or timed out: its answer is nobody's
                self._open.discard(connection)
                raise
            self._release(connection)
            return response
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Close every connection; requests still waiting for an answer fail."""
        self._closed = True
        for connection in list(self._open):
            connection.close()
        self._open.clear()
        self._idle.clear()

    def _release(self, connection: _Connection) -> None:
        if connection.reusable and not self._closed:
            connection.idle_since = self._clock()
            connection.reused = True
            self._idle.append(connection)
        else:
            connection.close()
            self._open.discard(connection)

    async def _acquire(self) -> _Connection:
        if self._closed:
            raise HttpConnectionError("the connection pool is closed")
        now = self._clock()
        while self._idle:
            connection = self._idle.pop()  # the newest: the oldest are the first to go stale
            if connection.reusable and now - connection.idle_since < self._idle_timeout:
                return connection
            connection.close()
            self._open.discard(connection)
        connection = await self._connect()
        self._open.add(connection)
        return connection

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        proxy = self._proxy
        host, port = (proxy.hostname or "", proxy.port or 80) if proxy else self._address
        try:
            sock = await self._open_socket(loop, host, port)
            transport, connection = await loop.create_connection(
                _Connection,
                sock=sock,
                ssl=None if proxy else self._tls,
                server_hostname=None if proxy or not self._tls else self._hostname,
            )
            if proxy and self._tls is not None:
                await self._tunnel(connection, proxy.username, proxy.password)
                tls_transport = await loop.start_tls(
                    transport, connection, self._tls, server_hostname=self._hostname
                )
                assert isinstance(tls_transport, asyncio.Transport)
                connection.transport = tls_transport
        except ssl.SSLError:
            raise  # a certificate that does not verify is no connection problem to retry
        except OSError as exc:
            raise HttpConnectionError(f"cannot connect to {host}:{port}: {exc}") from exc
        return connection

    async def _open_socket(self, loop: asyncio.AbstractEventLoop, host: str, port: int) -> Any:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        error: OSError = OSError(f"no address for {host}")
        for info in infos:
            sock = self._socket_factory(info)
            sock.setblocking(False)
            try:
                await loop.sock_connect(sock, info[4])
            except OSError as exc:
                sock.close()
                error = exc
                continue
            except BaseException:
                sock.close()
                raise
            return sock
        raise error

    async def _tunnel(
        self, connection: _Connection, username: str | None, password: str | None
    ) -> None:
        authority = "{}:{}".format(*self._address)
        head = f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n"
        if username is not None:
            credentials = f"{unquote(username)}:{unquote(password or '')}".encode()
            head += f"Proxy-Authorization: Basic {base64.b64encode(credentials).decode()}\r\n"
        response = await connection.send((head + "\r\n").encode("latin-1"), no_body=True)
        if not 200 <= response.status <= 299:
            connection.close()
            raise HttpConnectionError(f"proxy refused CONNECT {authority}: {response.status}")
