"""Rendering of bench/README.md's generated sections from saved measurements."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from bench.readme import (
    collect,
    ecdf,
    figure_table,
    figures,
    render,
    render_charts,
    replace_sections,
)

ENV = {
    "date": "2026-11-22T03:00:00+00:00",
    "duration_s": 12.5,
    "commit": "abc1234",
    "opsuite": "0.1.0",
    "kubernetes": "v1.36.3",
    "python": "3.11.2",
    "cpus": 2,
    "memory_gib": 23.5,
    "load_average_before": [3.0, 2.0, 1.0],
    "load_average_after": [4.0, 2.0, 1.0],
}


def _podset() -> dict[str, Any]:
    return {
        "environment": ENV,
        "summary": [
            {
                "label": "0->500 created (s)",
                "replicaset": 4.0,
                "podset": 5.0,
                "ratio": 1.25,
                "target": "ratio <= 1.0",
                "met": False,
            },
            {
                "label": "API requests per created pod",
                "replicaset": 1.2,
                "podset": 0.9,
                "ratio": None,
                "target": "PodSet <= 1.2",
                "met": True,
            },
        ],
        "trials": [
            {"workload": "PodSet", "round": 1, "create_times_s": [0.1, 0.2, 0.4]},
            {"workload": "ReplicaSet", "round": 1, "create_times_s": [0.05, 0.1]},
        ],
    }


def _scale() -> dict[str, Any]:
    return {
        "environment": ENV,
        "config": {"quiet_s": 600.0, "settle_s": 60.0},
        "summary": [
            {
                "operator": "podset-operator",
                "metric": "rss_end_mib",
                "label": "RSS after the quiet window (MiB)",
                "value": 90.5,
                "reference": 181.0,
                "ratio": 0.5,
                "met": True,
            },
            {
                "operator": "podset-operator",
                "metric": "writes",
                "label": "write requests in the window",
                "value": 2.0,
                "reference": 40.0,
                "ratio": 0.05,
                "met": False,
            },
        ],
        "result": {
            "converged_s": {"podsets ready": 100.0},
            "rss_synced_mib": {"podset-operator": 88.0},
            "rss_end_mib": {"podset-operator": 90.5},
            "cpu_quiet_s": {"podset-operator": 1.5},
            "requests": {
                "podset-operator": {
                    "by_verb": {"watch": 20, "patch": 2},
                    "by_request": {"watch pods (kopf)": 20},
                }
            },
            "rss_series": {"podset-operator": [[0.0, 60.0], [5.0, 90.5]]},
            "phases": {"load started": 1.0},
            "profile": {
                "operator": "podset-operator",
                "traced_mib": 40.0,
                "rss_under_tracemalloc_mib": 150.0,
                "by_caller": [{"caller": "opsuite_common/store.py:47", "mib": 20.0}],
                "by_line": [{"site": "json/decoder.py:353", "mib": 15.0, "blocks": 9}],
            },
        },
    }


def test_figures_take_each_benchmarks_own_columns() -> None:
    podset, per_pod = figures("podset", _podset())
    assert (podset.value, podset.reference, podset.ratio, podset.met) == (5.0, 4.0, 1.25, False)
    assert per_pod.ratio == 0.75  # the summary has none for requests per pod: computed
    rss, writes = figures("scale", _scale())
    assert rss.label == "podset-operator: RSS after the quiet window (MiB)"
    assert (rss.target, writes.target) == ("<= 120 MiB", "0")


def test_figure_table_marks_misses_and_missing_values() -> None:
    table = figure_table(figures("podset", _podset()) + figures("scale", _scale()))
    assert "| podset | 0->500 created (s) | 5 | 4 | 1.25 | ratio <= 1.0 | **NO** |" in table
    assert "| 90.5 | 181 | 0.5 | <= 120 MiB | yes |" in table


def test_replace_sections_keeps_hand_written_text() -> None:
    text = "intro\n<!-- generated:summary -->\nold\n<!-- /generated:summary -->\nmethod\n"
    out = replace_sections(text, {"summary": "new table"})
    assert (
        out == "intro\n<!-- generated:summary -->\nnew table\n<!-- /generated:summary -->\nmethod\n"
    )
    assert replace_sections(out, {"summary": "new table"}) == out
    with pytest.raises(ValueError, match="scale"):
        replace_sections(text, {"scale": "x"})


def test_render_lists_environment_charts_and_scale_details() -> None:
    documents = {"podset": _podset(), "scale": _scale()}
    sections = render(documents, [("RSS", "scale-rss.png")])
    assert "| scale | 2026-11-22T03:00:00+00:00 | 12.5 s | abc1234 |" in sections["summary"]
    assert "| 2 | 23.5 GiB | 3.0 → 4.0 |" in sections["summary"]
    assert "![RSS](charts/scale-rss.png)" in sections["summary"]
    assert "| podset-operator | 88 | 90.5 | 1.5 | watch 20, patch 2 |" in sections["scale"]
    assert "`opsuite_common/store.py:47`" in sections["scale"]


def test_ecdf() -> None:
    assert ecdf([3.0, 1.0, 2.0, 4.0]) == ([1.0, 2.0, 3.0, 4.0], [0.25, 0.5, 0.75, 1.0])


def test_charts_are_written_for_what_the_documents_hold(tmp_path: Path) -> None:
    made = render_charts({"podset": _podset(), "scale": _scale()}, tmp_path)
    assert [name for _, name in made] == ["podset-created-over-time.png", "scale-rss.png"]
    for _, name in made:
        assert (tmp_path / name).read_bytes().startswith(b"\x89PNG")


def test_collect_prefers_the_newer_measurement(tmp_path: Path) -> None:
    measurements, results = tmp_path / "m", tmp_path / "r"
    measurements.mkdir()
    results.mkdir()
    (results / "podset.json").write_text(json.dumps({"v": "kept"}))
    (measurements / "bench-podset.json").write_text(json.dumps({"v": "old"}))
    os.utime(measurements / "bench-podset.json", (0, 0))
    (measurements / "bench-scale.json").write_text(json.dumps({"v": "fresh"}))
    documents = collect(measurements, results)
    assert documents == {"podset": {"v": "kept"}, "scale": {"v": "fresh"}}
    assert (results / "scale.json").exists()


def _row(
    pair: str, label: str, ops: float, go: float, target: str, objects: int = 0
) -> dict[str, Any]:
    limit = float(target.split()[-1]) if target != "reported" else None
    r = ops / go
    return {
        "pair": pair,
        "objects": objects,
        "label": label,
        "opsuite": ops,
        "go": go,
        "ratio": r,
        "target": target,
        "met": None if limit is None else r <= limit,
    }


def _versus() -> dict[str, Any]:
    return {
        "environment": ENV,
        "summary": [
            _row("podset", "converge: PodSet 0->500 (s)", 8.0, 10.0, "ratio <= 1.0"),
            _row("podset", "CPU seconds, whole workload", 4.0, 2.0, "ratio <= 1.5"),
            _row("podset", "API requests, whole workload", 600, 500, "ratio <= 1.0"),
            _row("podset", "RSS after the initial sync (MiB)", 80, 40, "ratio <= 1.2"),
            _row("podset", "floor: interpreter + import kopf (s)", 0.3, 0.1, "reported"),
        ],
    }


def _curve() -> dict[str, Any]:
    points = [
        {"pair": "podset", "side": side, "objects": n, "rss_mib": rss}
        for side, n, rss in (
            ("opsuite", 1000, 80),
            ("opsuite", 5000, 95),
            ("go", 1000, 40),
            ("go", 5000, 90),
        )
    ]
    return {
        "environment": ENV,
        "points": points,
        "summary": [
            _row("podset", "1,000 objects: RSS (MiB)", 80, 40, "reported", 1000),
            _row("podset", "5,000 objects: RSS (MiB)", 95, 90, "ratio <= 1.0", 5000),
        ],
    }


def test_targets_table_lists_every_target_met_missed_or_not_measured() -> None:
    sections = render({"versus": _versus(), "curve": _curve()}, [])
    targets = sections["targets"]
    assert targets.startswith("1 of 5 figures meet their target.")
    assert (
        "| time to converge (each workload) | ratio <= 1.0 | podset | "
        "converge: PodSet 0->500 (s) | 8 | 10 | 0.8 | met |" in targets
    )
    assert (
        "| CPU seconds per workload | ratio <= 1.5 | podset | "
        "CPU seconds, whole workload | 4 | 2 | 2 | **missed** |" in targets
    )
    assert "5,000 objects: RSS (MiB) | 95 | 90 | 1.06 | **missed** |" in targets
    assert (
        "| start to Ready with 20,000 objects present | ratio <= 1.5 | - | not measured |"
        in targets
    )
    assert (
        "| RSS, small workloads | ratio <= 1.2 | podset | "
        "RSS after the initial sync (MiB) | 80 | 40 | 2 | **missed** |" in targets
    )
    assert "| start to Ready, small workloads | ratio <= 3.0 | - | not measured |" in targets
    assert "1,000 objects" not in targets
    assert "floor:" not in targets
    assert (
        "| versus | podset: floor: interpreter + import kopf (s) | 0.3 | 0.1 | 3 | reported | - |"
        in sections["summary"]
    )


def test_the_curve_chart_draws_rss_against_objects(tmp_path: Path) -> None:
    made = render_charts({"curve": _curve()}, tmp_path)
    assert made == [("Scale curve: RSS against watched objects", "curve-rss.png")]
    assert (tmp_path / "curve-rss.png").read_bytes().startswith(b"\x89PNG")
