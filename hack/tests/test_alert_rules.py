"""The charts' alerting rules (``metrics.prometheusRule``), checked as Prometheus users' CI
checks them: ``promtool check rules`` on each chart's rules, and ``promtool test rules`` with
series that raise each alert, and healthy ones that raise none. promtool comes from
``make tools`` (hack/tools/promtool, the pinned Prometheus module)."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from helm_render import render

from opsuite_packaging.bundle import find
from opsuite_packaging.operators import OPERATORS

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / ".local" / "bin"
CHARTS = [importlib.import_module(op.manifests).CHART_SPEC.name for op in OPERATORS]
ALERTS = ("Down", "NoLeader", "WatchUnhealthy", "ReconcileErrors", "WorkqueueDepth",
          "WorkqueueLatency")  # fmt: skip


def _groups(chart: str) -> list[dict[str, Any]]:
    (rule,) = find(render(chart, "metrics.prometheusRule.enabled=true"), "PrometheusRule")
    groups: list[dict[str, Any]] = rule["spec"]["groups"]
    return groups


def _promtool(*args: str, cwd: Path) -> str:
    done = subprocess.run([str(BIN / "promtool"), *args], capture_output=True, text=True, cwd=cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _annotations(rule: dict[str, Any], labels: dict[str, str], value: str) -> dict[str, str]:
    """The rule's annotations as Prometheus expands them for an alert."""

    def expand(text: str) -> str:
        text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], text)
        return text.replace("{{ $value }}", value)

    return {key: expand(text) for key, text in rule["annotations"].items()}


@pytest.mark.parametrize("chart", CHARTS)
def test_each_alert_fires_on_its_symptom_and_none_on_a_healthy_operator(
    chart: str, tmp_path: Path
) -> None:
    groups = _groups(chart)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    assert "SUCCESS" in _promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    rules = {r["alert"]: r for r in groups[0]["rules"]}
    prefix = chart.replace("-", " ").title().replace(" ", "")
    assert sorted(rules) == sorted(prefix + alert for alert in ALERTS)
    sel = f'job="r-{chart}-metrics", namespace="ns"'

    def series(sick: bool) -> list[dict[str, str]]:
        return [
            {"series": f'up{{{sel}, pod="a"}}', "values": "0x30" if sick else "1x30"},
            {"series": f'leader_election_master_status{{{sel}, name="r"}}',
             "values": "0x30" if sick else "1x30"},
            {"series": f"opsuite_watch_stale_streams{{{sel}}}",
             "values": "1x30" if sick else "0x30"},
            {"series": f'controller_runtime_reconcile_errors_total{{{sel}, controller="c"}}',
             "values": "0+5x30" if sick else "3x30"},
            {"series": f'workqueue_depth{{{sel}, name="c", controller="c", priority=""}}',
             "values": "500x30" if sick else "2x30"},
            {"series": f'workqueue_queue_duration_seconds_bucket{{{sel}, name="c", le="1"}}',
             "values": "0x30" if sick else "0+10x30"},
            {"series": f'workqueue_queue_duration_seconds_bucket{{{sel}, name="c", le="120"}}',
             "values": "0x30" if sick else "0+10x30"},
            {"series": f'workqueue_queue_duration_seconds_bucket{{{sel}, name="c", le="+Inf"}}',
             "values": "0+10x30"},
        ]  # fmt: skip

    fired = {
        "Down": ({}, "1"),  # absent() of an expression carries no labels
        "NoLeader": ({}, "0"),
        "WatchUnhealthy": ({}, "1"),
        "ReconcileErrors": ({"controller": "c"}, "0"),
        "WorkqueueDepth": ({"name": "c"}, "500"),
        "WorkqueueLatency": ({"name": "c"}, "120"),  # all above 120 s: the highest bound
    }
    sick_checks, healthy_checks = [], []
    for alert, (labels, value) in fired.items():
        rule = rules[prefix + alert]
        expected = {
            "exp_labels": {**labels, **rule["labels"]},
            "exp_annotations": _annotations(rule, labels, value),
        }
        sick_checks.append({"eval_time": "25m", "alertname": rule["alert"],
                            "exp_alerts": [expected]})  # fmt: skip
        healthy_checks.append({"eval_time": "25m", "alertname": rule["alert"], "exp_alerts": []})
    tests = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {"interval": "1m", "input_series": series(sick=True),
             "alert_rule_test": sick_checks},
            {"interval": "1m", "input_series": series(sick=False),
             "alert_rule_test": healthy_checks},
        ],
    }  # fmt: skip
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    assert "SUCCESS" in _promtool("test", "rules", "tests.yaml", cwd=tmp_path)
