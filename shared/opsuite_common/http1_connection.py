"""One HTTP/1.1 connection of :class:`~opsuite_common.http1.ConnectionPool`: an asyncio protocol
that writes a request and parses its response as the bytes arrive, however they are split.

A response body comes whole (``Content-Length``, chunked, or up to the connection's end), or,
with ``first_line``, up to the first line of a streamed body; interim (1xx) responses are
skipped. The connection carries one request at a time and may carry another only once a
response ended cleanly with nothing after it: bytes nobody asked for, or a response that does
not parse, close it. What to connect to, and when to reuse, is the pool's.
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass

__all__ = ["Connection", "HttpConnectionError", "Response"]

MAX_HEAD = 64 * 1024
"""Largest response head (status line and headers) accepted, in bytes."""


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


class Connection(asyncio.Protocol):
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
