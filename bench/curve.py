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
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from bench import configmapsync as cms
from bench import plane
from bench import poddebugger as pdb
from bench.cpu import cpu_seconds, cpu_settled, rss_mib
from bench.implementations import (
    GO,
    IMPLEMENTATIONS,
    OPSUITE,
    PAIRS,
    Implementation,
    median,
    order,
    ratio,
)
from bench.objwatch import Tracker, timed_parallel, wide_client
from bench.operator import OperatorProcess
from bench.plane import LOCAL, ROOT, read, request, request_json
from bench.readme import RESULTS
from bench.runner import Environment, measure, write_document
from bench.runtime import runtime_bin
from bench.workloads import PODSET, pod_template
from opsuite_common import protowatch
from opsuite_common.kube import resource_path

OUTPUT = LOCAL / "measurements" / "bench-curve.json"
SIZES = (1000, 5000, 20000)
NODE_PODS = 1000
"""Pods per added kwok node (the plane's own take 1,100)."""
NODE_LABEL = "opsuite.dev/bench-curve"
DESTINATIONS = 500
RSS_RATIO = 1.0
READY_RATIO = 1.5
RSS_TARGET_SIZES = (5000, 20000)
READY_TARGET_SIZE = 20000
PROBE = ROOT / "bench" / "floor_probe.py"
FLOOR_PROBES = 5
"""Probes of each part of a start's floor; the floor is the least (the API server's answer to
one listing swings by half, with the run's bursts just behind it)."""
LISTED = {
    "podset": ("podset_operator", "pods"),
    "configmapsync": ("configmapsync_operator", "configmaps"),
    "poddebugger": ("poddebugger_operator", "pods"),
}
"""Each pair's operator package, and the largest collection it watches (lists at its start)."""
CRDS = {
    "podset": ("podset-operator", "podsets.apps.opsuite.dev"),
    "configmapsync": ("configmapsync-operator", cms.CRD_NAME),
    "poddebugger": ("pod-debugger-operator", pdb.CRD_NAME),
}


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


@dataclass(frozen=True)
class Point:
    """One implementation at one size, measured in one go by :meth:`Curve.measure`."""

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
    """After opsuite's turn: the floor of its start (:meth:`Curve.floor`)."""

    @property
    def cpu_per_1000_events(self) -> float:
        """CPU seconds per 1,000 events of the burst."""
        return self.cpu_burst_s / (self.events / 1000) if self.events else float("nan")


def _max_items(pair: str) -> dict[str, int | None]:
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
    bounds = _max_items(pair)
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


class Curve:
    """The run's objects and the measuring of one implementation."""

    def __init__(self, api: client.ApiClient, config: Config, progress: Callable[[str], None]):
        self.api = api
        self.wide = wide_client()
        self.config = config
        self.progress = progress
        self.run_id = secrets.token_hex(3)
        self.prefix = f"curve-{self.run_id}"
        self.pods_ns = f"{self.prefix}-pods"
        self.source_ns = f"{self.prefix}-src"
        self.destinations = [f"{self.prefix}-d{i:03d}" for i in range(DESTINATIONS)]
        self.dest_label = f"{NODE_LABEL}-{self.run_id}"
        self.nodes: list[str] = []
        self.namespaces: list[str] = []
        self.syncs: list[str] = []
        self.sync_uids: list[str] = []
        self.tick = 0

    # ------------------------------------------------------------- setup

    def add_nodes(self, count: int) -> None:
        """kwok nodes for the run's pods, tainted so that nothing else lands there."""
        capacity = {"cpu": "64", "memory": "256Gi", "pods": str(NODE_PODS + 50)}
        for i in range(len(self.nodes), count):
            name = f"kwok-{self.prefix}-{i:02d}"
            body = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "annotations": {plane.FAKE_NODE_ANNOTATION: "fake"},
                    "labels": {
                        "type": "kwok",
                        NODE_LABEL: self.run_id,
                        "kubernetes.io/hostname": name,
                    },
                },
                "spec": {
                    "taints": [{"key": NODE_LABEL, "value": self.run_id, "effect": "NoSchedule"}]
                },
                "status": {"allocatable": capacity, "capacity": capacity},
            }
            request_json(self.api, "POST", resource_path("v1", "nodes"), body=body)
            self.nodes.append(name)
        self._wait(lambda: plane._ready_fake_nodes() >= count, f"{count} kwok nodes Ready", 2.0)

    def _wait(self, done: Callable[[], bool], what: str, interval: float = 1.0) -> None:
        deadline = time.monotonic() + self.config.timeout
        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError(f"not within {self.config.timeout:.0f} s: {what}")
            time.sleep(interval)

    def _namespace(self, name: str, labels: dict[str, str] | None = None) -> None:
        self.namespaces.append(name)
        plane.create_namespace(self.api, name, {cms.NAMESPACE_LABEL: self.run_id, **(labels or {})})

    def _podset(self, replicas: int) -> dict[str, Any]:
        body = PODSET.manifest("curve", replicas)
        spec = body["spec"]["template"]["spec"] = dict(pod_template("curve")["spec"])
        spec["nodeSelector"] = {NODE_LABEL: self.run_id}
        spec["tolerations"] = [{"key": NODE_LABEL, "operator": "Equal", "value": self.run_id}]
        return body

    def _podset_ready(self, n: int) -> bool:
        obj = request_json(self.api, "GET", PODSET.path(self.pods_ns, "curve"))
        status = obj.get("status") or {}
        return (
            status.get("observedGeneration") == obj["metadata"].get("generation")
            and status.get("readyReplicas") == n
        )

    def grow_pods(self, n: int) -> None:
        """N Running pods of the PodSet (podset-operator scales it), and the PodDebugger."""
        self.add_nodes(-(-n // NODE_PODS))
        if self.pods_ns not in self.namespaces:
            self._namespace(self.pods_ns)
            read(request(self.api, "POST", PODSET.path(self.pods_ns), body=self._podset(n)))
            debugger = pdb._debugger("curve", "x")
            debugger["spec"]["selector"] = {"matchLabels": {"app": "curve"}}
            debugger["spec"]["maxPods"] = 10
            path = resource_path(pdb.GROUP_VERSION, "poddebuggers", self.pods_ns)
            request_json(self.api, "POST", path, body=debugger)
        else:
            PODSET.scale(self.api, self.pods_ns, "curve", n)
        impl = IMPLEMENTATIONS["podset"][0]
        process = impl.process(self.pods_ns, f"{self.prefix}-grow").start(self.config.timeout)
        try:
            began = time.monotonic()
            self._wait(lambda: self._podset_ready(n), f"{n} pods ready", 5.0)
            self.progress(f"{n} pods Running in {time.monotonic() - began:.0f} s")
        finally:
            process.stop()

    def _owner_selector(self) -> str:
        return f"{cms.OWNER_LABEL} in ({','.join(self.sync_uids)})"

    def grow_copies(self, n: int) -> None:
        """N copies: n / DESTINATIONS syncs into the run's namespaces (configmapsync-operator)."""
        if self.source_ns not in self.namespaces:
            self._namespace(self.source_ns)
            self.namespaces.extend(self.destinations)
            cms.create_namespaces(
                self.wide,
                self.destinations,
                {cms.NAMESPACE_LABEL: self.run_id, self.dest_label: "true"},
            )
        wanted = -(-n // DESTINATIONS)
        impl = IMPLEMENTATIONS["configmapsync"][0]
        process = impl.process(None, f"{self.prefix}-grow").start(self.config.timeout)
        try:
            for i in range(len(self.syncs), wanted):
                name = f"settings-{i:02d}"
                body = cms._configmap(name, str(self.tick))
                read(
                    request(
                        self.api,
                        "POST",
                        resource_path("v1", "configmaps", self.source_ns),
                        body=body,
                    )
                )
                sync = cms._sync(
                    name, name, namespaceSelector={"matchLabels": {self.dest_label: "true"}}
                )
                created = request_json(self.api, "POST", cms._sync_path(self.source_ns), body=sync)
                self.syncs.append(name)
                self.sync_uids.append(created["metadata"]["uid"])
            copies = Tracker(
                self.api, resource_path("v1", "configmaps"), cms._version, self._owner_selector()
            ).start(timeout=120)
            try:
                copies.arm("copies", lambda _k, _s: True, wanted * DESTINATIONS).wait(
                    self.config.timeout
                )
            finally:
                copies.stop()
        finally:
            process.stop()
        self.progress(f"{wanted * DESTINATIONS} copies written")

    # ------------------------------------------------------------- measuring

    def _annotate_pods(self) -> int:
        """Annotate every pod of the run (one event each); how many."""
        listed = request_json(self.api, "GET", resource_path("v1", "pods", self.pods_ns))
        names = [p["metadata"]["name"] for p in listed.get("items") or []]
        self.tick += 1
        patch = {"metadata": {"annotations": {"curve.opsuite.dev/tick": str(self.tick)}}}

        def one(name: str) -> None:
            path = resource_path("v1", "pods", self.pods_ns, name)
            read(
                request(
                    self.wide,
                    "PATCH",
                    path,
                    body=patch,
                    content_type="application/merge-patch+json",
                )
            )

        timed_parallel(one, names)
        return len(names)

    def _update_sources(self) -> int:
        """A new version of every source; returns once every copy carries it; the copies."""
        self.tick += 1
        version = str(self.tick)
        copies = Tracker(
            self.api, resource_path("v1", "configmaps"), cms._version, self._owner_selector()
        ).start(timeout=120)
        try:
            total = len(self.syncs) * DESTINATIONS
            updated = copies.arm("copies updated", lambda _k, v: v == version, total)
            for name in self.syncs:
                cms._put(self.wide, self.source_ns, cms._configmap(name, version))
            updated.wait(self.config.timeout)
        finally:
            copies.stop()
        return total

    def measure(self, impl: Implementation, n: int) -> Point:
        """One implementation at ``n`` objects."""
        process: OperatorProcess = impl.process(
            self._watched_namespace(impl.pair), f"{self.prefix}-{n}"
        )
        process.start(ready_timeout=self.config.timeout)
        try:
            assert process.pid is not None
            assert process.ready_s is not None
            ready_s = process.ready_s
            time.sleep(self.config.settle_s)
            rss_synced = rss_mib(process.pid) or 0.0
            cpu_before = cpu_seconds(process.pid) or 0.0
            began = time.monotonic()
            events = (
                self._update_sources() if impl.pair == "configmapsync" else self._annotate_pods()
            )
            burst_s = time.monotonic() - began
            cpu_burst_s = cpu_settled(process.pid) - cpu_before
            rss_after_burst = rss_mib(process.pid) or 0.0
            if not process.alive():
                raise RuntimeError(f"{impl.command} exited; see {process.log_path}")
        finally:
            process.stop()
        lists, largest = (
            status_lists(impl.pair, self._resources(impl.pair)) if impl.side == OPSUITE else ({}, 0)
        )
        return Point(
            impl.pair,
            impl.side,
            n,
            ready_s=round(ready_s, 3),
            rss_mib=round(rss_synced, 1),
            events=events,
            burst_s=round(burst_s, 1),
            cpu_burst_s=round(cpu_burst_s, 2),
            rss_after_burst_mib=round(rss_after_burst, 1),
            status_lists=lists,
            status_bytes=largest,
        )

    def ready(self, impl: Implementation, n: int) -> float:
        """One more start of ``impl`` with ``n`` objects present: seconds to Ready."""
        process = impl.process(
            self._watched_namespace(impl.pair), f"{self.prefix}-{n}-ready"
        ).start(self.config.timeout)
        try:
            assert process.ready_s is not None
            return process.ready_s
        finally:
            process.stop()

    def _watched_namespace(self, pair: str) -> str | None:
        """Where ``pair``'s operator watches: cluster-wide (ConfigMapSync), or the pods'
        namespace."""
        return None if pair == "configmapsync" else self.pods_ns

    def floor(self, pair: str) -> dict[str, float]:
        """The floor of opsuite's start with the objects present (:mod:`bench.floor_probe`,
        run by the runtime virtualenv): ``imports_s``, and ``listing_s``, ``listing_cpu_s``,
        ``listing_mb`` of the bare streaming list: each part the least of ``FLOOR_PROBES``
        probes (the listing's CPU and bytes those of its quickest)."""
        package, plural = LISTED[pair]
        query = {
            "watch": "1",
            "sendInitialEvents": "true",
            "allowWatchBookmarks": "true",
            "resourceVersionMatch": "NotOlderThan",
        }
        url = f"{resource_path('v1', plural, self._watched_namespace(pair))}?{urlencode(query)}"
        imports = min(
            _probe("imports", f"{package}.__main__")["wall_s"] for _ in range(FLOOR_PROBES)
        )
        listing = min(
            (_probe("listing", url, encoding(plural)) for _ in range(FLOOR_PROBES)),
            key=lambda probe: probe["wall_s"],
        )
        return {
            "imports_s": round(imports, 3),
            "listing_s": round(listing["wall_s"], 3),
            "listing_cpu_s": round(listing["cpu_s"], 3),
            "listing_mb": round(listing["bytes"] / 1e6, 1),
        }

    def _resources(self, pair: str) -> list[dict[str, Any]]:
        name = CRDS[pair][1]
        plural, group = name.split(".", 1)
        ns = self.source_ns if pair == "configmapsync" else self.pods_ns
        listed = request_json(self.api, "GET", resource_path(f"{group}/v1alpha1", plural, ns))
        return list(listed.get("items") or [])

    # ------------------------------------------------------------- clean-up

    def cleanup(self) -> None:
        """Syncs, namespaces (their pods and copies), then the added nodes."""
        for name in self.syncs:
            try:
                read(request(self.api, "DELETE", cms._sync_path(self.source_ns, name)))
            except ApiException as exc:
                if exc.status != 404:
                    self.progress(f"warning: sync {name}: {exc.status}")
        self.progress(f"deleting {len(self.namespaces)} namespaces {self.prefix}-*")
        left = cms.delete_namespaces(self.wide, self.namespaces, timeout=900.0)
        if left:
            self.progress(f"warning: {left} namespaces {self.prefix}-* still terminating")
        for name in self.nodes:
            try:
                read(request(self.api, "DELETE", resource_path("v1", "nodes", None, name)))
            except ApiException as exc:
                self.progress(f"warning: node {name}: {exc.status}")


def encoding(plural: str) -> str:
    """What the operators' watch of ``plural`` asks for: protobuf for the resources
    :mod:`opsuite_common.protowatch` decodes, else JSON."""
    return protowatch.ACCEPT if plural in protowatch.MESSAGES else "application/json"


def _probe(*args: str) -> dict[str, float]:
    """One run of bench/floor_probe.py by the runtime virtualenv's interpreter (``-P``: not
    bench/ first on its path, where operator.py would shadow the standard library's)."""
    done = subprocess.run(
        [str(runtime_bin() / "python"), "-P", str(PROBE), *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "KUBECONFIG": str(plane.KUBECONFIG)},
    )
    result: dict[str, float] = json.loads(done.stdout)
    return result


def run(
    api: client.ApiClient, config: Config, progress: Callable[[str], None] = print
) -> list[Point]:
    """Every size, every pair, both sides; cleans up whatever happens."""
    for pair in config.pairs:
        chart, name = CRDS[pair]
        plane.apply_crds(ROOT / "charts" / chart / "crds", name)
    runtime_bin()  # made before the first trial, not inside it
    curve = Curve(api, config, progress)
    points: list[Point] = []
    try:
        for turn, n in enumerate(sorted(config.sizes)):
            if {"podset", "poddebugger"} & set(config.pairs):
                curve.grow_pods(n)
            if "configmapsync" in config.pairs:
                curve.grow_copies(n)
            for pair in config.pairs:
                measured = [curve.measure(impl, n) for impl in order(pair, turn)]
                starts = {p.side: [p.ready_s] for p in measured}
                for extra in range(1, config.ready_rounds):
                    for impl in order(pair, turn + extra):
                        starts[impl.side].append(round(curve.ready(impl, n), 3))
                floor = curve.floor(pair)
                for point in measured:
                    point = replace(
                        point,
                        ready_s=median(starts[point.side]),
                        floor=floor if point.side == OPSUITE else {},
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
    finally:
        curve.cleanup()


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


def _points(documents: list[dict[str, Any]]) -> list[Point]:
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
    rows = summary(_points(merged))
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
