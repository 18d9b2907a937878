"""What the ConfigMapSync and PodDebugger benchmarks share: an operator measured against a plain
client doing its job, in bursts and in single-object latencies, summarized as median rows."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.objwatch import THREADS, percentile

MAX_RATIO = 1.3
"""Target of each burst: the operator's median time / the plain client's."""


@dataclass(frozen=True)
class Config:
    """What to run, besides the benchmark's own sizes."""

    timeout: float = 300.0
    threads: int = THREADS
    """Threads of the plain client (and of the benchmark's own setup)."""


@dataclass
class Result:
    """What both benchmarks measure (seconds)."""

    namespace_prefix: str = ""
    single_latency_s: list[float] = field(default_factory=list)
    """Per single object: the operator's latency."""
    single_reference_s: list[float] = field(default_factory=list)
    """Per single object: the plain client's round-trip."""
    load_average: float = 0.0

    def single_rows(self, label: str) -> list[dict[str, Any]]:
        """The p50 and p99 rows of the single-object latencies."""
        return percentile_rows("single", label, self.single_latency_s, self.single_reference_s)


def burst_row(
    metric: str, label: str, operator: Sequence[float], reference: Sequence[float]
) -> dict[str, Any]:
    """The row of the medians of per-round burst times, against ``MAX_RATIO``."""
    return row(metric, label, statistics.median(operator), statistics.median(reference), gated=True)


def row(
    metric: str, label: str, operator: float, reference: float, *, gated: bool
) -> dict[str, Any]:
    """A summary row; ``gated``: the target is ``MAX_RATIO``, else the figure is reported."""
    ratio = operator / reference
    return {
        "metric": metric,
        "label": label,
        "operator": operator,
        "reference": reference,
        "ratio": ratio,
        "target": f"ratio <= {MAX_RATIO}" if gated else "reported",
        "met": ratio <= MAX_RATIO if gated else True,
    }


def percentile_rows(
    metric: str, label: str, operator: Sequence[float], reference: Sequence[float]
) -> list[dict[str, Any]]:
    """Reported rows of the p50 and p99 of single-object latencies against the plain client's."""
    return [
        row(
            f"{metric}_p{q}_s",
            f"{label}, p{q} (s)",
            percentile(operator, q),
            percentile(reference, q),
            gated=False,
        )
        for q in (50, 99)
    ]


def median_lines(rows: Sequence[dict[str, Any]], width: int) -> list[str]:
    """The table of ``rows``, labels ``width`` wide."""
    lines = [f"{'median':{width}} {'operator':>9} {'reference':>9} {'ratio':>6}  {'target':12} met"]
    for r in rows:
        lines.append(
            f"{r['label']:{width}} {r['operator']:9.3f} {r['reference']:9.3f} "
            f"{r['ratio']:6.2f}  {r['target']:12} {'yes' if r['met'] else 'NO'}"
        )
    return lines
