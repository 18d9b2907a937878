"""Each opsuite operator against its Go reference (bench/reference), side by side.

``python -m bench versus``: for each pair and round, both implementations run the same workload
on the same plane, one after the other, the order alternating between rounds. One trial:

1. ``prepare``: the objects the workload starts from (not timed);
2. the process starts; the first workload phases run (each timed until the plane shows it
   converged; the process's CPU seconds and its API requests, counted from the audit log by
   User-Agent in the run's namespaces, until the process is idle after that: ``SETTLED``);
3. when phases ran, the process is restarted, so that it starts with their objects present:
   **start to Ready** is from the process start to its first ``/readyz`` 200 (each side's
   readyz waits for its watches' initial lists); **RSS after the initial sync** is read 1 s
   later, **RSS after the quiet window** ``quiet_s`` later, nothing changing meanwhile;
4. the remaining workload phases.

Workloads: PodSet 0 -> 500 pods (converged: status ``readyReplicas`` 500 for the current
generation) and back to 0 (no pod left, status ``replicas`` 0); ConfigMapSync fan-out to 500
namespaces (all copies exist), a source update (all copies carry it) and the sync's deletion
(all copies gone); PodDebugger on 200 Running pods (all carry the ephemeral container).
"""

from __future__ import annotations

import argparse
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from bench import configmapsync as cms
from bench import framework_floor, plane
from bench import poddebugger as pdb
from bench.audit import AuditTail, request_summary
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
    verdict,
)
from bench.objwatch import Tracker, timed_parallel, wide_client
from bench.operator import OperatorProcess
from bench.plane import AUDIT_LOG, LOCAL, ROOT, read, request, request_json
from bench.runner import Environment, measure, write_document
from bench.runtime import runtime_bin
from bench.workloads import PODSET
from opsuite_common.kube import resource_path

OUTPUT = LOCAL / "measurements" / "bench-versus.json"
NAMESPACE_LABEL = "opsuite.dev/bench"
SETTLED = (0.02, 1.5)
"""A phase ends when the process's CPU seconds rose by less than 0.02 (two clock ticks) in
1.5 s: longer than opsuite's status pacing (one write a second during a burst), so that its
last write counts too."""
TIME_RATIO, CPU_RATIO, REQUEST_RATIO = 1.0, 1.5, 1.0
"""Targets, opsuite / Go in the same run: time to converge, CPU seconds and API requests
per workload."""
READY_RATIO, RSS_RATIO = 3.0, 1.2
"""Targets of the small-cluster footprint (#36), opsuite / Go in the same run: start to Ready
with the workload's objects present, and RSS."""


@dataclass(frozen=True)
class Config:
    """What to run."""

    pairs: tuple[str, ...] = PAIRS
    rounds: int = 2
    replicas: int = 500
    destinations: int = 500
    pods: int = 200
    quiet_s: float = 30.0
    timeout: float = 300.0
    retries: int = 1
    """Repeats of a trial that failed."""


@dataclass
class Phase:
    """One timed step of a workload."""

    name: str
    converge_s: float
    cpu_s: float
    window: tuple[float, float]
    """Epoch seconds, for the audit log."""
    requests: int = 0
    by_request: dict[str, int] = field(default_factory=dict)
    foreign_writes: int = 0
    """Writes in the trial's namespaces by another process of the pair's kinds (another
    engineer's operator on the shared plane): the trial was disturbed when not 0."""


@dataclass
class Trial:
    """One implementation's run of one pair's workload."""

    pair: str
    side: str
    round: int
    position: int
    """0 when it ran first in its round, 1 second."""
    ready_s: float = 0.0
    rss_synced_mib: float = 0.0
    rss_quiet_mib: float = 0.0
    phases: list[Phase] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    """Where and when it ran (set when the run's document is written)."""

    @property
    def cpu_s(self) -> float:
        """CPU seconds of the whole workload."""
        return sum(p.cpu_s for p in self.phases)

    @property
    def requests(self) -> int:
        """API requests of the whole workload."""
        return sum(p.requests for p in self.phases)


class Run:
    """What every trial of a run shares: clients, the audit log, the run's id."""

    def __init__(self, api: client.ApiClient, config: Config) -> None:
        self.api = api
        self.wide = wide_client()
        self.config = config
        self.run_id = secrets.token_hex(3)
        self.audit = AuditTail(AUDIT_LOG, f"vs-{self.run_id}")
        self.namespaces: list[str] = []
        self.failures: list[str] = []

    def namespace(self, name: str, *, pods: bool = True) -> str:
        """Create ``vs-<run>-<name>-<n>`` (a new one for every attempt) and, when it is to hold
        ``pods``, wait for its ServiceAccount; its name."""
        full = f"vs-{self.run_id}-{name}-{len(self.namespaces)}"
        self.namespaces.append(full)
        labels = {NAMESPACE_LABEL: self.run_id}
        if pods:
            plane.create_namespace(self.api, full, labels, timeout=self.config.timeout)
        else:
            cms.create_namespaces(self.api, [full], labels)
        return full

    def wait(self, done: Callable[[], bool], what: str, interval: float = 0.1) -> None:
        """Poll ``done`` until true."""
        deadline = time.monotonic() + self.config.timeout
        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError(f"not within {self.config.timeout:.0f} s: {what}")
            time.sleep(interval)

    def phase(
        self,
        process: OperatorProcess,
        name: str,
        act: Callable[[], object],
        done: Callable[[], bool],
    ) -> Phase:
        """Run ``act``, wait for ``done`` (the time to converge), then until the process is idle
        (``SETTLED``): its CPU seconds and its requests count until then, so that work a side
        does after the plane converged (status writes, Events a recorder sends in the
        background) counts for both sides alike."""
        assert process.pid is not None
        cpu_before = cpu_seconds(process.pid) or 0.0
        wall, began = time.time(), time.monotonic()
        act()
        self.wait(done, name, interval=0.05)
        converge = time.monotonic() - began
        cpu = cpu_settled(process.pid, *SETTLED) - cpu_before
        if not process.alive():
            raise RuntimeError(f"{process.command} exited; see {process.log_path}")
        return Phase(name, round(converge, 3), round(cpu, 2), (wall, time.time()))


Workload = Callable[[Run, Implementation, Trial], None]


def _start(
    impl: Implementation, namespace: str | None, log: str, timeout: float
) -> OperatorProcess:
    return impl.process(namespace, log).start(ready_timeout=timeout)


def _steady(run: Run, process: OperatorProcess, trial: Trial) -> None:
    """Start-to-Ready of ``process`` and its RSS 1 s after and after the quiet window."""
    assert process.pid is not None
    assert process.ready_s is not None
    trial.ready_s = round(process.ready_s, 3)
    time.sleep(1.0)
    trial.rss_synced_mib = round(rss_mib(process.pid) or 0.0, 1)
    time.sleep(run.config.quiet_s)
    trial.rss_quiet_mib = round(rss_mib(process.pid) or 0.0, 1)


def _podset_status(run: Run, ns: str) -> dict[str, Any]:
    obj = request_json(run.api, "GET", PODSET.path(ns, "bench"))
    status: dict[str, Any] = obj.get("status") or {}
    status["_current"] = status.get("observedGeneration") == obj["metadata"].get("generation")
    return status


def _pod_count(run: Run, ns: str) -> int:
    listed = request_json(run.api, "GET", resource_path("v1", "pods", ns) + "?limit=1")
    meta = listed.get("metadata") or {}
    return len(listed.get("items") or []) + int(meta.get("remainingItemCount") or 0)


def podset_workload(run: Run, impl: Implementation, trial: Trial) -> None:
    """0 -> N (settled: all ready), restart, quiet window, N -> 0 (no pod left)."""
    n, timeout = run.config.replicas, run.config.timeout
    ns = run.namespace(f"ps-{trial.round}-{impl.side}")
    PODSET.create(run.api, ns, "bench", 0)
    process = _start(impl, ns, f"vs-{run.run_id}", timeout)
    try:
        run.wait(lambda: _podset_status(run, ns)["_current"], "PodSet observed")

        def up() -> bool:
            s = _podset_status(run, ns)
            return bool(s["_current"]) and s.get("readyReplicas") == n and s.get("replicas") == n

        trial.phases.append(
            run.phase(process, f"PodSet 0->{n}", lambda: PODSET.scale(run.api, ns, "bench", n), up)
        )
        process.stop()
        process = _start(impl, ns, f"vs-{run.run_id}", timeout)
        _steady(run, process, trial)

        def down() -> bool:
            s = _podset_status(run, ns)
            return bool(s["_current"]) and not s.get("replicas") and _pod_count(run, ns) == 0

        trial.phases.append(
            run.phase(
                process, f"PodSet {n}->0", lambda: PODSET.scale(run.api, ns, "bench", 0), down
            )
        )
    finally:
        process.stop()


def configmapsync_workload(run: Run, impl: Implementation, trial: Trial) -> None:
    """Fan-out to N namespaces, restart, quiet window, a source update, the sync's deletion."""
    src = run.namespace(f"cms-{trial.round}-{impl.side}", pods=False)
    label = f"opsuite.dev/vs-{run.run_id}"
    name = "bench-settings"
    request_json(
        run.api, "POST", resource_path("v1", "configmaps", src), body=cms._configmap(name, "0")
    )
    process = _start(impl, None, f"vs-{run.run_id}", run.config.timeout)
    copies: Tracker[str] | None = None
    try:
        sync = cms._sync("bench", name, namespaceSelector={"matchLabels": {label: "true"}})
        created: dict[str, Any] = {}

        def create() -> None:
            created.update(request_json(run.api, "POST", cms._sync_path(src), body=sync))
            nonlocal copies
            copies = Tracker(
                run.api,
                resource_path("v1", "configmaps"),
                cms._version,
                label_selector=f"{cms.OWNER_LABEL}={created['metadata']['uid']}",
            ).start()

        n = run.config.destinations

        def count(version: str | None = None) -> int:
            assert copies is not None
            state = copies.snapshot()
            return sum(1 for v in state.values() if version is None or v == version)

        trial.phases.append(
            run.phase(process, f"fan-out to {n} namespaces", create, lambda: count() == n)
        )
        process.stop()
        process = _start(impl, None, f"vs-{run.run_id}", run.config.timeout)
        _steady(run, process, trial)
        trial.phases.append(
            run.phase(
                process,
                f"source update -> {n} copies",
                lambda: cms._put(run.wide, src, cms._configmap(name, "1")),
                lambda: count("1") == n,
            )
        )
        trial.phases.append(
            run.phase(
                process,
                f"sync deleted -> {n} copies gone",
                lambda: read(request(run.api, "DELETE", cms._sync_path(src, "bench"))),
                lambda: count() == 0,
            )
        )
    finally:
        if copies is not None:
            copies.stop()
        process.stop()


def poddebugger_workload(run: Run, impl: Implementation, trial: Trial) -> None:
    """N Running pods present at the start, quiet window, then debuggers: all injected."""
    n = run.config.pods
    ns = run.namespace(f"pd-{trial.round}-{impl.side}")
    groups = -(-n // pdb.MAX_PODS)
    pods: Tracker[pdb.PodSummary] = Tracker(run.api, resource_path("v1", "pods", ns), pdb._summary)
    pods.start()
    try:
        timed_parallel(
            lambda i: pdb._create_pod(run.wide, ns, pdb._pod(f"p{i:04d}", f"g{i % groups}")),
            list(range(n)),
        )
        pods.arm("pods Running", lambda _k, s: s[0] == "Running", n).wait(run.config.timeout)
        process = _start(impl, ns, f"vs-{run.run_id}", run.config.timeout)
        try:
            _steady(run, process, trial)
            injected = pods.arm("pods injected", lambda _k, s: s[1] >= 1, n)

            def create() -> None:
                for g in range(groups):
                    body = pdb._debugger(f"bench-g{g}", f"g{g}")
                    path = resource_path(pdb.GROUP_VERSION, "poddebuggers", ns)
                    created = request_json(run.api, "POST", path, body=body)
                    if created["spec"].get("maxPods") != pdb.MAX_PODS:
                        raise RuntimeError(
                            "the plane's PodDebugger CRD dropped spec.maxPods (another test "
                            "installed another schema)"
                        )

            trial.phases.append(
                run.phase(process, f"{n} pods debugged", create, lambda: injected.done)
            )
        finally:
            process.stop()
    finally:
        pods.stop()


WORKLOADS: dict[str, Workload] = {
    "podset": podset_workload,
    "configmapsync": configmapsync_workload,
    "poddebugger": poddebugger_workload,
}


def _crds(pairs: tuple[str, ...]) -> None:
    charts = ROOT / "charts"
    crds = {
        "podset": ("podset-operator", "podsets.apps.opsuite.dev"),
        "configmapsync": ("configmapsync-operator", cms.CRD_NAME),
        "poddebugger": ("pod-debugger-operator", pdb.CRD_NAME),
    }
    for pair in pairs:
        chart, name = crds[pair]
        plane.apply_crds(charts / chart / "crds", name)


def count_requests(run: Run, trials: list[Trial]) -> None:
    """Each phase's requests by its implementation, from the audit log."""
    run.audit.flush(run.api, run.namespaces[0])
    events = list(run.audit.events.values())
    for trial in trials:
        pair = order(trial.pair, 0)
        impl = next(i for i in pair if i.side == trial.side)
        for phase in trial.phases:
            start, end = phase.window
            during = [e for e in events if start <= e.received <= end]
            summary = request_summary(e for e in during if impl.sent(e.user_agent))
            phase.requests = summary["total"]
            phase.by_request = summary["by_request"]
            phase.foreign_writes = request_summary(
                e
                for e in during
                if any(e.user_agent.startswith(i.user_agent) for i in pair)
                and not impl.sent(e.user_agent)
            )["writes"]


def _attempt(
    run: Run,
    pair: str,
    impl: Implementation,
    rnd: int,
    position: int,
    progress: Callable[[str], None],
) -> Trial | None:
    """One trial, repeated up to ``retries`` times when it fails (the plane is shared: another
    test may stall the API server or replace a CRD); None when every attempt failed."""
    for attempt in range(run.config.retries + 1):
        trial = Trial(pair, impl.side, rnd, position)
        try:
            WORKLOADS[pair](run, impl, trial)
        except (TimeoutError, RuntimeError, ApiException) as exc:
            run.failures.append(f"{pair} round {rnd} {impl.label} attempt {attempt + 1}: {exc}")
            progress(f"warning: {run.failures[-1]}")
            continue
        finally:
            run.audit.poll()
        phases = ", ".join(f"{p.name} {p.converge_s:.2f} s" for p in trial.phases)
        progress(
            f"{pair} round {rnd} {impl.label}: ready {trial.ready_s:.2f} s, "
            f"RSS {trial.rss_synced_mib}/{trial.rss_quiet_mib} MiB, {phases}, "
            f"CPU {trial.cpu_s:.2f} s"
        )
        return trial
    return None


def run_all(
    api: client.ApiClient, config: Config, progress: Callable[[str], None] = print
) -> tuple[list[Trial], list[str]]:
    """Every pair's rounds: the trials done and the failed attempts; cleans up whatever
    happens."""
    for pair in config.pairs:  # a missing Go binary fails now, not after the first trial
        for implementation in IMPLEMENTATIONS[pair]:
            implementation.executable()
    _crds(config.pairs)
    runtime_bin()  # made before the first trial, not inside it
    run = Run(api, config)
    trials: list[Trial] = []
    destinations: list[str] = []
    try:
        if "configmapsync" in config.pairs:
            label = f"opsuite.dev/vs-{run.run_id}"
            destinations = [f"vs-{run.run_id}-d{i:04d}" for i in range(config.destinations)]
            cms.create_namespaces(
                run.wide, destinations, {NAMESPACE_LABEL: run.run_id, label: "true"}
            )
        for pair in config.pairs:
            for r in range(config.rounds):
                for position, impl in enumerate(order(pair, r)):
                    trial = _attempt(run, pair, impl, r + 1, position, progress)
                    if trial is not None:
                        trials.append(trial)
                    time.sleep(3.0)
        count_requests(run, trials)
        return trials, run.failures
    finally:
        left = cms.delete_namespaces(run.wide, [*run.namespaces, *destinations], timeout=300.0)
        if left:
            progress(f"warning: {left} namespaces vs-{run.run_id}-* still terminating")
        run.audit.close()


def _row(
    pair: str,
    label: str,
    trials: list[Trial],
    figure: Callable[[Trial], float],
    limit: float | None,
) -> dict[str, Any]:
    ops = median(figure(t) for t in trials if t.pair == pair and t.side == OPSUITE)
    go = median(figure(t) for t in trials if t.pair == pair and t.side == GO)
    r = ratio(ops, go)
    return {
        "pair": pair,
        "label": label,
        "opsuite": ops,
        "go": go,
        "ratio": r,
        "target": f"ratio <= {limit}" if limit is not None else "reported",
        "met": verdict(r, limit),
    }


def summary(
    trials: list[Trial], floor: framework_floor.Floor | None = None
) -> list[dict[str, Any]]:
    """Per pair, medians over the rounds of each figure, ratios opsuite / Go, targets; with
    the run's ``floor``, that floor against the Go reference's start and RSS (reported)."""
    rows: list[dict[str, Any]] = []
    for pair in dict.fromkeys(t.pair for t in trials):
        mine = [t for t in trials if t.pair == pair]
        names = list(dict.fromkeys(p.name for t in mine for p in t.phases))
        for name in names:

            def converge(t: Trial, name: str = name) -> float:
                return next((p.converge_s for p in t.phases if p.name == name), float("nan"))

            rows.append(_row(pair, f"converge: {name} (s)", mine, converge, TIME_RATIO))
        rows += [
            _row(pair, "CPU seconds, whole workload", mine, lambda t: t.cpu_s, CPU_RATIO),
            _row(pair, "API requests, whole workload", mine, lambda t: t.requests, REQUEST_RATIO),
            _row(
                pair, "start to Ready, objects present (s)", mine, lambda t: t.ready_s, READY_RATIO
            ),
            _row(
                pair,
                "RSS after the initial sync (MiB)",
                mine,
                lambda t: t.rss_synced_mib,
                RSS_RATIO,
            ),
            _row(
                pair, "RSS after the quiet window (MiB)", mine, lambda t: t.rss_quiet_mib, RSS_RATIO
            ),
        ]
        if floor is not None:
            rows += [
                _row(
                    pair,
                    "floor: interpreter + import kopf, against Go's start to Ready (s)",
                    mine,
                    lambda t: floor.start_s if t.side == OPSUITE else t.ready_s,
                    None,
                ),
                _row(
                    pair,
                    "floor: interpreter + import kopf, against Go's RSS after the initial sync "
                    "(MiB)",
                    mine,
                    lambda t: floor.rss_mib if t.side == OPSUITE else t.rss_synced_mib,
                    None,
                ),
            ]
    return rows


def table(rows: list[dict[str, Any]], trials: list[Trial]) -> str:
    """Plain-text report: every trial, then the medians."""
    lines = [
        f"{'pair':14} {'rnd':>3} {'side':8} {'ready s':>7} {'RSS MiB':>13} {'CPU s':>6} "
        f"{'req':>5} {'foreign':>7}  converge s"
    ]
    for t in trials:
        lines.append(
            f"{t.pair:14} {t.round:3d} {t.side:8} {t.ready_s:7.2f} "
            f"{t.rss_synced_mib:6.1f}/{t.rss_quiet_mib:6.1f} {t.cpu_s:6.2f} {t.requests:5d} "
            f"{sum(p.foreign_writes for p in t.phases):7d}  "
            + ", ".join(f"{p.converge_s:.2f}" for p in t.phases)
        )
    lines += ["", f"{'pair':14} {'figure':44} {'opsuite':>9} {'Go':>9} {'ratio':>6}  target"]
    for r in rows:
        ratio_text = f"{r['ratio']:6.2f}" if r["ratio"] is not None else f"{'-':>6}"
        met = {True: "met", False: "MISSED", None: ""}[r["met"]]
        lines.append(
            f"{r['pair']:14} {r['label']:44} {r['opsuite']:9.2f} {r['go']:9.2f} {ratio_text}  "
            f"{r['target']} {met}"
        )
    return "\n".join(lines)


def merge(previous: dict[str, Any] | None, pairs: tuple[str, ...]) -> list[Trial]:
    """An earlier run's trials of the pairs this run did not measure (``--pairs``), each still
    carrying the environment it ran in."""
    kept: list[Trial] = []
    for saved in (previous or {}).get("trials", []):
        if saved["pair"] in pairs:
            continue
        fields = {k: v for k, v in saved.items() if k in Trial.__dataclass_fields__}
        fields["phases"] = [
            Phase(**{**ph, "window": tuple(ph["window"])}) for ph in saved.get("phases", [])
        ]
        fields["environment"] = saved.get("environment") or (previous or {}).get("environment", {})
        kept.append(Trial(**fields))
    return kept


def main(
    args: argparse.Namespace,
    environment: Environment,
) -> int:
    """Run the side-by-side benchmark; the exit status (0, 1 missed with --strict; Failed)."""
    config = Config(
        pairs=tuple(args.pairs.split(",")) if args.pairs else PAIRS,
        rounds=args.rounds or Config.rounds,
        replicas=args.replicas,
        destinations=args.destinations,
        pods=args.pods,
        quiet_s=args.quiet_window if args.quiet_window is not None else Config.quiet_s,
        timeout=args.timeout,
        retries=args.retries,
    )
    output = Path(args.output or OUTPUT)
    (trials, failures), env = measure(
        lambda api: run_all(api, config),
        environment,
        f"benchmark failed (logs: {LOCAL / 'bench'}/vs-*.log)",
    )
    for trial in trials:
        trial.environment = env
    floor = framework_floor.measure()
    previous = json.loads(output.read_text()) if output.exists() else None
    kept = merge(previous, config.pairs)
    trials = [*kept, *trials]
    rows = summary(trials, floor)
    print()
    print(table(rows, trials))
    for failure in failures:
        print(f"failed attempt: {failure}")
    document = {
        "benchmark": "versus",
        "config": asdict(config),
        "environment": env,
        "trials": [
            {**asdict(t), "cpu_s": round(t.cpu_s, 2), "requests": t.requests} for t in trials
        ],
        "failures": failures,
        "floor": asdict(floor),
        "summary": rows,
        "targets_met": all(r["met"] is not False for r in rows),
    }
    return write_document(output, document, strict=args.strict)
