"""PodDebugger injection against the same ephemeral-container PATCHes by a plain client.

Two namespaces: one served by a pod-debugger-operator (``--namespace`` for it alone), one for
the plain client. ``spec.maxPods`` is capped at 100, so the operator's namespace holds
ceil(N/100) PodDebuggers, each selecting its own group of pods (label ``bench-group``), all
with the same container (busybox ``sleep 3600``, profile ``restricted``, the default).

* **Burst**: N matching pods are POSTed at once (THREADS threads); time from just before the
  first POST until a pod watch has seen all N with their ephemeral container. **Reference**: a
  plain client (THREADS threads) does the operator's job in the other namespace: each thread
  POSTs a pod and at once PATCHes its ``pods/ephemeralcontainers`` with the very body the
  operator sends (strategic merge; the container from
  ``poddebugger_operator.names.ephemeral_container``); same clock, same watch. The operator
  injects into any live pod, Running or not, so the reference does not wait for Running either.
  Also reported: when all N were Running, and the N PATCHes alone on N Running pods (a second
  container each).
* **Single pod**: K pods created one at a time, matching a further PodDebugger; latency = the
  watch event showing the pod Running -> the watch event showing its container (negative when
  the container came first), and POST sent -> container seen. **Reference**:
  K raw PATCH round-trips (one more container on K reference pods).
"""

from __future__ import annotations

import contextlib
import json
import math
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
from bench.plane import (
    LOCAL,
    ROOT,
    apply_crds,
    create_namespace,
    delete_namespaces,
    read,
    request,
    request_json,
)
from opsuite_common.kube import resource_path
from poddebugger_operator.names import ephemeral_container
from poddebugger_operator.spec import parse_spec

CRD_DIR = ROOT / "charts" / "pod-debugger-operator" / "crds"
GROUP_VERSION = "debug.opsuite.dev/v1alpha1"
CRD_NAME = "poddebuggers.debug.opsuite.dev"
OPERATOR_LOG = LOCAL / "bench" / "pod-debugger-operator.log"
NAMESPACE_LABEL = "opsuite.dev/bench"
GROUP_LABEL = "bench-group"
MAX_PODS = 100
"""spec.maxPods upper bound (poddebugger_operator.models.MAX_PODS_LIMIT)."""

PodSummary = tuple[str, int]
"""(phase, number of ephemeral containers)."""


@dataclass(frozen=True)
class Config(plain_client.Config):
    """What to run."""

    pods: int = 200
    singles: int = 20
    rounds: int = 3
    """Bursts of each kind, alternating which goes first; the table shows medians."""


@dataclass
class Result(plain_client.Result):
    """Everything measured (seconds; the single ones: pod Running -> container seen, against
    raw PATCH round-trips)."""

    debuggers: int = 0
    op_created_s: list[float] = field(default_factory=list)
    """Per round: first POST sent -> last POST answered."""
    op_running_s: list[float] = field(default_factory=list)
    """Per round: first POST sent -> all N Running (watch)."""
    op_injected_s: list[float] = field(default_factory=list)
    """Per round: first POST sent -> all N carry the container (watch)."""
    ref_created_s: list[float] = field(default_factory=list)
    """Per round: first POST sent -> last PATCH answered (each thread: POST a pod, then PATCH
    it)."""
    ref_running_s: list[float] = field(default_factory=list)
    ref_injected_s: list[float] = field(default_factory=list)
    ref_patches_alone_s: float = 0.0
    """N PATCHes on N Running pods, first sent -> last answered."""
    ref_patch_p50_s: float = 0.0
    """Median PATCH round-trip within that burst."""
    single_created_latency_s: list[float] = field(default_factory=list)
    """Per single pod: POST sent -> container seen (the operator does not wait for Running)."""
    cpu_op_s: list[dict[str, float]] = field(default_factory=list)
    cpu_ref_s: list[dict[str, float]] = field(default_factory=list)


def _summary(pod: dict[str, Any]) -> PodSummary:
    phase = str((pod.get("status") or {}).get("phase") or "Pending")
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        phase = "Terminating"
    return phase, len((pod.get("spec") or {}).get("ephemeralContainers") or ())


def _pod_is(key: Key, *, running: bool) -> Callable[[Key, Any], bool]:
    """Predicate: pod ``key`` is Running (``running``) or carries an ephemeral container."""
    if running:
        return lambda k, s: k == key and s[0] == "Running"
    return lambda k, s: k == key and s[1] >= 1


def _pod(name: str, group: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {GROUP_LABEL: group}},
        "spec": {"containers": [{"name": "main", "image": "nginx"}]},
    }


def _debugger(name: str, group: str) -> dict[str, Any]:
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "PodDebugger",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {GROUP_LABEL: group}},
            "image": "busybox",
            "command": ["sleep", "3600"],
            "maxPods": MAX_PODS,
        },
    }


def _create_pod(api: client.ApiClient, namespace: str, body: dict[str, Any]) -> None:
    read(request(api, "POST", resource_path("v1", "pods", namespace), body=body))


def _inject(api: client.ApiClient, namespace: str, pod: str, container: dict[str, Any]) -> None:
    """The operator's PATCH (pods/ephemeralcontainers, strategic merge) for a pod with none."""
    patch = {
        "spec": {
            "$setElementOrder/ephemeralContainers": [{"name": container["name"]}],
            "ephemeralContainers": [container],
        }
    }
    path = resource_path("v1", "pods", namespace, pod, "ephemeralcontainers")
    read(
        request(
            api, "PATCH", path, body=patch, content_type="application/strategic-merge-patch+json"
        )
    )


def _add(api: client.ApiClient, namespace: str, pod: str, container: dict[str, Any]) -> None:
    """Add one more ephemeral container (a strategic merge keyed by name)."""
    patch = {"spec": {"ephemeralContainers": [container]}}
    path = resource_path("v1", "pods", namespace, pod, "ephemeralcontainers")
    read(
        request(
            api, "PATCH", path, body=patch, content_type="application/strategic-merge-patch+json"
        )
    )


def _cpu(operator: OperatorProcess) -> CpuMeter:
    meter = CpuMeter(
        {
            "operator": operator.pid,
            "kube-apiserver": plane_pid("kube-apiserver"),
            "kwok": plane_pid("kwok"),
        }
    )
    meter.start()
    return meter


def _create_and_inject(
    api: client.ApiClient, namespace: str, container: dict[str, Any], name: str
) -> None:
    """What a plain client doing the operator's job does for one pod: POST it, then PATCH it."""
    _create_pod(api, namespace, _pod(name, "ref"))
    _inject(api, namespace, name, container)


def _delete_burst_pods(api: client.ApiClient, namespaces: tuple[str, ...], timeout: float) -> None:
    """Delete the burst pods of ``namespaces`` and wait until they are gone."""
    query = {"labelSelector": GROUP_LABEL}
    for ns in namespaces:
        read(request(api, "DELETE", resource_path("v1", "pods", ns), query=query))
    deadline = time.monotonic() + timeout
    while any(
        json.loads(read(request(api, "GET", resource_path("v1", "pods", ns), query=query)))["items"]
        for ns in namespaces
    ):
        if time.monotonic() > deadline:
            raise TimeoutError(f"burst pods of {', '.join(namespaces)} not gone")
        time.sleep(0.5)


def run(api: client.ApiClient, config: Config) -> Result:
    """Set up, measure, clean up (always)."""
    wide = wide_client(config.threads)
    run_id = secrets.token_hex(3)
    prefix = f"bench-{run_id}"
    op_ns, ref_ns = f"{prefix}-op", f"{prefix}-ref"
    groups = math.ceil(config.pods / MAX_PODS)
    result = Result(namespace_prefix=prefix, debuggers=groups, load_average=os.getloadavg()[0])
    apply_crds(CRD_DIR, CRD_NAME)
    operator = OperatorProcess(
        "pod-debugger-operator",
        # The bench installs no admission policies (it measures injection).
        [f"--namespace={op_ns}", "--allow-without-admission-policy"],
        OPERATOR_LOG,
    )
    trackers: list[Tracker[Any]] = []
    namespaces: list[str] = []
    debuggers: list[str] = []
    n = config.pods
    try:
        for ns in (op_ns, ref_ns):
            namespaces.append(ns)
            create_namespace(api, ns, {NAMESPACE_LABEL: run_id})
        operator.start()
        for g in range(groups):
            body = _debugger(f"bench-g{g}", f"g{g}")
            request_json(
                api, "POST", resource_path(GROUP_VERSION, "poddebuggers", op_ns), body=body
            )
            debuggers.append(f"bench-g{g}")
        single_body = _debugger("bench-single", "single")
        request_json(
            api, "POST", resource_path(GROUP_VERSION, "poddebuggers", op_ns), body=single_body
        )
        debuggers.append("bench-single")
        # The container the operator injects (same function, same spec), for the reference.
        container = ephemeral_container("bench-g0", parse_spec(_debugger("bench-g0", "g0")))
        op_pods: Tracker[PodSummary] = Tracker(
            api, resource_path("v1", "pods", op_ns), _summary
        ).start()
        ref_pods: Tracker[PodSummary] = Tracker(
            api, resource_path("v1", "pods", ref_ns), _summary
        ).start()
        trackers += [op_pods, ref_pods]
        time.sleep(2.0)

        def measure(
            pods: Tracker[PodSummary], work: Callable[[int], None]
        ) -> tuple[float, float, float, dict[str, float]]:
            """N pods made by ``work`` (called once per index, in parallel): seconds until the
            last call returned, until all carry a container, until all run; CPU seconds."""
            running = pods.arm("all Running", lambda _k, s: s[0] == "Running", n)
            injected = pods.arm("all injected", lambda _k, s: s[1] >= 1, n)
            meter = _cpu(operator)
            began = time.monotonic()
            wall, _ = timed_parallel(work, list(range(n)), config.threads)
            injected_s = injected.wait(config.timeout) - began
            return wall, injected_s, running.wait(config.timeout) - began, meter.stop()

        def operator_burst(names: list[str]) -> None:
            created, injected, running, cpu = measure(
                op_pods, lambda i: _create_pod(wide, op_ns, _pod(names[i], f"g{i % groups}"))
            )
            result.op_created_s.append(created)
            result.op_injected_s.append(injected)
            result.op_running_s.append(running)
            result.cpu_op_s.append(cpu)

        def reference_burst(names: list[str]) -> None:
            created, injected, running, cpu = measure(
                ref_pods, lambda i: _create_and_inject(wide, ref_ns, container, names[i])
            )
            result.ref_created_s.append(created)
            result.ref_injected_s.append(injected)
            result.ref_running_s.append(running)
            result.cpu_ref_s.append(cpu)

        for round_ in range(config.rounds):
            if round_:
                _delete_burst_pods(api, (op_ns, ref_ns), config.timeout)
                time.sleep(2.0)
            names = [f"r{round_}-p{i:04d}" for i in range(n)]
            bursts = (operator_burst, reference_burst)
            for burst in bursts if round_ % 2 == 0 else reversed(bursts):
                burst(names)
                time.sleep(3.0)
        second = {**container, "name": "bench-second"}
        wall, durations = timed_parallel(
            lambda p: _add(wide, ref_ns, p, second), names, config.threads
        )
        result.ref_patches_alone_s = wall
        result.ref_patch_p50_s = statistics.median(durations)
        time.sleep(2.0)

        # --- single pods
        for i in range(config.singles):
            key: Key = (op_ns, f"single{i:03d}")
            up = op_pods.arm(f"{key[1]} Running", _pod_is(key, running=True), 1)
            has = op_pods.arm(f"{key[1]} injected", _pod_is(key, running=False), 1)
            began = time.monotonic()
            _create_pod(api, op_ns, _pod(key[1], "single"))
            injected_at = has.wait(60.0)
            result.single_latency_s.append(injected_at - up.wait(60.0))
            result.single_created_latency_s.append(injected_at - began)
            time.sleep(0.3)
        for i in range(config.singles):
            third = {**container, "name": f"bench-rt{i:03d}"}
            began = time.monotonic()
            _add(api, ref_ns, names[i % n], third)
            result.single_reference_s.append(time.monotonic() - began)
            time.sleep(0.3)
        return result
    finally:
        for tracker in trackers:
            tracker.stop()
        for name in debuggers:
            with contextlib.suppress(ApiException):
                path = resource_path(GROUP_VERSION, "poddebuggers", op_ns, name)
                read(request(api, "DELETE", path))
        operator.stop()
        if namespaces:
            left = delete_namespaces(api, namespaces, timeout=180.0)
            if left:
                print(f"warning: namespaces still terminating: {', '.join(left)}")


def summary(result: Result, config: Config) -> list[dict[str, Any]]:
    """Rows: metric, operator, reference, ratio, target, met."""
    label = f"{config.pods} pods created -> all injected (s)"
    burst = plain_client.burst_row(
        "burst_injected_s", label, result.op_injected_s, result.ref_injected_s
    )
    created = plain_client.percentile_rows(
        "single_created",
        "1 pod POST -> injected",
        result.single_created_latency_s,
        result.single_reference_s,
    )
    return [burst, *result.single_rows("1 pod Running -> injected"), *created]


def table(rows: list[dict[str, Any]], result: Result, config: Config) -> str:
    """Plain-text report."""

    def cpu(d: dict[str, float]) -> str:
        return " ".join(f"{k}={v:.1f}" for k, v in d.items())

    lines = [
        f"PodDebugger vs plain client, {config.pods} pods ({result.debuggers} PodDebuggers of "
        f"maxPods {MAX_PODS}), {config.rounds} rounds, {config.singles} single pods, "
        f"{config.threads} threads",
        "",
        f"{'burst (s from first POST)':28} {'Running':>8} {'injected':>9}  CPU s",
    ]
    for i in range(len(result.op_injected_s)):
        first = "operator first" if i % 2 == 0 else "plain client first"
        lines += [
            f"round {i + 1} ({first})",
            f"{'  operator':28} {result.op_running_s[i]:8.2f} {result.op_injected_s[i]:9.2f}  "
            f"{cpu(result.cpu_op_s[i])}",
            f"{'  plain client':28} {result.ref_running_s[i]:8.2f} "
            f"{result.ref_injected_s[i]:9.2f}  {cpu(result.cpu_ref_s[i])}",
        ]
    lines += [
        f"{config.pods} PATCHes alone on Running pods: {result.ref_patches_alone_s:.2f} s "
        f"(median round-trip {result.ref_patch_p50_s:.3f} s)",
        "",
        *plain_client.median_lines(rows, 36),
    ]
    return "\n".join(lines)
