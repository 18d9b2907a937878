"""ConfigMapSync fan-out against the same writes by a plain client, on the local plane.

Setup: N destination namespaces (labelled for the run), a source namespace with a source
ConfigMap, and a ConfigMapSync selecting the N namespaces by label (``namespaceSelector``:
``destinationNamespaces`` is capped at 256). One configmapsync-operator runs cluster-wide (no
``--namespace``: N namespaces as flags would be 3N watch streams). The benchmark waits until
all N copies exist.

* **Fan-out**: PUT the source with a new ``data.version``; time from just before the PUT until
  a watch of the copies (configmaps, all namespaces, label ``sync.opsuite.dev/owner-uid=<uid>``)
  has seen every copy carry the new version. **Reference**: a plain client (THREADS threads)
  PUTs a ConfigMap ``bench-ref`` in the same N namespaces; time from just before the first PUT
  until a watch of those ConfigMaps has seen every new version (the response-complete time is
  reported too). Target: fan-out <= 1.3 x reference.
* **Single destination**: a second ConfigMapSync with one destination; K updates of its
  source, one at a time; latency = PUT sent -> watch event of the copy with the new version.
  **Reference**: K raw PUT round-trips of a ConfigMap in that namespace.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from bench import plain_client
from bench.cpu import CpuMeter, plane_pid
from bench.objwatch import Key, Tracker, timed_parallel, wide_client
from bench.operator import OperatorProcess
from bench.plane import LOCAL, ROOT, apply_crds, read, request, request_json
from opsuite_common.kube import resource_path

CRD_DIR = ROOT / "charts" / "configmapsync-operator" / "crds"
GROUP_VERSION = "sync.opsuite.dev/v1alpha1"
CRD_NAME = "configmapsyncs.sync.opsuite.dev"
OWNER_LABEL = "sync.opsuite.dev/owner-uid"
ALLOWED_NAMESPACES = "sync.opsuite.dev/allowed-namespaces"
ACCEPT_FROM = "sync.opsuite.dev/accept-from"
"""The consent annotation every ConfigMapSync source needs."""
"""The operator's ownership label on every copy (configmapsync_operator.models.OWNER_LABEL)."""
OPERATOR_LOG = LOCAL / "bench" / "configmapsync-operator.log"
NAMESPACE_LABEL = "opsuite.dev/bench"


@dataclass(frozen=True)
class Config(plain_client.Config):
    """What to run."""

    destinations: int = 500
    updates: int = 30
    """Single-destination updates (and reference PUT round-trips)."""
    rounds: int = 2
    """Fan-out rounds (each: one operator update, one reference burst)."""


@dataclass
class Result(plain_client.Result):
    """Everything measured (seconds; the single ones: source PUT sent -> copy seen updated,
    against raw PUT round-trips)."""

    setup_s: float = 0.0
    """ConfigMapSync created -> all N copies exist."""
    fanout_s: list[float] = field(default_factory=list)
    """Per round: source PUT sent -> all N copies seen with the new version."""
    fanout_first_s: list[float] = field(default_factory=list)
    """Per round: source PUT sent -> first copy seen updated."""
    reference_s: list[float] = field(default_factory=list)
    """Per round: first reference PUT sent -> all N seen updated by the watch."""
    reference_responses_s: list[float] = field(default_factory=list)
    """Per round: first reference PUT sent -> last PUT response received."""
    reference_put_p50_s: list[float] = field(default_factory=list)
    cpu_fanout_s: list[dict[str, float]] = field(default_factory=list)
    cpu_reference_s: list[dict[str, float]] = field(default_factory=list)


def _configmap(name: str, version: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A bench ConfigMap; as a ConfigMapSync source it allows copies everywhere."""
    meta: dict[str, Any] = {"name": name, "annotations": {ALLOWED_NAMESPACES: "*"}}
    if labels:
        meta["labels"] = labels
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta,
        "data": {"version": version, "payload": "x" * 256},
    }


def _put(api: client.ApiClient, namespace: str, body: dict[str, Any]) -> None:
    path = resource_path("v1", "configmaps", namespace, body["metadata"]["name"])
    read(request(api, "PUT", path, body=body))


def _put_in(api: client.ApiClient, body: dict[str, Any], namespace: str) -> None:
    _put(api, namespace, body)


def _is(version: str, key: Key | None = None) -> Callable[[Key, Any], bool]:
    """Predicate: the object (``key``, or any) carries ``version``."""
    return lambda k, v: v == version and (key is None or k == key)


def _post(api: client.ApiClient, namespace: str, body: dict[str, Any]) -> None:
    read(request(api, "POST", resource_path("v1", "configmaps", namespace), body=body))


def _version(obj: dict[str, Any]) -> str:
    return str((obj.get("data") or {}).get("version", ""))


def _sync(name: str, config_map: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "ConfigMapSync",
        "metadata": {"name": name},
        "spec": {"configMapName": config_map, **spec},
    }


def _sync_path(namespace: str, name: str | None = None) -> str:
    return resource_path(GROUP_VERSION, "configmapsyncs", namespace, name)


def create_namespaces(api: client.ApiClient, names: list[str], labels: dict[str, str]) -> None:
    """Create namespaces concurrently (ConfigMaps need no ServiceAccount: no wait for it)."""

    def one(name: str) -> None:
        metadata = {"name": name, "labels": labels, "annotations": {ACCEPT_FROM: "*"}}
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}
        read(request(api, "POST", resource_path("v1", "namespaces"), body=body))

    timed_parallel(one, names)


def delete_namespaces(api: client.ApiClient, names: list[str], timeout: float = 180.0) -> int:
    """Delete namespaces concurrently, wait until gone; how many were left at the timeout."""

    def delete(name: str) -> None:
        with contextlib.suppress(ApiException):
            read(request(api, "DELETE", resource_path("v1", "namespaces", None, name)))

    timed_parallel(delete, names, threads=16)
    deadline = time.monotonic() + timeout
    remaining = set(names)
    while remaining and time.monotonic() < deadline:
        time.sleep(2.0)
        listed = request_json(api, "GET", resource_path("v1", "namespaces"))
        present = {i["metadata"]["name"] for i in listed.get("items") or []}
        remaining &= present
    return len(remaining)


def _cpu_pids(operator: OperatorProcess) -> dict[str, int | None]:
    return {"operator": operator.pid, "kube-apiserver": plane_pid("kube-apiserver")}


def run(api: client.ApiClient, config: Config) -> Result:
    """Set up, measure, clean up (always)."""
    wide = wide_client(config.threads)
    run_id = secrets.token_hex(3)
    prefix = f"bench-{run_id}"
    source_ns = f"{prefix}-src"
    destinations = [f"{prefix}-d{i:04d}" for i in range(config.destinations)]
    dst_label = f"opsuite.dev/bench-cms-{run_id}"
    result = Result(namespace_prefix=prefix, load_average=os.getloadavg()[0])
    apply_crds(CRD_DIR, CRD_NAME)
    operator = OperatorProcess("configmapsync-operator", [], OPERATOR_LOG)
    trackers: list[Tracker[Any]] = []
    created_ns: list[str] = []
    syncs: list[str] = []
    try:
        created_ns.append(source_ns)
        create_namespaces(wide, [source_ns], {NAMESPACE_LABEL: run_id})
        created_ns.extend(destinations)
        create_namespaces(wide, destinations, {NAMESPACE_LABEL: run_id, dst_label: "true"})
        # Reference ConfigMaps (not owned by any sync), created before the operator starts.
        ref_label = f"opsuite.dev/bench-ref-{run_id}"
        timed_parallel(
            lambda ns: _post(wide, ns, _configmap("bench-ref", "0", {ref_label: "true"})),
            destinations,
        )
        _post(wide, source_ns, _configmap("bench-settings", "0"))
        _post(wide, source_ns, _configmap("bench-single", "0"))
        operator.start()

        # --- fan-out sync: all copies exist
        began = time.monotonic()
        sync = request_json(
            api,
            "POST",
            _sync_path(source_ns),
            body=_sync(
                "bench-fanout",
                "bench-settings",
                namespaceSelector={"matchLabels": {dst_label: "true"}},
            ),
        )
        syncs.append("bench-fanout")
        copies: Tracker[str] = Tracker(
            api,
            resource_path("v1", "configmaps"),
            _version,
            label_selector=f"{OWNER_LABEL}={sync['metadata']['uid']}",
        ).start()
        trackers.append(copies)
        refs: Tracker[str] = Tracker(
            api, resource_path("v1", "configmaps"), _version, label_selector=f"{ref_label}=true"
        ).start()
        trackers.append(refs)
        n = config.destinations
        copies.arm("all copies exist", lambda _k, v: v == "0", n).wait(config.timeout)
        result.setup_s = time.monotonic() - began
        time.sleep(3.0)  # let the operator finish its status writes

        for round_ in range(1, config.rounds + 1):
            version = f"r{round_}"
            # operator
            arm = copies.arm(f"all {n} copies at {version}", _is(version), n)
            meter = CpuMeter(_cpu_pids(operator))
            meter.start()
            began = time.monotonic()
            _put(api, source_ns, _configmap("bench-settings", version))
            last = arm.wait(config.timeout)
            result.fanout_s.append(last - began)
            result.fanout_first_s.append(min(arm.times.values()) - began)
            result.cpu_fanout_s.append(meter.stop())
            time.sleep(3.0)
            # reference: the same N PUTs from a plain threaded client
            arm = refs.arm(f"all {n} references at {version}", _is(version), n)
            body = _configmap("bench-ref", version, {ref_label: "true"})
            meter = CpuMeter(_cpu_pids(operator))
            meter.start()
            began = time.monotonic()
            wall, durations = timed_parallel(functools.partial(_put_in, wide, body), destinations)
            last = arm.wait(config.timeout)
            result.reference_s.append(last - began)
            result.reference_responses_s.append(wall)
            result.reference_put_p50_s.append(statistics.median(durations))
            result.cpu_reference_s.append(meter.stop())
            time.sleep(3.0)

        # --- single destination
        target = destinations[0]
        single = request_json(
            api,
            "POST",
            _sync_path(source_ns),
            body=_sync("bench-single", "bench-single", destinationNamespaces=[target]),
        )
        syncs.append("bench-single")
        one: Tracker[str] = Tracker(
            api,
            resource_path("v1", "configmaps", target),
            _version,
            label_selector=f"{OWNER_LABEL}={single['metadata']['uid']}",
        ).start()
        trackers.append(one)
        one.arm("single copy exists", lambda _k, v: v == "0", 1).wait(config.timeout)
        time.sleep(2.0)
        key: Key = (target, "bench-single")
        for i in range(1, config.updates + 1):
            version = f"s{i}"
            arm = one.arm(f"single copy at {version}", _is(version, key), 1)
            began = time.monotonic()
            _put(api, source_ns, _configmap("bench-single", version))
            result.single_latency_s.append(arm.wait(60.0) - began)
            time.sleep(0.3)
        for i in range(1, config.updates + 1):
            began = time.monotonic()
            _put(api, target, _configmap("bench-ref", f"s{i}", {ref_label: "true"}))
            result.single_reference_s.append(time.monotonic() - began)
            time.sleep(0.3)
        return result
    finally:
        for tracker in trackers:
            tracker.stop()
        _cleanup(api, wide, operator, source_ns, syncs, created_ns)


def _cleanup(
    api: client.ApiClient,
    wide: client.ApiClient,
    operator: OperatorProcess,
    source_ns: str,
    syncs: list[str],
    namespaces: list[str],
) -> None:
    """Delete the syncs (the running operator removes its copies and finalizer), stop the
    operator, drop any finalizer left, delete the namespaces."""
    for name in syncs:
        with contextlib.suppress(ApiException):
            read(request(api, "DELETE", _sync_path(source_ns, name)))
    deadline = time.monotonic() + 60.0
    while syncs and operator.alive() and time.monotonic() < deadline:
        listed = request_json(api, "GET", _sync_path(source_ns))
        if not listed.get("items"):
            break
        time.sleep(1.0)
    operator.stop()
    for name in syncs:
        with contextlib.suppress(ApiException):
            read(
                request(
                    api,
                    "PATCH",
                    _sync_path(source_ns, name),
                    body={"metadata": {"finalizers": None}},
                    content_type="application/merge-patch+json",
                )
            )
    if namespaces:
        left = delete_namespaces(wide, namespaces)
        if left:
            print(f"warning: {left} namespaces {source_ns[:-4]}-* still terminating")


def summary(result: Result, config: Config) -> list[dict[str, Any]]:
    """Rows: metric, operator, reference, ratio, target, met."""
    fanout = f"source update -> {config.destinations} copies (s)"
    rows = [plain_client.burst_row("fanout_s", fanout, result.fanout_s, result.reference_s)]
    return rows + result.single_rows("1 destination")


def table(rows: list[dict[str, Any]], result: Result, config: Config) -> str:
    """Plain-text report."""
    lines = [
        f"ConfigMapSync vs plain client, {config.destinations} destinations, "
        f"{config.rounds} round(s), {config.updates} single updates, {config.threads} threads",
        "",
        f"setup: ConfigMapSync created -> {config.destinations} copies exist: "
        f"{result.setup_s:.2f} s",
        "",
        f"{'round':>5} {'operator s':>10} {'first copy s':>12} {'reference s':>11} "
        f"{'ref responses s':>15} {'ref PUT p50 s':>13} {'op CPU s':>8} "
        f"{'apiserver CPU op/ref':>20}",
    ]
    for i in range(len(result.fanout_s)):
        cpu_op = result.cpu_fanout_s[i]
        cpu_ref = result.cpu_reference_s[i]
        lines.append(
            f"{i + 1:>5} {result.fanout_s[i]:10.2f} {result.fanout_first_s[i]:12.2f} "
            f"{result.reference_s[i]:11.2f} {result.reference_responses_s[i]:15.2f} "
            f"{result.reference_put_p50_s[i]:13.3f} {cpu_op.get('operator', 0.0):8.1f} "
            f"{cpu_op.get('kube-apiserver', 0.0):9.1f}/{cpu_ref.get('kube-apiserver', 0.0):.1f}"
        )
    return "\n".join([*lines, "", *plain_client.median_lines(rows, 34)])
