"""A lean HTTP/1.1 client on asyncio for the operators' requests to the API server (#19).

:class:`~opsuite_common.kube.KubeApi` sends every request through a :class:`ConnectionPool`:
keep-alive connections to one server (TLS or plain, directly or through an HTTP proxy's
CONNECT tunnel), reused newest first and closed after ``idle_timeout`` unused; each
(:class:`~opsuite_common.http1_connection.Connection`) carries one request at a time and parses
its response. aiohttp's client spent about five times the CPU of this one per request (its
request and response objects, header multidicts, URL parsing, payload registry and cookie
handling: docs/http-stack.md has the figures), and the operators send thousands in a burst;
kopf's watches keep their own aiohttp session.

Not supported, because the API server needs none of it: redirects, cookies, compression
(``Accept-Encoding`` is never sent), ``Expect: 100-continue``, pipelining, HTTP/2.

A request that fails before its whole response came raises
:class:`~opsuite_common.http1_connection.HttpConnectionError` and closes its connection; only a
GET or HEAD that finds a reused connection closed before any byte of the response arrived is
sent again, once, on a new connection (as Go's net/http retries a replayable request on a
connection the server closed while it was idle). Any other request may have reached the
server, so it is never sent twice.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from opsuite_common.http1_connection import Connection, HttpConnectionError, Response

__all__ = ["ConnectionPool", "Server"]

REPLAYABLE = frozenset({"GET", "HEAD"})
"""Methods sent again on a new connection when a reused one turns out closed."""

SocketFactory = Callable[[tuple[Any, ...]], socket.socket]
"""Makes the socket for one ``getaddrinfo`` result (family, type, proto, name, address)."""


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
        self._idle: list[Connection] = []
        self._open: set[Connection] = set()
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

    def _release(self, connection: Connection) -> None:
        if connection.reusable and not self._closed:
            connection.idle_since = self._clock()
            connection.reused = True
            self._idle.append(connection)
        else:
            connection.close()
            self._open.discard(connection)

    async def _acquire(self) -> Connection:
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

    async def _connect(self) -> Connection:
        loop = asyncio.get_running_loop()
        proxy = self._proxy
        host, port = (proxy.hostname or "", proxy.port or 80) if proxy else self._address
        try:
            sock = await self._open_socket(loop, host, port)
            transport, connection = await loop.create_connection(
                Connection,
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
        self, connection: Connection, username: str | None, password: str | None
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
