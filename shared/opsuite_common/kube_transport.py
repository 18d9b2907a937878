"""The connections under :class:`~opsuite_common.kube.KubeApi`: one pool per event loop
(:class:`Session`), sockets that drop what a partition leaves unacknowledged
(``TCP_USER_TIMEOUT``), TLS contexts that resume the session of an earlier connection, and TLS
read buffers bounded for the whole process."""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import contextlib
import socket
import ssl
import weakref
from collections import deque
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

from opsuite_common.http1 import ConnectionPool, Server
from opsuite_common.kubeconfig import Configuration

IDLE_CONNECTION_TIMEOUT = 90.0
"""Seconds an idle connection is kept for reuse (client-go's IdleConnTimeout: shorter, a burst
after a quiet spell would open, and TLS-handshake, its connections anew)."""
UNACKNOWLEDGED_TIMEOUT = 2.0
"""Seconds the bytes sent on a connection to the API server may stay unacknowledged before the
kernel drops the connection and them (TCP_USER_TIMEOUT, #20). Without it a request sent just
before a partition stays in the send queue and is retransmitted, and executed, whenever the
partition heals, long after the write fence closed and a standby took over. It must stay below
lease duration - renew deadline (5 s with client-go's defaults): the fence closes at the renew
deadline after the last successful renewal was sent at the latest, and what was in flight then
must arrive, or never, before the lease can expire for anyone else."""


TLS_READ_BUFFER = 32 * 1024
"""Bytes a TLS connection reads at once: two TLS records' plaintext (16 KiB each at most).
asyncio gives each connection a read buffer of 256 KiB (``SSLProtocol.max_size``), allocated
and zero-filled when it connects, and reads up to that much per call. With up to
MAX_PARALLEL_REQUESTS connections after a burst of writes that held some 16 MiB, which the
process kept (#21)."""


def bound_tls_read_buffers() -> None:
    """Make every TLS connection the process opens from now on (the session's, kopf's) read
    through TLS_READ_BUFFER bytes instead of asyncio's 256 KiB."""
    asyncio.sslproto.SSLProtocol.max_size = TLS_READ_BUFFER


def api_socket(addr_info: tuple[Any, ...]) -> socket.socket:
    """A socket to the API server: no Nagle, and the bound on unacknowledged bytes."""
    family, type_, proto, _name, _address = addr_info
    sock = socket.socket(family, type_, proto)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    timeout_ms = int(UNACKNOWLEDGED_TIMEOUT * 1000)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, timeout_ms)
    return sock


class ResumingContext(ssl.SSLContext):
    """A client TLS context that offers each new connection the session of an earlier one, so
    that the server may resume it (RFC 8446 2.2) instead of a full handshake: no certificate
    exchange and, with a client certificate, no signature with its key. Every connection
    needs its own handshake over HTTP/1.1 (a KubeApi opens one per request it has in flight),
    and a resumed one costs less CPU than a full one (bench/README.md). A server that declines
    makes a full handshake, whose session is offered from then on."""

    def __init__(self, protocol: int) -> None:
        """``protocol``: SSLContext's own (its ``__new__`` takes it)."""
        super().__init__()
        self._session: ssl.SSLSession | None = None
        self._pending: deque[ssl.SSLObject] = deque(maxlen=8)
        """Connections made since the last session was taken, newest last; a TLS 1.3 session
        ticket arrives only after the handshake."""

    def wrap_bio(
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        """What asyncio's TLS transport calls for each connection: offer the latest session."""
        if session is None and not server_side:
            session = self.resumable()
        connection = super().wrap_bio(incoming, outgoing, server_side, server_hostname, session)
        self._pending.append(connection)
        return connection

    def resumable(self) -> ssl.SSLSession | None:
        """The session to offer: that of the newest connection that made a full handshake
        (the first one, or one whose offer the server declined: it restarted with new ticket
        keys, say), once its ticket is there. Only the newest connection whose handshake is
        done is looked at; taking a session copies it, certificates and all."""
        for index in range(len(self._pending) - 1, -1, -1):
            connection = self._pending[index]
            if connection.version() is None:
                continue  # its handshake is under way
            if not connection.session_reused:
                session = connection.session
                if session is None or not session.has_ticket:
                    break  # the ticket comes after the handshake: look again next time
                self._session = session
            for _ in range(index + 1):  # it is newer than these: they tell nothing more
                self._pending.popleft()
            break
        return self._session


def ssl_context(configuration: Configuration) -> ssl.SSLContext:
    """The CA, client certificate and verification the configuration asks for (as
    ``ssl.create_default_context``: the server's certificate and host name verified)."""
    context = ResumingContext(ssl.PROTOCOL_TLS_CLIENT)
    if configuration.ca_file:
        context.load_verify_locations(cafile=configuration.ca_file)
    else:
        context.load_default_certs()
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file)
    if not configuration.verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


class Session:
    """The process's connections to the API server, shared by a KubeApi and the ones derived
    from it: one pool per event loop that sends requests (the operator's, and the metrics
    server's thread's for its reviews), each made on that loop's first request, since a
    connection belongs to the loop that made it."""

    def __init__(self, configuration: Configuration, user_agent: str) -> None:
        self.configuration = configuration
        self.host = urlsplit(configuration.host).netloc
        self.headers = (
            f"Host: {self.host}\r\nUser-Agent: {user_agent}\r\nAccept: application/json\r\n"
        ).encode("latin-1")
        """The headers every request carries."""
        self._server: Server | None = None
        self._pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, ConnectionPool] = (
            weakref.WeakKeyDictionary()
        )
        self._firsts: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self._answered = not configuration.host.startswith("https:")  # no TLS: no session

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Until one request has had its answer (or failed), requests go one at a time: the
        first connection's TLS session is then there for the others to resume (a burst of a
        new process would otherwise make a full handshake on every connection)."""
        if not self._answered:
            loop = asyncio.get_running_loop()
            first = self._firsts.get(loop)
            if first is None:
                first = self._firsts[loop] = asyncio.Lock()
            async with first:
                if not self._answered:
                    try:
                        yield
                    finally:
                        self._answered = True
                    return
        yield

    def pool(self) -> ConnectionPool:
        """The running event loop's pool."""
        loop = asyncio.get_running_loop()
        pool = self._pools.get(loop)
        if pool is None:
            if self._server is None:
                conf = self.configuration
                self._server = Server(
                    url=conf.host,
                    tls=ssl_context(conf) if conf.host.startswith("https:") else None,
                    server_hostname=conf.tls_server_name,
                    proxy=conf.proxy,
                )
            pool = ConnectionPool(
                self._server, idle_timeout=IDLE_CONNECTION_TIMEOUT, socket_factory=api_socket
            )
            self._pools[loop] = pool
        return pool

    def close(self) -> None:
        """Close every pool's connections, each on its own loop."""
        running = asyncio.get_running_loop()
        for loop, pool in list(self._pools.items()):
            if loop is running:
                pool.close()
            elif not loop.is_closed():
                loop.call_soon_threadsafe(pool.close)
