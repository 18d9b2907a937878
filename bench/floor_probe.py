"""What an operator's start costs before any of its own work: run by the curve
(:func:`bench.curve_measure.floor`) with the runtime virtualenv's interpreter, so that it
imports and connects as a deployed operator does. Prints one JSON object.

``python floor_probe.py imports MODULE``
    seconds to import MODULE (an operator's ``<package>.__main__``: its handlers, the manager,
    kopf, aiohttp, pydantic...), the interpreter's own start excluded.
``python floor_probe.py listing URL ACCEPT``
    a bare aiohttp client (kopf's HTTP client), over TLS with the kubeconfig's credentials,
    reads the streaming list at URL (``sendInitialEvents``) in the encoding ACCEPT asks for,
    up to the bookmark that ends its initial events, and parses nothing: wall seconds, CPU
    seconds (the request's, not the imports'), bytes.

This file imports only what the runtime virtualenv holds (the standard library, aiohttp and
opsuite_common), and those only in the function that needs them.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
import time
from typing import Any

END_OF_INITIAL_EVENTS = b"k8s.io/initial-events-end"
"""The annotation of the bookmark that ends a streaming list's initial events, as raw bytes
in JSON and in protobuf alike (a string field is its UTF-8 bytes)."""


def imports(module: str) -> dict[str, float]:
    """Seconds to import ``module`` (wall and CPU)."""
    began, cpu = time.perf_counter(), time.process_time()
    importlib.import_module(module)
    return {"wall_s": time.perf_counter() - began, "cpu_s": time.process_time() - cpu}


async def read_until(chunks: Any, marker: bytes) -> int:
    """Bytes of the async iterable ``chunks`` up to the one holding ``marker`` (found across
    chunk boundaries too); ValueError if it ends first."""
    keep = len(marker) - 1
    total, tail = 0, b""
    async for chunk in chunks:
        total += len(chunk)
        if marker in chunk or marker in tail + chunk[:keep]:
            return total
        tail = (tail + chunk[-keep:])[-keep:]
    raise ValueError(f"the stream ended after {total} bytes, before {marker!r}")


async def listing(url: str, accept: str) -> dict[str, float]:
    """The streaming list at ``url`` read as bytes (see the module docstring)."""
    import aiohttp

    from opsuite_common.kube_transport import ssl_context
    from opsuite_common.kubeconfig import load_configuration

    conf = load_configuration()
    context = ssl_context(conf)
    headers = {"Accept": accept}
    authorization = await conf.authorization()
    if authorization:
        headers["Authorization"] = authorization
    began, cpu = time.perf_counter(), time.process_time()
    async with (
        aiohttp.ClientSession() as session,
        session.get(conf.host + url, headers=headers, ssl=context) as response,
    ):
        response.raise_for_status()
        size = await read_until(response.content.iter_any(), END_OF_INITIAL_EVENTS)
    return {
        "wall_s": time.perf_counter() - began,
        "cpu_s": time.process_time() - cpu,
        "bytes": float(size),
    }


def main(argv: list[str]) -> int:
    """Run one probe and print its JSON."""
    if len(argv) == 2 and argv[0] == "imports":
        result = imports(argv[1])
    elif len(argv) == 3 and argv[0] == "listing":
        result = asyncio.run(listing(argv[1], argv[2]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
