"""Summaries of the operator-vs-plain-client benchmarks (bench.configmapsync, bench.poddebugger)."""

from __future__ import annotations

import pytest

from bench import configmapsync, poddebugger


def test_configmapsync_summary_gates_the_fanout_ratio_and_reports_single_percentiles() -> None:
    result = configmapsync.Result(
        fanout_s=[2.0, 4.0, 3.0],
        reference_s=[2.0, 2.0, 2.0],
        single_latency_s=[0.1 * i for i in range(1, 101)],
        single_reference_s=[0.01 * i for i in range(1, 101)],
    )
    rows = configmapsync.summary(result, configmapsync.Config(destinations=7))

    assert [r["metric"] for r in rows] == ["fanout_s", "single_p50_s", "single_p99_s"]
    fanout, p50, p99 = rows
    assert fanout == {
        "metric": "fanout_s",
        "label": "source update -> 7 copies (s)",
        "operator": 3.0,
        "reference": 2.0,
        "ratio": 1.5,
        "target": "ratio <= 1.3",
        "met": False,
    }
    assert p50["label"] == "1 destination, p50 (s)"
    assert (p50["operator"], p50["reference"]) == pytest.approx((5.0, 0.5))
    assert p99["label"] == "1 destination, p99 (s)"
    assert (p99["operator"], p99["reference"], p99["ratio"]) == pytest.approx((9.9, 0.99, 10.0))
    assert (p99["target"], p99["met"]) == ("reported", True)


def test_poddebugger_summary_gates_the_burst_and_reports_both_single_latencies() -> None:
    result = poddebugger.Result(
        op_injected_s=[1.2, 1.0, 1.1],
        ref_injected_s=[1.0, 1.0, 0.9],
        single_latency_s=[0.2, 0.4],
        single_created_latency_s=[0.6, 0.8],
        single_reference_s=[0.1, 0.2],
    )
    rows = poddebugger.summary(result, poddebugger.Config(pods=5))

    assert [r["metric"] for r in rows] == [
        "burst_injected_s",
        "single_p50_s",
        "single_p99_s",
        "single_created_p50_s",
        "single_created_p99_s",
    ]
    burst = rows[0]
    assert burst["label"] == "5 pods created -> all injected (s)"
    assert (burst["ratio"], burst["target"], burst["met"]) == (1.1, "ratio <= 1.3", True)
    assert [r["label"] for r in rows[1:]] == [
        "1 pod Running -> injected, p50 (s)",
        "1 pod Running -> injected, p99 (s)",
        "1 pod POST -> injected, p50 (s)",
        "1 pod POST -> injected, p99 (s)",
    ]
    assert [(r["operator"], r["reference"]) for r in rows[1:]] == [
        (0.2, 0.1),
        (0.4, 0.2),
        (0.6, 0.1),
        (0.8, 0.2),
    ]
    assert all(r["met"] and r["target"] == "reported" for r in rows[1:])


def test_configmapsync_table_ends_with_the_median_rows() -> None:
    config = configmapsync.Config(destinations=7, rounds=1)
    measured = configmapsync.Result(
        fanout_s=[3.0], reference_s=[2.0], single_latency_s=[0.5], single_reference_s=[0.25]
    )
    rows = configmapsync.summary(measured, config)
    text = configmapsync.table(rows, configmapsync.Result(), config)  # no rounds to print

    assert text.splitlines()[-4:] == [
        f"{'median':34}  operator reference  ratio  target       met",
        f"{'source update -> 7 copies (s)':34}     3.000     2.000   1.50  ratio <= 1.3 NO",
        f"{'1 destination, p50 (s)':34}     0.500     0.250   2.00  reported     yes",
        f"{'1 destination, p99 (s)':34}     0.500     0.250   2.00  reported     yes",
    ]


def test_poddebugger_table_shows_each_round_then_the_medians() -> None:
    config = poddebugger.Config(pods=5, rounds=1, singles=1)
    result = poddebugger.Result(
        debuggers=1,
        op_running_s=[2.0],
        op_injected_s=[1.0],
        ref_running_s=[2.5],
        ref_injected_s=[0.5],
        single_latency_s=[0.2],
        single_created_latency_s=[0.4],
        single_reference_s=[0.1],
        cpu_op_s=[{"operator": 1.0}],
        cpu_ref_s=[{"kwok": 2.0}],
    )
    lines = poddebugger.table(poddebugger.summary(result, config), result, config).splitlines()

    assert f"{'  operator':28}     2.00      1.00  operator=1.0" in lines
    assert f"{'  plain client':28}     2.50      0.50  kwok=2.0" in lines
    assert lines[-6] == f"{'median':36}  operator reference  ratio  target       met"
    assert (
        lines[-5]
        == f"{'5 pods created -> all injected (s)':36}     1.000     0.500   2.00  ratio <= 1.3 NO"
    )
