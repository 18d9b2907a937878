"""The tracemalloc summary the scale benchmark dumps from the largest operator."""

from __future__ import annotations

import tracemalloc

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
