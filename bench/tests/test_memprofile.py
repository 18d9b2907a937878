"""The tracemalloc summary the scale benchmark dumps from the largest operator."""

from __future__ import annotations

import tracemalloc

from bench import memprofile
from bench.memprofile import summarize


def _allocate() -> list[bytes]:
    return [bytes(1024) for _ in range(2000)]


def test_summarize_names_the_allocating_line() -> None:
    tracemalloc.start(10)
    try:
        kept = _allocate()
        snapshot = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    summary = summarize(snapshot, limit=5)
    assert len(kept) == 2000
    assert summary["traced_mib"] >= 2.0
    top = summary["by_line"][0]
    assert top["site"].endswith(f"test_memprofile.py:{_allocate.__code__.co_firstlineno + 1}")
    assert top["blocks"] >= 2000
    assert summary["by_file"][0]["file"].endswith("test_memprofile.py")
    # bytes() allocates in the test itself: no plumbing frame to skip.
    assert summary["by_caller"][0]["caller"] == top["site"]


def test_plumbing_is_looked_for_in_library_paths_only() -> None:
    """A checkout in a folder named ``aiohttp`` is the project's code, not aiohttp's."""
    assert memprofile._plumbing("/x/.venv/lib/python3.11/site-packages/aiohttp/client.py")
    assert memprofile._plumbing("/usr/lib/python3.11/json/decoder.py")
    assert memprofile._plumbing("<frozen importlib._bootstrap>")
    assert not memprofile._plumbing("/work/wt/aiohttp/shared/opsuite_common/store.py")
    assert not memprofile._plumbing("/x/.venv/lib/python3.11/site-packages/kopf/_core/x.py")
