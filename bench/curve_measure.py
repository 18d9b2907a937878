"""The measuring of one implementation at one size, against a run's objects: its start to
Ready, its RSS once settled, the CPU of an event burst (every pod annotated, or every source
updated), the status lists of what it reconciled, and the floor of opsuite's start."""

from __future__ import annotations

import json
import os
import subprocess
import time
from urllib.parse import urlencode

from bench import configmapsync as cms
from bench import plane
from bench.cpu import cpu_seconds, cpu_settled, rss_mib
from bench.curve_objects import DESTINATIONS, CurveObjects
from bench.curve_results import LISTED, Point, encoding, status_lists
from bench.implementations import OPSUITE, Implementation
from bench.objwatch import timed_parallel
from bench.operator import OperatorProcess
from bench.plane import ROOT, read, request, request_json
from bench.runtime import runtime_bin
from opsuite_common.kube import resource_path

PROBE = ROOT / "bench" / "floor_probe.py"
FLOOR_PROBES = 5
"""Probes of each part of a start's floor; the floor is the least (the API server's answer to
one listing swings by half, with the run's bursts just behind it)."""

METADATA_ONLY = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
"""The Accept of a watch of objects' metadata only (controller-runtime's ``OnlyMetadata``)."""


def measure(objects: CurveObjects, impl: Implementation, n: int, settle_s: float) -> Point:
    """One implementation at ``n`` objects."""
    process: OperatorProcess = impl.process(
        objects.names.watched_namespace(impl.pair), f"{objects.names.prefix}-{n}"
    )
    process.start(ready_timeout=objects.timeout)
    try:
        assert process.pid is not None
        assert process.ready_s is not None
        ready_s = process.ready_s
        time.sleep(settle_s)
        rss_synced = rss_mib(process.pid) or 0.0
        cpu_before = cpu_seconds(process.pid) or 0.0
        began = time.monotonic()
        events = (
            _update_sources(objects) if impl.pair == "configmapsync" else _annotate_pods(objects)
        )
        burst_s = time.monotonic() - began
        cpu_burst_s = cpu_settled(process.pid) - cpu_before
        rss_after_burst = rss_mib(process.pid) or 0.0
        if not process.alive():
            raise RuntimeError(f"{impl.command} exited; see {process.log_path}")
    finally:
        process.stop()
    lists, largest = (
        status_lists(impl.pair, objects.resources(impl.pair)) if impl.side == OPSUITE else ({}, 0)
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


def ready(objects: CurveObjects, impl: Implementation, n: int) -> float:
    """One more start of ``impl`` with ``n`` objects present: seconds to Ready."""
    process = impl.process(
        objects.names.watched_namespace(impl.pair), f"{objects.names.prefix}-{n}-ready"
    ).start(objects.timeout)
    try:
        assert process.ready_s is not None
        return process.ready_s
    finally:
        process.stop()


def _annotate_pods(objects: CurveObjects) -> int:
    """Annotate every pod of the run (one event each); how many."""
    pods_ns = objects.names.pods_ns
    listed = request_json(objects.api, "GET", resource_path("v1", "pods", pods_ns))
    names = [p["metadata"]["name"] for p in listed.get("items") or []]
    patch = {"metadata": {"annotations": {"curve.opsuite.dev/tick": objects.next_tick()}}}

    def one(name: str) -> None:
        path = resource_path("v1", "pods", pods_ns, name)
        read(
            request(
                objects.wide,
                "PATCH",
                path,
                body=patch,
                content_type="application/merge-patch+json",
            )
        )

    timed_parallel(one, names)
    return len(names)


def _update_sources(objects: CurveObjects) -> int:
    """A new version of every source; returns once every copy carries it; the copies."""
    version = objects.next_tick()
    copies = objects.track_copies()
    try:
        total = len(objects.syncs) * DESTINATIONS
        updated = copies.arm("copies updated", lambda _k, v: v == version, total)
        for name in objects.syncs:
            cms._put(objects.wide, objects.names.source_ns, cms._configmap(name, version))
        updated.wait(objects.timeout)
    finally:
        copies.stop()
    return total


def floor(objects: CurveObjects, pair: str) -> dict[str, float]:
    """The floor of opsuite's start with the objects present (:mod:`bench.floor_probe`, run by
    the runtime virtualenv): ``imports_s``, and ``listing_s``, ``listing_cpu_s``, ``listing_mb``
    of the bare streaming list: each part the least of ``FLOOR_PROBES`` probes (the listing's
    CPU and bytes those of its quickest)."""
    package, plural = LISTED[pair]
    query = {
        "watch": "1",
        "sendInitialEvents": "true",
        "allowWatchBookmarks": "true",
        "resourceVersionMatch": "NotOlderThan",
    }
    namespace = objects.names.watched_namespace(pair)
    url = f"{resource_path('v1', plural, namespace)}?{urlencode(query)}"
    imports = min(_probe("imports", f"{package}.__main__")["wall_s"] for _ in range(FLOOR_PROBES))
    floor = {"imports_s": round(imports, 3), **_listing("listing", url, encoding(plural))}
    if plural == "configmaps":  # what watching the copies' metadata only would list (#36)
        floor |= _listing("metadata_listing", url, METADATA_ONLY)
    return floor


def _listing(name: str, url: str, accept: str) -> dict[str, float]:
    """The quickest of ``FLOOR_PROBES`` bare streaming lists: ``<name>_s``, its CPU and MB."""
    listing = min(
        (_probe("listing", url, accept) for _ in range(FLOOR_PROBES)),
        key=lambda probe: probe["wall_s"],
    )
    return {
        f"{name}_s": round(listing["wall_s"], 3),
        f"{name}_cpu_s": round(listing["cpu_s"], 3),
        f"{name}_mb": round(listing["bytes"] / 1e6, 1),
    }


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
