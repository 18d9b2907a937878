"""The scale curve's results: the figures of one implementation at one size (:class:`Point`),
the status lists of its custom resources against their CRDs' bounds, the summary against the
targets, and the saved document (this run's points merged with an earlier run's).

Pure: no cluster, no process (bench/tests/test_curve.py).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import yaml

from bench import configmapsync as cms
from bench import poddebugger as pdb
from bench.implementations import GO, OPSUITE, PAIRS, ratio
from bench.plane import ROOT
from opsuite_common import protowatch

RSS_RATIO = 1.0
READY_RATIO = 1.5
RSS_TARGET_SIZES = (5000, 20000)
READY_TARGET_SIZE = 20000
CRDS = {
    "podset": ("podset-operator", "podsets.apps.opsuite.dev"),
    "configmapsync": ("configmapsync-operator", cms.CRD_NAME),
    "poddebugger": ("pod-debugger-operator", pdb.CRD_NAME),
}
"""Each pair's chart, and the CRD of the custom resource it reconciles."""
LISTED = {
    "podset": ("podset_operator", "pods"),
    "configmapsync": ("configmapsync_operator", "configmaps"),
    "poddebugger": ("poddebugger_operator", "pods"),
}
"""Each pair's operator package, and the largest collection it watches (lists at its start)."""


@dataclass(frozen=True)
class Point:
    """One implementation at one size, measured in one go by
    :meth:`bench.curve_measure.Measurer.measure`."""

    pair: str
    side: str
    objects: int
    ready_s: float
    """Process start -> first ``/readyz`` 200, the objects already present (the median of
    ``Config.ready_rounds`` starts)."""
    rss_mib: float
    """RSS ``settle_s`` after Ready."""
    events: int
    """Watch events of the burst (pod annotations, or copies updated)."""
    burst_s: float
    cpu_burst_s: float
    """CPU seconds of the burst, until the process's CPU settled."""
    rss_after_burst_mib: float
    status_lists: dict[str, dict[str, int | None]] = field(default_factory=dict)
    """After opsuite's turn: per status list, its longest length and the CRD's maxItems."""
    status_bytes: int = 0
    """After opsuite's turn: the largest custom resource's JSON size."""
    floor: dict[str, float] = field(default_factory=dict)
    """After opsuite's turn: the floor of its start (:meth:`bench.curve_measure.Measurer.floor`)."""

    @property
    def cpu_per_1000_events(self) -> float:
        """CPU seconds per 1,000 events of the burst."""
        return self.cpu_burst_s / (self.events / 1000) if self.events else float("nan")


def max_items(pair: str) -> dict[str, int | None]:
    """maxItems of every array under the CRD's ``status``, by field name; lists keyed by a
    field (``x-kubernetes-list-type: map``) without maxItems (conditions: one per type) are
    bounded by their keys and left out."""
    chart, name = CRDS[pair]
    crd = yaml.safe_load((ROOT / "charts" / chart / "crds" / f"{name}.yaml").read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    return {
        key: prop.get("maxItems")
        for key, prop in (schema.get("properties") or {}).items()
        if prop.get("type") == "array"
        and ("maxItems" in prop or prop.get("x-kubernetes-list-type") != "map")
    }


def status_lists(
    pair: str, objects: list[dict[str, Any]]
) -> tuple[dict[str, dict[str, int | None]], int]:
    """Longest length of each status list over ``objects``, with its bound; the largest JSON."""
    bounds = max_items(pair)
    lists: dict[str, dict[str, int | None]] = {}
    for key, bound in bounds.items():
        longest = max((len((o.get("status") or {}).get(key) or []) for o in objects), default=0)
        lists[key] = {"length": longest, "max_items": bound}
    size = max((len(json.dumps(o)) for o in objects), default=0)
    return lists, size


def within_bounds(lists: dict[str, dict[str, int | None]]) -> bool:
    """True when every list has a bound and stays within it."""
    return all(
        v["max_items"] is not None and (v["length"] or 0) <= v["max_items"] for v in lists.values()
    )


def encoding(plural: str) -> str:
    """What the operators' watch of ``plural`` asks for: protobuf for the resources
    :mod:`opsuite_common.protowatch` decodes, else JSON."""
    return protowatch.ACCEPT if plural in protowatch.MESSAGES else "application/json"


def summary(points: list[Point]) -> list[dict[str, Any]]:
    """Per pair and size: opsuite's figure, Go's, the ratio and the target if there is one."""
    rows: list[dict[str, Any]] = []
    by_key = {(p.pair, p.side, p.objects): p for p in points}
    for pair in dict.fromkeys(p.pair for p in points):
        sizes = sorted({p.objects for p in points if p.pair == pair})
        for n in sizes:
            ops, go = by_key.get((pair, OPSUITE, n)), by_key.get((pair, GO, n))
            if ops is None or go is None:
                continue
            figures: list[tuple[str, float, float, float | None]] = [
                (
                    "RSS (MiB)",
                    ops.rss_mib,
                    go.rss_mib,
                    RSS_RATIO if n in RSS_TARGET_SIZES else None,
                ),
                ("MiB per 1,000 objects", ops.rss_mib / (n / 1000), go.rss_mib / (n / 1000), None),
                (
                    "start to Ready (s)",
                    ops.ready_s,
                    go.ready_s,
                    READY_RATIO if n == READY_TARGET_SIZE else None,
                ),
                ("CPU s per 1,000 events", ops.cpu_per_1000_events, go.cpu_per_1000_events, None),
            ]
            for label, a, b, limit in figures:
                r = ratio(a, b)
                rows.append(
                    {
                        "pair": pair,
                        "objects": n,
                        "label": f"{n:,} objects: {label}",
                        "opsuite": a,
                        "go": b,
                        "ratio": r,
                        "target": f"ratio <= {limit}" if limit is not None else "reported",
                        "met": (r <= limit) if (limit is not None and r is not None) else None,
                    }
                )
            rows.extend(_floor_rows(pair, n, ops, go))
            if ops.status_lists:
                rows.append(
                    {
                        "pair": pair,
                        "objects": n,
                        "label": f"{n:,} objects: status lists within maxItems ("
                        + ", ".join(
                            f"{k} {v['length']}/{v['max_items']}"
                            for k, v in ops.status_lists.items()
                        )
                        + f"; largest object {ops.status_bytes:,} bytes)",
                        "opsuite": float(
                            max((v["length"] or 0) for v in ops.status_lists.values())
                        ),
                        "go": None,
                        "ratio": None,
                        "target": "each <= maxItems",
                        "met": within_bounds(ops.status_lists),
                    }
                )
    return rows


def _floor_rows(pair: str, n: int, ops: Point, go: Point) -> list[dict[str, Any]]:
    """The floor of opsuite's start (reported): imports, the bare listing, and their sum
    against the Go reference's start to Ready."""
    if not ops.floor:
        return []
    plural = LISTED[pair][1]
    kind = "protobuf" if encoding(plural) != "application/json" else "JSON"
    imports, listing = ops.floor["imports_s"], ops.floor["listing_s"]
    figures: list[tuple[str, float, float | None]] = [
        ("start floor: imports (s)", imports, None),
        (
            f"start floor: bare streaming list of the {plural}, {kind}, "
            f"{ops.floor['listing_mb']} MB ({ops.floor['listing_cpu_s']} s CPU) (s)",
            listing,
            None,
        ),
        (
            "start floor: imports + bare list, against Go's start to Ready (s)",
            imports + listing,
            go.ready_s,
        ),
    ]
    if "metadata_listing_s" in ops.floor:
        figures.append(
            (
                f"start floor: the same list of metadata only (PartialObjectMetadata), "
                f"{ops.floor['metadata_listing_mb']} MB "
                f"({ops.floor['metadata_listing_cpu_s']} s CPU) (s)",
                ops.floor["metadata_listing_s"],
                None,
            )
        )
    return [
        {
            "pair": pair,
            "objects": n,
            "label": f"{n:,} objects: {label}",
            "opsuite": a,
            "go": b,
            "ratio": ratio(a, b) if b is not None else None,
            "target": "reported",
            "met": None,
        }
        for label, a, b in figures
    ]


def merge(
    previous: dict[str, Any] | None, points: list[Point], env: dict[str, Any]
) -> list[dict[str, Any]]:
    """This run's points, plus an earlier run's at the sizes this one did not measure."""
    fresh = [
        {**asdict(p), "cpu_per_1000_events": p.cpu_per_1000_events, "environment": env}
        for p in points
    ]
    measured = {(p.pair, p.objects) for p in points}
    kept = [
        old
        for old in (previous or {}).get("points", [])
        if (old["pair"], old["objects"]) not in measured
    ]
    return sorted([*kept, *fresh], key=lambda p: (PAIRS.index(p["pair"]), p["objects"], p["side"]))


def points_from(documents: list[dict[str, Any]]) -> list[Point]:
    """The points of a saved document (``merge``'s), without what it adds to each."""
    names = {f.name for f in Point.__dataclass_fields__.values()}
    return [Point(**{k: v for k, v in d.items() if k in names}) for d in documents]


def table(rows: list[dict[str, Any]]) -> str:
    """Plain-text report."""
    lines = [f"{'pair':14} {'figure':60} {'opsuite':>9} {'Go':>9} {'ratio':>6}  target"]
    for r in rows:
        go = f"{r['go']:9.3f}" if r["go"] is not None else f"{'-':>9}"
        rt = f"{r['ratio']:6.2f}" if r["ratio"] is not None else f"{'-':>6}"
        met = {True: "met", False: "MISSED", None: ""}[r["met"]]
        label = r["label"][:60]
        lines.append(
            f"{r['pair']:14} {label:60} {r['opsuite']:9.3f} {go} {rt}  {r['target']} {met}"
        )
    return "\n".join(lines)
