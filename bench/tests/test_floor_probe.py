"""bench/floor_probe.py: reading a stream up to the end of its initial events, and the probe
as the curve runs it (a separate interpreter, bench/ not first on its path)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bench.floor_probe import END_OF_INITIAL_EVENTS, read_until

PROBE = Path(__file__).resolve().parents[1] / "floor_probe.py"


async def _chunks(data: bytes, size: int) -> AsyncIterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


@pytest.mark.parametrize("size", [1, 2, 7, 24, 25, 26, 4096])
def test_read_until_finds_the_marker_across_chunk_boundaries(size: int) -> None:
    head = b'{"type":"ADDED"}\n' * 50
    data = head + b'{"type":"BOOKMARK","annotations":{"' + END_OF_INITIAL_EVENTS + b'":"true"}}\n'
    after = b'{"type":"MODIFIED"}\n' * 50
    read = asyncio.run(read_until(_chunks(data + after, size), END_OF_INITIAL_EVENTS))
    end = len(head) + 35 + len(END_OF_INITIAL_EVENTS)
    assert end <= read < end + size  # the chunk that completes the marker, no later one


def test_read_until_fails_on_a_stream_that_ends_first() -> None:
    with pytest.raises(ValueError, match="ended after 850 bytes"):
        asyncio.run(read_until(_chunks(b'{"type":"ADDED"}\n' * 50, 64), END_OF_INITIAL_EVENTS))


def test_the_probe_times_an_import_in_its_own_interpreter() -> None:
    done = subprocess.run(
        [sys.executable, "-P", str(PROBE), "imports", "email.mime.text"],
        check=True,
        capture_output=True,
        text=True,
    )
    result = json.loads(done.stdout)
    assert 0 < result["wall_s"] < 10
    assert 0 < result["cpu_s"] < 10


def test_the_probe_refuses_unknown_arguments() -> None:
    done = subprocess.run([sys.executable, "-P", str(PROBE), "lists"], capture_output=True)
    assert done.returncode == 2
