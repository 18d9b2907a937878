"""Medians, PodSet/ReplicaSet ratios, targets: a printed table and a JSON document."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.podset_vs_replicaset import Config, Trial
from bench.workloads import PODSET, REPLICASET

MAX_TIME_RATIO = 1.0
"""PodSet time / ReplicaSet time, for each of created, Running and deleted."""
MAX_REQUESTS_PER_POD = 1.2
"""PodSet API requests per created pod while scaling up."""

PHASES = (
    ("created_s", "0->{n} created (s)"),
    ("running_s", "0->{n} Running (s)"),
    ("deleted_s", "{n}->0 deleted (s)"),
)


@dataclass(frozen=True)
class Row:
    """One line of the summary: medians for both controllers and whether the target is met."""

    metric: str
    label: str
    replicaset: float
    podset: float
    ratio: float | None
    target: str
    met: bool


def _median(trials: Sequence[Trial], workload: str, attr: str) -> float:
    values = [float(getattr(t, attr)) for t in trials if t.workload == workload]
    return statistics.median(values) if values else math.nan


def summarize(trials: Sequence[Trial], config: Config) -> list[Row]:
    """Rows for the three timed phases and for requests per created pod."""
    rows: list[Row] = []
    for attr, label in PHASES:
        rs = _median(trials, REPLICASET.label, attr)
        ps = _median(trials, PODSET.label, attr)
        ratio = ps / rs if rs > 0 else math.nan
        rows.append(
            Row(
                attr,
                label.format(n=config.replicas),
                rs,
                ps,
                ratio,
                f"ratio <= {MAX_TIME_RATIO:.1f}",
                ratio <= MAX_TIME_RATIO,
            )
        )
    rs = _median(trials, REPLICASET.label, "requests_per_created_pod")
    ps = _median(trials, PODSET.label, "requests_per_created_pod")
    rows.append(
        Row(
            "requests_per_created_pod",
            "API requests per created pod",
            rs,
            ps,
            None,
            f"PodSet <= {MAX_REQUESTS_PER_POD}",
            ps <= MAX_REQUESTS_PER_POD,
        )
    )
    return rows


def _span(span: tuple[float, float] | None) -> str:
    if span is None:
        return f"{'-':>12} {'-':>12}"
    return f"{span[0]:12.2f} {span[1]:12.2f}"


def table(rows: Sequence[Row], trials: Sequence[Trial], config: Config) -> str:
    """A plain-text report: per-trial figures, then medians, ratios and targets."""
    lines = [
        f"PodSet vs ReplicaSet, {config.replicas} pods, {config.rounds} rounds",
        "",
        f"{'round':>5}  {'controller':10} {'created s':>9} {'Running s':>9} {'settled s':>9} "
        f"{'deleted s':>9} {'req up':>6} {'pods':>5} {'req/pod':>7} {'req down':>8} "
        f"{'silence s':>9} {'attempt':>7}",
    ]
    for t in trials:
        lines.append(
            f"{t.round:>5}  {t.workload:10} {t.created_s:9.2f} {t.running_s:9.2f} "
            f"{t.settled_up_s:9.2f} {t.deleted_s:9.2f} {t.requests_up:6d} {t.pods_created:5d} "
            f"{t.requests_per_created_pod:7.3f} {t.requests_down:8d} {t.stall_s:9.1f} "
            f"{t.attempt:7d}"
        )
    lines += [
        "",
        "controller's own pod writes (audit log), seconds after the scale PATCH:",
        f"{'round':>5}  {'controller':10} {'first create':>12} {'last create':>12} "
        f"{'first delete':>12} {'last delete':>12}",
    ]
    for t in trials:
        lines.append(
            f"{t.round:>5}  {t.workload:10} {_span(t.create_span_s)} {_span(t.delete_span_s)}"
        )
    lines += [
        "",
        "CPU seconds while scaling up / down (controller = podset-operator, or the whole "
        "kube-controller-manager):",
        f"{'round':>5}  {'controller':10} {'controller':>11} {'apiserver':>11} "
        f"{'scheduler':>11} {'kwok':>11}",
    ]
    for t in trials:
        cells = [
            f"{t.cpu_up_s.get(p, math.nan):.1f}/{t.cpu_down_s.get(p, math.nan):.1f}"
            for p in ("controller", "kube-apiserver", "kube-scheduler", "kwok")
        ]
        lines.append(f"{t.round:>5}  {t.workload:10} " + " ".join(f"{c:>11}" for c in cells))
    lines += [
        "",
        f"{'median':30} {'ReplicaSet':>10} {'PodSet':>10} {'PS/RS':>7}  {'target':16} met",
    ]
    for row in rows:
        ratio = f"{row.ratio:7.2f}" if row.ratio is not None else f"{'':7}"
        lines.append(
            f"{row.label:30} {row.replicaset:10.3f} {row.podset:10.3f} {ratio}  "
            f"{row.target:16} {'yes' if row.met else 'NO'}"
        )
    return "\n".join(lines)


def write_json(
    path: Path,
    rows: Sequence[Row],
    trials: Sequence[Trial],
    config: Config,
    environment: dict[str, Any],
) -> None:
    """Write the whole measurement (config, environment, trials, summary) as JSON."""
    document = {
        "benchmark": "podset-vs-replicaset",
        "config": asdict(config),
        "environment": environment,
        "trials": [
            {**asdict(t), "requests_per_created_pod": t.requests_per_created_pod} for t in trials
        ],
        "summary": [asdict(r) for r in rows],
        "targets_met": all(r.met for r in rows),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")
