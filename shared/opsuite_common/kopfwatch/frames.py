"""Protobuf watch streams as kopf reads them: the length-prefixed frames of a watch, and an error
answered in protobuf made readable to kopf's check of an answer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from opsuite_common.store import JSON


class Answered:
    """An error answer whose body is already read and decoded, as kopf's
    ``errors.check_response`` reads one; the rest (status, headers, raise_for_status) is the
    answer's own."""

    def __init__(self, response: aiohttp.ClientResponse, payload: JSON | None) -> None:
        self._response = response
        self._payload = payload

    def __getattr__(self, name: str) -> Any:
        return getattr(self._response, name)

    async def json(self) -> JSON | None:
        """The decoded Status (None when it was none)."""
        return self._payload

    async def text(self) -> str:
        """Never read: ``json()`` does not fail."""
        return ""


async def frames(content: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """The frames of a protobuf watch: each a 4-byte big-endian length, then the frame. Read
    as the bytes come (a few frames per read), not with two reads per frame."""
    buffer = b""
    async for chunk in content.iter_any():
        buffer = buffer + chunk if buffer else chunk
        start, end = 0, len(buffer)
        while end - start >= 4:
            stop = start + 4 + int.from_bytes(buffer[start : start + 4], "big")
            if stop > end:
                break
            yield buffer[start + 4 : stop]
            start = stop
        buffer = buffer[start:]
    if buffer:  # the API server ends a watch between frames
        raise aiohttp.ClientPayloadError(f"watch stream cut in a frame ({len(buffer)} bytes)")
