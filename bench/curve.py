"""The scale curve: each opsuite operator and its Go reference at 1,000, 5,000 and 20,000
watched objects (``python -m bench curve``).

Objects: pods for PodSet and PodDebugger (one PodSet of N replicas, scaled up from one size to
the next by podset-operator, in one namespace; a PodDebugger with ``maxPods`` 10 on the same
pods), ConfigMap copies for ConfigMapSync (N / 500 syncs, each copying its source into the same
500 labelled namespaces). The pods go to kwok nodes the run adds (``NODE_PODS`` pods each,
tainted so that only the run's pods go there) and removes at the end.

At each size, each implementation in turn (the order alternating between sizes), alone:

* starts serving the objects: **start to Ready** (process start to its first /readyz 200; the
  median of ``Config.ready_rounds`` starts, alternating which implementation goes first);
* ``settle_s`` later, **RSS**, and MiB per 1,000 objects;
* an **event burst**: every pod annotated (PodSet, PodDebugger: N pod events, nothing to
  write), every source updated (ConfigMapSync: N copies to rewrite); **CPU seconds per 1,000
  events** from the burst's start until the process's CPU stops rising;
* stops.

After opsuite's turn, every list in each custom resource's ``status`` is measured against the
CRD's ``maxItems`` (``status.podNames`` must stay within its bound at 20,000 pods), and the
**floor of its start** is probed (:mod:`bench.floor_probe`, the least of ``FLOOR_PROBES``
probes each): the seconds its imports take, and those of a bare aiohttp client reading the
streaming list of the largest collection it watches, in its watch's encoding, without parsing
it. No start to Ready can be shorter than their sum; its ratio to the Go reference's start to
Ready is the part of that target no work of opsuite's own can win.

This module is the run's order (:func:`run`, :func:`measure_pair`) and its command; the run's
objects are :mod:`bench.curve_objects`', the measuring :mod:`bench.curve_measure`'s, the figures,
targets and saved document :mod:`bench.curve_results`'.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from kubernetes import client

from bench import curve_measure, plane
from bench.curve_objects import CurveObjects, RunNames
from bench.curve_results import CRDS, Point, merge, points_from, summary, table
from bench.implementations import OPSUITE, PAIRS, median, order
from bench.plane import LOCAL, ROOT
from bench.readme import RESULTS
from bench.runner import Environment, measure, write_document
from bench.runtime import runtime_bin

OUTPUT = LOCAL / "measurements" / "bench-curve.json"
SIZES = (1000, 5000, 20000)


@dataclass(frozen=True)
class Config:
    """What to run."""

    sizes: tuple[int, ...] = SIZES
    pairs: tuple[str, ...] = PAIRS
    settle_s: float = 10.0
    timeout: float = 1800.0
    ready_rounds: int = 3
    """Starts of each implementation at each size (alternating which goes first); the point's
    start to Ready is their median: single starts swing by a third between runs."""


def run(
    api: client.ApiClient, config: Config, progress: Callable[[str], None] = print
) -> list[Point]:
    """Every size, every pair, both sides; cleans up whatever happens."""
    for pair in config.pairs:
        chart, name = CRDS[pair]
        plane.apply_crds(ROOT / "charts" / chart / "crds", name)
    runtime_bin()  # made before the first trial, not inside it
    objects = CurveObjects(api, RunNames.new(), config.timeout, progress)
    points: list[Point] = []
    try:
        for turn, n in enumerate(sorted(config.sizes)):
            if {"podset", "poddebugger"} & set(config.pairs):
                objects.grow_pods(n)
            if "configmapsync" in config.pairs:
                objects.grow_copies(n)
            for pair in config.pairs:
                points += measure_pair(objects, config, pair, n, turn, progress)
        return points
    finally:
        objects.cleanup()


def measure_pair(
    objects: CurveObjects,
    config: Config,
    pair: str,
    n: int,
    turn: int,
    progress: Callable[[str], None],
) -> list[Point]:
    """Both sides of ``pair`` at ``n`` objects, in ``turn``'s order: one measured start each,
    ``ready_rounds - 1`` more starts (the order alternating) for the median start to Ready, and
    the floor of opsuite's start."""
    measured = [
        curve_measure.measure(objects, impl, n, config.settle_s) for impl in order(pair, turn)
    ]
    starts = {p.side: [p.ready_s] for p in measured}
    for extra in range(1, config.ready_rounds):
        for impl in order(pair, turn + extra):
            starts[impl.side].append(round(curve_measure.ready(objects, impl, n), 3))
    start_floor = curve_measure.floor(objects, pair)
    points: list[Point] = []
    for point in measured:
        point = replace(
            point,
            ready_s=median(starts[point.side]),
            floor=start_floor if point.side == OPSUITE else {},
        )
        points.append(point)
        progress(
            f"{n} {point.side} {pair}: ready {point.ready_s:.2f} s "
            f"(starts {starts[point.side]}), RSS {point.rss_mib} MiB, "
            f"{point.events} events in {point.burst_s} s, CPU {point.cpu_burst_s} s"
            + (f", status lists {point.status_lists}" if point.status_lists else "")
            + (f", start floor {point.floor}" if point.floor else "")
        )
    return points


def main(
    args: argparse.Namespace,
    environment: Environment,
) -> int:
    """Run the curve; the exit status (0 done, 1 missed with --strict; bench.runner.Failed)."""
    config = Config(
        sizes=tuple(int(s) for s in args.sizes.split(",")) if args.sizes else SIZES,
        pairs=tuple(args.pairs.split(",")) if args.pairs else PAIRS,
        timeout=max(args.timeout, Config.timeout),
    )
    output = Path(args.output or OUTPUT)
    points, env = measure(
        lambda api: run(api, config),
        environment,
        f"curve failed (logs: {LOCAL / 'bench'}/curve-*.log)",
    )
    # The points of the sizes not measured now: the last run's here, else the committed ones
    # (a fresh checkout has no .local/measurements).
    saved = output if output.exists() else RESULTS / "curve.json"
    previous = json.loads(saved.read_text()) if saved.exists() else None
    merged = merge(previous, points, env)
    rows = summary(points_from(merged))
    print()
    print(table(rows))
    document = {
        "benchmark": "curve",
        "config": asdict(config),
        "environment": env,
        "points": merged,
        "summary": rows,
        "targets_met": all(r["met"] is not False for r in rows),
    }
    return write_document(output, document, strict=args.strict)
