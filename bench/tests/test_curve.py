"""The scale curve's figures (bench.curve): status-list bounds, merging runs, targets."""

from __future__ import annotations

from bench.curve import Point, _max_items, merge, status_lists, summary, within_bounds
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
    bounds = _max_items("podset")
    assert bounds["podNames"] == 100
    assert "conditions" not in bounds


def test_the_poddebugger_crd_bounds_its_keyed_lists_too() -> None:
    bounds = _max_items("poddebugger")
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
