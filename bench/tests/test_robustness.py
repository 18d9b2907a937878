"""docs/robustness.md's network-fault section, rendered from the saved measurements (#20)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from bench.readme import MARKER
from bench.robustness import DOC, RESULTS, ROWS, SECTION, WORKLOADS, collect, render

SLOW = {
    "loss": 0.05,
    "sizes": {"pods": 60, "destinations": 30, "debugged": 20},
    "clean": {**dict.fromkeys(WORKLOADS, 2.0), "requests": 100, "no_response": 0},
    "clean_again": {**dict.fromkeys(WORKLOADS, 2.2), "requests": 98, "no_response": 0},
    "faulted": {**dict.fromkeys(WORKLOADS, 9.0), "requests": 130, "no_response": 3},
    "slowdown": dict.fromkeys(WORKLOADS, 4.5),
    "extra_requests": 30,
    "measured_at": "2026-11-24T19:40:00+00:00",
}


def test_every_figure_and_the_workloads_are_rendered() -> None:
    figures = {
        "partition_podset": {"failover_s": 14.5, "pods_over_replicas": 0, "measured_at": "a"},
        "watch_gap_partition": {"pods_deleted": 2, "pods_created": 3},
        "latency_and_loss": SLOW,
    }
    text = render(figures)
    assert "| 14.5 | ≤ 17 (leaseDuration + retryPeriod) |" in text
    assert "pods over `replicas` at any moment (pod watch) | 0 | 0 |" in text
    assert "| pods deleted in the gap / re-created | 2 / 3 | equal |" in text
    for name, (title, _) in ROWS.items():
        if name not in figures:
            assert f"| {title} | not run | | |" in text
    assert "| PodSet 0 → 60 (s) | 2.0 | 2.2 | 9.0 | x 4.5 |" in text
    assert "| 100 | 98 | 130 | +30 |" in text
    assert "(`<error>`) | 0 | 0 | 3 | |" in text


def test_newer_measurements_replace_the_kept_results(tmp_path: Path) -> None:
    fresh, kept = tmp_path / "m.json", tmp_path / "results" / "r.json"
    assert collect(fresh, kept) == {}
    fresh.write_text(json.dumps({"partition_podset": {"failover_s": 1}}))
    assert collect(fresh, kept) == {"partition_podset": {"failover_s": 1}}
    kept.write_text(json.dumps({"partition_podset": {"failover_s": 2}}))
    os.utime(fresh, (0, 0))  # older than the kept copy: kept wins
    assert collect(fresh, kept) == {"partition_podset": {"failover_s": 2}}


def test_the_doc_has_the_section_and_it_is_current() -> None:
    """docs/robustness.md holds the section, rendered from the committed results."""
    sections = {m.group("name"): m.group(0) for m in MARKER.finditer(DOC.read_text())}
    assert SECTION in sections
    if RESULTS.exists():
        assert render(json.loads(RESULTS.read_text())) in sections[SECTION]
