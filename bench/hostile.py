"""The ConfigMapSync operator's memory under a tenant's hostile ConfigMaps (#31, item 2).

    python -m bench.hostile [--configmaps 200] [--mib 1] [--syncs 60]

On the local plane, one configmapsync-operator (the runtime virtualenv, as the image ships it)
serves a tenant's namespace and one that accepts its copies. Its peak RSS is sampled in three
phases of one run, each after the operator has settled:

1. **reference**: the tenant's namespace holds nothing;
2. **hoard**: ``--configmaps`` ConfigMaps of ``--mib`` MiB each, every one allowing copies
   everywhere, referenced by no ConfigMapSync (the operator restarted, so its initial listing
   reads them all, as after any crash);
3. **read**: ``--syncs`` ConfigMapSyncs, each copying one of them into the accepting namespace
   (the sources held in full are bounded by configmapsync_operator.sources.MAX_SOURCE_BYTES).

Printed and written to .local/measurements/bench-hostile.json: each phase's peak RSS, its
ratio to the reference, and the chart's memory limit it must stay under.
"""

from __future__ import annotations

import argparse
import json
import secrets
import time
from dataclasses import asdict, dataclass

from kubernetes import client

from bench import configmapsync as cms
from bench.cpu import rss_mib
from bench.objwatch import timed_parallel, wide_client
from bench.operator import OperatorProcess
from bench.plane import LOCAL, apply_crds, ensure_up, read, request
from opsuite_common.kube import resource_path

CHART_LIMIT_MIB = 256
"""The configmapsync-operator chart's default memory limit."""
SETTLE_S = 20.0
"""Seconds of sampling after a phase's objects exist (the peak is taken over them)."""
OUTPUT = LOCAL / "measurements" / "bench-hostile.json"


@dataclass
class Result:
    configmaps: int
    mib_each: float
    syncs: int
    reference_mib: float
    hoard_mib: float
    read_mib: float
    limit_mib: int = CHART_LIMIT_MIB


def _peak(operator: OperatorProcess, seconds: float) -> float:
    assert operator.pid is not None
    peak = 0.0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        peak = max(peak, rss_mib(operator.pid) or 0.0)
        time.sleep(0.2)
    return peak


def _operator(namespaces: list[str], run: str) -> OperatorProcess:
    flags = [f"--namespace={ns}" for ns in namespaces]
    log = LOCAL / "bench-logs" / f"hostile-{run}.log"
    return OperatorProcess("configmapsync-operator", flags, log).start(ready_timeout=300)


def _wait_copies(api: client.ApiClient, namespace: str, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        path = resource_path("v1", "configmaps", namespace)
        listed = json.loads(
            read(request(api, "GET", path, query={"labelSelector": cms.OWNER_LABEL}))
        )
        if len(listed.get("items") or ()) >= count:
            return
        time.sleep(1.0)
    raise TimeoutError(f"fewer than {count} copies in {namespace} after {timeout:.0f} s")


def run(configmaps: int, mib: float, syncs: int) -> Result:
    ensure_up()
    apply_crds(cms.CRD_DIR, cms.CRD_NAME)
    api = wide_client()
    run_id = secrets.token_hex(3)
    tenant, accepting = f"hostile-{run_id}", f"hostile-{run_id}-open"
    cms.create_namespaces(api, [tenant, accepting], {cms.NAMESPACE_LABEL: run_id})
    try:
        operator = _operator([tenant, accepting], run_id)
        reference = _peak(operator, SETTLE_S)
        operator.stop()
        payload = "x" * int(mib * 2**20)

        def post(i: int) -> None:
            body = {
                "metadata": {"name": f"hoard-{i}", "annotations": {cms.ALLOWED_NAMESPACES: "*"}},
                "data": {"payload": payload},
            }
            read(request(api, "POST", resource_path("v1", "configmaps", tenant), body=body))

        timed_parallel(post, list(range(configmaps)), threads=8)
        operator = _operator([tenant, accepting], run_id)
        hoard = _peak(operator, SETTLE_S)
        for i in range(syncs):
            body = cms._sync(f"read-{i}", f"hoard-{i}", destinationNamespaces=[accepting])
            path = resource_path(cms.GROUP_VERSION, "configmapsyncs", tenant)
            read(request(api, "POST", path, body=body))
        _wait_copies(api, accepting, syncs, timeout=600)
        read_peak = _peak(operator, SETTLE_S)
        operator.stop()
    finally:
        cms.delete_namespaces(api, [tenant, accepting])
    return Result(configmaps, mib, syncs, reference, hoard, read_peak)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hostile", description=__doc__)
    parser.add_argument("--configmaps", type=int, default=200)
    parser.add_argument("--mib", type=float, default=1.0)
    parser.add_argument("--syncs", type=int, default=60)
    args = parser.parse_args(argv)
    result = run(args.configmaps, args.mib, args.syncs)
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(json.dumps(asdict(result), indent=2) + "\n")
    print(f"{'phase':<40} {'peak RSS':>10} {'x ref':>7}")
    rows = (
        ("reference (nothing)", result.reference_mib),
        (f"hoard ({result.configmaps} x {result.mib_each:g} MiB, unread)", result.hoard_mib),
        (f"read ({result.syncs} of them synced)", result.read_mib),
    )
    for name, mib in rows:
        print(f"{name:<40} {mib:>7.1f} MiB {mib / result.reference_mib:>6.2f}")
    worst = max(result.hoard_mib, result.read_mib)
    verdict = "under" if worst < result.limit_mib else "OVER"
    print(f"chart limit {result.limit_mib} MiB: {verdict} ({worst:.0f} MiB at worst)")
    return 0 if worst < result.limit_mib else 1


if __name__ == "__main__":
    raise SystemExit(main())
