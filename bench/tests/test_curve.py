"""The scale curve's figures (bench.curve_results): status-list bounds, merging runs, targets;
and the names a run gives what it creates (bench.curve_objects)."""

from __future__ import annotations

from dataclasses import replace

from bench.curve_objects import DESTINATIONS, RunNames
from bench.curve_results import (
    Point,
    encoding,
    max_items,
    merge,
    points_from,
    status_lists,
    summary,
    within_bounds,
)
from bench.implementations import GO, OPSUITE


def _point(pair: str, side: str, n: int, rss: float, ready: float, cpu: float) -> Point:
    return Point(
        pair,
        side,
        n,
        ready_s=ready,
        rss_mib=rss,
        events=n,
        burst_s=1.0,
        cpu_burst_s=cpu,
        rss_after_burst_mib=rss,
    )


def test_the_podset_crd_bounds_pod_names_and_leaves_conditions_to_their_keys() -> None:
    bounds = max_items("podset")
    assert bounds["podNames"] == 100
    assert "conditions" not in bounds


def test_the_poddebugger_crd_bounds_its_keyed_lists_too() -> None:
    bounds = max_items("poddebugger")
    assert bounds["debuggedPods"] == 200
    assert bounds["failedPods"] == 20
    assert "conditions" not in bounds


def test_status_lists_longest_length_against_the_bound() -> None:
    big = {"status": {"podNames": [f"p{i}" for i in range(100)]}}
    lists, size = status_lists("podset", [{"status": {"podNames": ["a"]}}, big])
    assert lists["podNames"] == {"length": 100, "max_items": 100}
    assert within_bounds(lists)
    assert size > 100 * 4
    over: dict[str, dict[str, int | None]] = {"podNames": {"length": 101, "max_items": 100}}
    assert not within_bounds(over)
    assert not within_bounds({"unbounded": {"length": 0, "max_items": None}})


def test_summary_targets_rss_at_5000_and_ready_at_20000_only() -> None:
    points = [
        _point("podset", OPSUITE, 1000, rss=80, ready=2.0, cpu=1.0),
        _point("podset", GO, 1000, rss=40, ready=0.5, cpu=2.0),
        _point("podset", OPSUITE, 5000, rss=90, ready=3.0, cpu=5.0),
        _point("podset", GO, 5000, rss=100, ready=1.0, cpu=10.0),
        _point("podset", OPSUITE, 20000, rss=150, ready=3.0, cpu=20.0),
        _point("podset", GO, 20000, rss=300, ready=2.5, cpu=40.0),
    ]
    rows = {r["label"]: r for r in summary(points)}
    assert rows["1,000 objects: RSS (MiB)"]["met"] is None
    assert rows["5,000 objects: RSS (MiB)"]["met"] is True
    assert rows["20,000 objects: RSS (MiB)"]["ratio"] == 0.5
    assert rows["5,000 objects: start to Ready (s)"]["met"] is None
    assert rows["20,000 objects: start to Ready (s)"]["met"] is True  # 1.2 <= 1.5
    assert rows["20,000 objects: MiB per 1,000 objects"]["opsuite"] == 7.5
    assert rows["5,000 objects: CPU s per 1,000 events"]["opsuite"] == 1.0


def test_merge_keeps_an_earlier_runs_other_sizes_and_replaces_the_same() -> None:
    env = {"date": "new"}
    earlier = merge(None, [_point("podset", OPSUITE, 1000, 80, 1, 1)], {"date": "old"})
    earlier += merge(None, [_point("podset", OPSUITE, 20000, 150, 1, 1)], {"date": "old"})
    merged = merge({"points": earlier}, [_point("podset", OPSUITE, 1000, 70, 1, 1)], env)
    assert [(p["objects"], p["rss_mib"], p["environment"]["date"]) for p in merged] == [
        (1000, 70, "new"),
        (20000, 150, "old"),
    ]


def test_the_floor_of_a_start_is_reported_against_go_s_start_to_ready() -> None:
    floor = {"imports_s": 0.4, "listing_s": 0.6, "listing_cpu_s": 0.3, "listing_mb": 25.6}
    ops = replace(_point("configmapsync", OPSUITE, 20000, 100, 1.3, 8.0), floor=floor)
    go = _point("configmapsync", GO, 20000, 190, 0.5, 11.0)
    rows = {r["label"]: r for r in summary([ops, go])}
    total = rows[
        "20,000 objects: start floor: imports + bare list, against Go's start to Ready (s)"
    ]
    assert (total["opsuite"], total["go"], total["ratio"]) == (1.0, 0.5, 2.0)
    assert total["met"] is None
    assert total["target"] == "reported"
    listing = rows[
        "20,000 objects: start floor: bare streaming list of the configmaps, JSON, 25.6 MB "
        "(0.3 s CPU) (s)"
    ]
    assert listing["opsuite"] == 0.6
    assert rows["20,000 objects: start floor: imports (s)"]["opsuite"] == 0.4
    without = {r["label"] for r in summary([replace(ops, floor={}), go])}
    assert not any("floor" in label for label in without)
    assert not any("metadata only" in label for label in rows)
    metadata = {
        "metadata_listing_s": 0.55,
        "metadata_listing_cpu_s": 0.2,
        "metadata_listing_mb": 19.6,
    }
    rows = {r["label"]: r for r in summary([replace(ops, floor=floor | metadata), go])}
    only = rows[
        "20,000 objects: start floor: the same list of metadata only (PartialObjectMetadata), "
        "19.6 MB (0.2 s CPU) (s)"
    ]
    assert (only["opsuite"], only["target"], only["met"]) == (0.55, "reported", None)


def test_the_floor_lists_pods_in_protobuf_and_configmaps_in_json() -> None:
    assert "protobuf" in encoding("pods")
    assert encoding("configmaps") == "application/json"


def test_a_saved_run_reads_back_as_the_points_it_was_written_from() -> None:
    """main() reports from the merged document (this run's points and an earlier run's), so a
    point must survive being written: the derived figure and the environment are left out."""
    floor = {"imports_s": 0.4, "listing_s": 0.6, "listing_cpu_s": 0.3, "listing_mb": 25.6}
    points = [
        replace(_point("podset", OPSUITE, 1000, 80, 1.0, 2.0), floor=floor),
        _point("podset", GO, 1000, 40, 0.5, 1.0),
    ]
    assert points_from(merge(None, points, {"date": "now"})) == sorted(points, key=lambda p: p.side)


def test_every_name_a_run_creates_carries_its_id() -> None:
    """Two runs (or a run's leftovers) never share a namespace or a node: each name carries the
    run's id."""
    names = RunNames("abc123")
    assert names.prefix == "curve-abc123"
    made = [names.pods_ns, names.source_ns, *names.destinations, names.node(0)]
    assert all(names.prefix in name for name in made)
    assert len(set(made)) == len(made) == DESTINATIONS + 3
    assert names.watched_namespace("configmapsync") is None
    assert names.watched_namespace("podset") == names.pods_ns
    assert names.watched_namespace("poddebugger") == names.pods_ns
