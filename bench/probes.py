"""Probe latency under load: how fast /healthz and /readyz answer while the operator is busiest.

A kubelet gives each probe ``timeoutSeconds`` (1 s unless the chart says otherwise) and counts a
slower answer as a failure: three in a row and a healthy leader is restarted (#16, item 10).
This benchmark starts two podset-operator processes with leader election (a leader and a
standby, as the chart runs them), samples both processes' /healthz and /readyz every
``--interval`` seconds with a generous client timeout, and meanwhile drives the heaviest PodSet
workload: a PodSet scaled 0 -> N -> 0, ``--rounds`` times (N = ``--replicas``). It reports
p50, p99 and max latency per process and endpoint, and the answers slower than 1 s, and writes
them to .local/measurements/bench-probes.json.

Unlike the other benchmarks it runs against any cluster holding the PodSet CRD and never starts
the local plane: ``--kubeconfig`` (default: this checkout's .local/kubeconfig).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import threading
import time
import traceback
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client

from bench import plane
from bench.operator import OperatorProcess
from bench.workloads import PODSET
from opsuite_common.kube import resource_path

OUTPUT = plane.LOCAL / "measurements" / "bench-probes.json"
LOG_DIR = plane.LOCAL / "bench"
CRD = "podsets.apps.opsuite.dev"
KUBELET_TIMEOUT = 1.0
"""The kubelet's default probe timeoutSeconds."""
ENDPOINTS = ("healthz", "readyz")
LEASE = "bench-probes"


@dataclass(frozen=True)
class Sample:
    """One probe: when (monotonic), how long it took (s) and the status (0: no answer)."""

    at: float
    latency: float
    status: int


@dataclass(frozen=True)
class Summary:
    """The latency figures of one process's endpoint."""

    samples: int
    p50: float
    p99: float
    max: float
    over_kubelet_timeout: int
    """Answers slower than the kubelet's default 1 s (or none at all)."""
    not_ok: int
    """Answers other than 200 (none at all included)."""


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0 < q <= 100) of ``values``."""
    if not values:
        raise ValueError("no values")
    if not 0 < q <= 100:
        raise ValueError(f"percentile {q} is not in (0, 100]")
    ordered = sorted(values)
    return ordered[math.ceil(q / 100 * len(ordered)) - 1]


def summarize(samples: Sequence[Sample], limit: float = KUBELET_TIMEOUT) -> Summary:
    """The figures of ``samples``; an unanswered probe counts as slower than ``limit``."""
    latencies = [s.latency for s in samples]
    return Summary(
        samples=len(samples),
        p50=percentile(latencies, 50),
        p99=percentile(latencies, 99),
        max=max(latencies),
        over_kubelet_timeout=sum(1 for s in samples if s.status == 0 or s.latency > limit),
        not_ok=sum(1 for s in samples if s.status != 200),
    )


def probe(url: str, timeout: float) -> tuple[float, int]:
    """(latency, status) of one GET; status 0 when nothing answered within ``timeout``."""
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            response.read()
            status: int = response.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except OSError:
        status = 0
    return time.perf_counter() - started, status


@dataclass
class Sampler:
    """Probes each URL every ``interval`` s from a thread of its own until stopped."""

    urls: dict[str, str]
    interval: float = 0.2
    timeout: float = 5.0
    samples: dict[str, list[Sample]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def __enter__(self) -> Sampler:
        for name, url in self.urls.items():
            self.samples[name] = []
            thread = threading.Thread(target=self._run, args=(name, url), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _run(self, name: str, url: str) -> None:
        while not self._stop.is_set():
            at = time.monotonic()
            latency, status = probe(url, self.timeout)
            self.samples[name].append(Sample(at, latency, status))
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - at)))


def _wait(what: str, check: Callable[[], bool], timeout: float) -> float:
    """Poll ``check`` every 0.2 s; the seconds it took."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"{what}: not after {timeout:.0f} s")
        time.sleep(0.2)
    return time.monotonic() - started


def _workload(
    api: client.ApiClient, namespace: str, replicas: int, rounds: int, timeout: float
) -> list[dict[str, float]]:
    """Scale a PodSet 0 -> ``replicas`` -> 0, ``rounds`` times; each phase's duration."""
    phases = []
    pods = resource_path("v1", "pods", namespace)

    def status() -> dict[str, Any]:
        obj = plane.request_json(api, "GET", PODSET.path(namespace, "load"))
        return dict(obj.get("status") or {})

    PODSET.create(api, namespace, "load", 0)
    for _ in range(rounds):
        PODSET.scale(api, namespace, "load", replicas)
        up = _wait(
            f"{replicas} pods ready",
            lambda: status().get("readyReplicas") == replicas,
            timeout,
        )
        PODSET.scale(api, namespace, "load", 0)
        down = _wait(
            "every pod gone",
            lambda: not plane.request_json(api, "GET", pods).get("items"),
            timeout,
        )
        phases.append({"scale_up_s": round(up, 2), "scale_down_s": round(down, 2)})
        print(f"  0 -> {replicas} ready in {up:.1f} s, -> 0 in {down:.1f} s", flush=True)
    return phases


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the two operators, sample their probes under the workload; the results."""
    kubeconfig = Path(args.kubeconfig)
    api = plane.api_client(kubeconfig)
    plane.request_json(
        api, "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD}"
    )  # fails (404) when the CRD is not installed
    namespace = f"bench-probes-{secrets.token_hex(3)}"
    plane.create_namespace(api, namespace, {"opsuite.dev/bench": "probes"})
    processes: dict[str, OperatorProcess] = {}
    try:
        for name in ("a", "b"):
            processes[name] = OperatorProcess(
                "podset-operator",
                [
                    f"--namespace={namespace}",
                    "--leader-elect",
                    f"--leader-election-namespace={namespace}",
                    f"--leader-election-id={LEASE}",
                ],
                LOG_DIR / f"probes-{name}.log",
                kubeconfig=kubeconfig,
                env={"POD_NAME": name},
            )
            processes[name].start()
        lease = resource_path("coordination.k8s.io/v1", "leases", namespace, LEASE)
        holder = ""

        def led() -> bool:
            nonlocal holder
            spec = plane.request_json(api, "GET", lease).get("spec") or {}
            holder = str(spec.get("holderIdentity") or "")
            return holder in processes

        _wait("a leader", led, 60)
        standby = "b" if holder == "a" else "a"
        operators = {"leader": processes[holder], "standby": processes[standby]}
        urls = {
            f"{role} /{endpoint}": f"http://127.0.0.1:{proc.health_port}/{endpoint}"
            for role, proc in operators.items()
            for endpoint in ENDPOINTS
        }
        with Sampler(urls, interval=args.interval) as sampler:
            phases = _workload(api, namespace, args.replicas, args.rounds or 1, args.timeout)
        for role, proc in operators.items():
            if not proc.alive():
                raise RuntimeError(f"the {role} exited under load; see {proc.log_path}")
    finally:
        for proc in processes.values():
            proc.stop()
        plane.delete_namespaces(api, [namespace])
    return {
        "workload": f"PodSet 0 -> {args.replicas} -> 0, {args.rounds or 1} rounds",
        "phases": phases,
        "interval_s": args.interval,
        "kubelet_timeout_s": KUBELET_TIMEOUT,
        "probes": {name: asdict(summarize(s)) for name, s in sampler.samples.items()},
    }


def table(result: dict[str, Any]) -> str:
    """The figures as a Markdown table (milliseconds)."""
    lines = [
        f"{result['workload']}; a probe every {result['interval_s']:g} s per endpoint",
        "",
        "| process /endpoint | samples | p50 (ms) | p99 (ms) | max (ms) | > 1 s | not 200 |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, s in result["probes"].items():
        lines.append(
            f"| {name} | {s['samples']} | {s['p50'] * 1000:.1f} | {s['p99'] * 1000:.1f} | "
            f"{s['max'] * 1000:.1f} | {s['over_kubelet_timeout']} | {s['not_ok']} |"
        )
    return "\n".join(lines)


def main(args: argparse.Namespace, environment: Callable[[str, tuple[float, ...]], Any]) -> int:
    """Run the probe benchmark; the exit status (1 with ``--strict`` when a p99 is over 1 s)."""
    try:
        load_before = os.getloadavg()
        started = time.monotonic()
        result = run(args)
        api = plane.api_client(Path(args.kubeconfig))
        env = environment(plane.server_version(api), load_before)
        env["duration_s"] = round(time.monotonic() - started, 1)
    except KeyboardInterrupt:
        return 130
    except Exception:
        traceback.print_exc()
        print(f"benchmark failed (operator logs: {LOG_DIR}/probes-*.log)")
        return 2
    print(table(result))
    output = Path(args.output or OUTPUT)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps({"environment": env, **result}, indent=2) + "\n")
    print(f"\nwritten to {output}")
    slow = [n for n, s in result["probes"].items() if s["p99"] > KUBELET_TIMEOUT]
    return 1 if args.strict and slow else 0
