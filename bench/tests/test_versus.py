"""Side-by-side summaries (bench.versus) and the pairs (bench.implementations)."""

from __future__ import annotations

import math

import pytest

from bench.framework_floor import Floor
from bench.implementations import GO, OPSUITE, order, ratio, verdict
from bench.versus import Phase, Trial, summary


def _trial(side: str, rnd: int, converge: float, cpu: float, requests: int, ready: float) -> Trial:
    trial = Trial("podset", side, rnd, 0, ready_s=ready, rss_synced_mib=80.0, rss_quiet_mib=81.0)
    trial.phases = [
        Phase("up", converge, cpu / 2, (0.0, 1.0), requests // 2),
        Phase("down", converge / 2, cpu / 2, (1.0, 2.0), requests - requests // 2),
    ]
    if side == GO:
        trial.rss_synced_mib = trial.rss_quiet_mib = 40.0
    return trial


def test_order_alternates_which_side_goes_first() -> None:
    assert [i.side for i in order("podset", 0)] == [OPSUITE, GO]
    assert [i.side for i in order("podset", 1)] == [GO, OPSUITE]
    assert [i.command for i in order("poddebugger", 0)] == ["pod-debugger-operator", "poddebugger"]


def test_each_side_claims_only_its_own_requests() -> None:
    for pair in ("podset", "configmapsync", "poddebugger"):
        ops, go = order(pair, 0)
        opsuite_ua = f"{ops.command}/0.1.0 (bench)"
        go_ua = f"{go.command}/v0.0.0 (linux/amd64) kubernetes/$Format"
        assert ops.sent(opsuite_ua)
        assert go.sent(go_ua)
        assert not go.sent(opsuite_ua)
        assert not ops.sent(go_ua)
        # another engineer's operator of the same name on the shared plane
        assert not ops.sent(f"{ops.command}/0.1.0 (e2e-7f3a)")


def test_summary_takes_medians_per_side_and_judges_each_target() -> None:
    trials = [
        _trial(OPSUITE, 1, converge=8.0, cpu=3.0, requests=600, ready=2.0),
        _trial(GO, 1, converge=10.0, cpu=2.0, requests=500, ready=0.1),
        _trial(GO, 2, converge=6.0, cpu=4.0, requests=700, ready=0.3),
        _trial(OPSUITE, 2, converge=4.0, cpu=5.0, requests=400, ready=1.0),
    ]
    rows = {r["label"]: r for r in summary(trials)}
    up = rows["converge: up (s)"]
    assert (up["opsuite"], up["go"], up["ratio"], up["met"]) == (6.0, 8.0, 0.75, True)
    cpu = rows["CPU seconds, whole workload"]
    assert (cpu["opsuite"], cpu["go"]) == (4.0, 3.0)
    assert cpu["met"] is True  # 1.33 <= 1.5
    requests = rows["API requests, whole workload"]
    assert (requests["opsuite"], requests["go"]) == (500, 600)
    assert requests["met"] is True
    ready = rows["start to Ready, objects present (s)"]
    assert ready["ratio"] == pytest.approx(1.5 / 0.2)
    assert ready["met"] is False  # 7.5 > 3.0
    quiet = rows["RSS after the quiet window (MiB)"]
    assert quiet["ratio"] == pytest.approx(81.0 / 40.0)
    assert quiet["met"] is False  # 2.0 > 1.2
    assert not any(label.startswith("floor:") for label in rows)


def test_the_floor_is_set_against_the_go_references_start_and_memory() -> None:
    trials = [
        _trial(OPSUITE, 1, converge=8.0, cpu=3.0, requests=600, ready=0.5),
        _trial(GO, 1, converge=10.0, cpu=2.0, requests=500, ready=0.1),
        _trial(GO, 2, converge=6.0, cpu=4.0, requests=700, ready=0.3),
    ]
    rows = {r["label"]: r for r in summary(trials, Floor(start_s=0.3, rss_mib=42.0))}
    ready = rows["start to Ready, objects present (s)"]
    assert (ready["ratio"], ready["met"]) == (pytest.approx(2.5), True)
    start = rows["floor: interpreter + import kopf, against Go's start to Ready (s)"]
    assert (start["opsuite"], start["go"], start["ratio"]) == (0.3, 0.2, pytest.approx(1.5))
    assert (start["target"], start["met"]) == ("reported", None)
    rss = rows["floor: interpreter + import kopf, against Go's RSS after the initial sync (MiB)"]
    assert (rss["opsuite"], rss["go"], rss["ratio"]) == (42.0, 40.0, pytest.approx(1.05))


def test_a_missed_target_is_reported_missed() -> None:
    trials = [
        _trial(OPSUITE, 1, converge=12.0, cpu=9.0, requests=900, ready=2.0),
        _trial(GO, 1, converge=10.0, cpu=2.0, requests=500, ready=0.1),
    ]
    rows = {r["label"]: r for r in summary(trials)}
    assert rows["converge: up (s)"]["met"] is False
    assert rows["CPU seconds, whole workload"]["met"] is False
    assert rows["API requests, whole workload"]["met"] is False


def test_ratio_and_verdict_without_a_reference_figure() -> None:
    assert ratio(1.0, 0.0) is None
    assert ratio(math.nan, 1.0) is None
    assert verdict(None, 1.0) is None
    assert verdict(1.2, None) is None
    assert verdict(1.0, 1.0) is True


def test_merge_keeps_an_earlier_runs_other_pairs() -> None:
    from dataclasses import asdict

    from bench.versus import merge

    earlier = _trial(OPSUITE, 1, converge=8.0, cpu=3.0, requests=600, ready=2.0)
    other = Trial("poddebugger", GO, 1, 1, ready_s=0.1)
    other.phases = [Phase("inject", 2.0, 0.3, (5.0, 7.0), 210)]
    previous = {"environment": {"date": "then"}, "trials": [asdict(earlier), asdict(other)]}
    kept = merge(previous, ("podset",))
    assert [(t.pair, t.side) for t in kept] == [("poddebugger", GO)]
    assert kept[0].phases == other.phases
    assert kept[0].requests == 210
    assert kept[0].environment == {"date": "then"}
