"""PodSet against the built-in ReplicaSet: scale 0 -> N -> 0 on the local plane, same run.

For each round, each controller (order alternating between rounds) gets a fresh namespace and
an object with ``replicas: 0``. The benchmark then scales it to N through the scale subresource
and times, from the moment before the PATCH, (a) until N pods exist in the API, (b) until N are
Running (kwok fakes the kubelet), then waits until the object's status reports them all ready;
then scales to 0 and times (c) until no pod is left in the API (kwok removes pods once they
carry a deletionTimestamp). A pod watch stamps every event as it arrives.

The controller's API requests in its namespace during the scale-up (scale-up PATCH sent to
scale-down PATCH sent, just after the status settled) come from the audit log: for the PodSet,
requests with the User-Agent "podset-operator/..."; for the ReplicaSet, requests
authenticated as kube-controller-manager's replicaset-controller service account. Divided by
the pods created, that is "requests per created pod". A trial during which the API server
received no request at all for a few seconds (stalled: an e2e chaos test stops it) is
repeated with a new object.
"""

from __future__ import annotations

import os
import secrets
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes import client

from bench.audit import AuditTail, breakdown, by_user_agent, span
from bench.cpu import CpuMeter, plane_pid
from bench.operator import OperatorProcess
from bench.plane import (
    AUDIT_LOG,
    LOCAL,
    ROOT,
    apply_crds,
    create_namespace,
    delete_namespaces,
)
from bench.podwatch import PodTracker
from bench.workloads import PODSET, REPLICASET, Workload

CRD_DIR = ROOT / "charts" / "podset-operator" / "crds"
CRD_NAME = "podsets.apps.opsuite.dev"
OPERATOR_LOG = LOCAL / "bench" / "podset-operator.log"
NAMESPACE_LABEL = "opsuite.dev/bench"
KOPF_USER_AGENT = "kopf/"
STALL_SECONDS = 3.0
"""A trial in which the API server received nothing for this long is repeated."""
KCM = "kube-controller-manager"
PLANE_COMPONENTS = ("kube-apiserver", "kube-scheduler", "kwok")
"""Shared components whose CPU time each trial reports."""


@dataclass(frozen=True)
class Config:
    """What to run."""

    replicas: int = 500
    rounds: int = 2
    phase_timeout: float = 300.0
    """Longest wait for any one milestone or for a status to settle."""
    pause: float = 5.0
    """Quiet seconds between trials, so that one trial's tail does not slow the next."""
    retries: int = 2
    """Times a trial is repeated when the API server stalled during it."""


@dataclass
class Trial:
    """Measurements of one controller in one round."""

    workload: str
    round: int
    namespace: str
    created_s: float = 0.0
    """Scale-up PATCH sent -> N pods exist."""
    running_s: float = 0.0
    """Scale-up PATCH sent -> N pods Running."""
    settled_up_s: float = 0.0
    """Scale-up PATCH sent -> status reports N ready (observed by polling)."""
    deleted_s: float = 0.0
    """Scale-down PATCH sent -> no pod left in the API."""
    settled_down_s: float = 0.0
    pods_created: int = 0
    requests_up: int = 0
    requests_down: int = 0
    breakdown_up: dict[str, int] = field(default_factory=dict)
    breakdown_down: dict[str, int] = field(default_factory=dict)
    watch_requests_up: int = 0
    """Requests of the operator's kopf watch layer (User-Agent kopf/...) while scaling up."""
    create_span_s: tuple[float, float] | None = None
    """Scale-up PATCH sent -> the controller's first and last pod create (audit log)."""
    create_times_s: list[float] = field(default_factory=list)
    """Scale-up PATCH sent -> each of the controller's pod creates (audit log; for charts)."""
    delete_span_s: tuple[float, float] | None = None
    """Scale-down PATCH sent -> the controller's first and last pod delete (audit log)."""
    cpu_up_s: dict[str, float] = field(default_factory=dict)
    """CPU seconds per process while scaling up: "controller" (podset-operator, or the whole
    kube-controller-manager), kube-apiserver, kube-scheduler, kwok."""
    cpu_down_s: dict[str, float] = field(default_factory=dict)
    """The same while scaling down."""
    load_average: float = 0.0
    """1-minute load average when the trial started (the machine is shared)."""
    window: tuple[float, float] = (0.0, 0.0)
    """Scale-up PATCH sent -> scale-down settled, seconds since the epoch."""
    attempt: int = 1
    """1, or more when earlier attempts were repeated because the API server stalled."""
    stall_s: float = 0.0
    """Longest time in the window in which the API server received no request at all (a
    silence over STALL_SECONDS means it was stalled, and the trial is repeated)."""

    @property
    def requests_per_created_pod(self) -> float:
        """Scale-up requests divided by pods created."""
        return self.requests_up / self.pods_created if self.pods_created else float("nan")


def _wait_settled(
    workload: Workload, api: client.ApiClient, ns: str, name: str, replicas: int, timeout: float
) -> float:
    """Poll the object's status until it reports ``replicas`` ready; the monotonic instant."""
    deadline = time.monotonic() + timeout
    while not workload.settled(api, ns, name, replicas):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{workload.label} {ns}/{name}: status not at {replicas} ready")
        time.sleep(0.1)
    return time.monotonic()


def run_trial(
    workload: Workload,
    round_: int,
    namespace: str,
    api: client.ApiClient,
    audit: AuditTail,
    config: Config,
    pids: dict[str, int | None],
    name: str = "bench",
) -> Trial:
    """Scale one controller object ``name`` 0 -> N -> 0 in ``namespace`` and measure it.

    ``pids`` names the processes whose CPU time is reported ("controller" among them).
    """
    n, timeout = config.replicas, config.phase_timeout
    trial = Trial(workload.label, round_, namespace, load_average=os.getloadavg()[0])
    tracker = PodTracker(api, namespace).start()
    try:
        workload.create(api, namespace, name, 0)
        _wait_settled(workload, api, namespace, name, 0, timeout)

        tracker.reset_added()
        created = tracker.arm(f"{n} pods exist in {namespace}", lambda c: c.existing >= n)
        running = tracker.arm(f"{n} pods Running in {namespace}", lambda c: c.running >= n)
        cpu_up, cpu_down = CpuMeter(pids), CpuMeter(pids)
        cpu_up.start()
        up_wall, up = time.time(), time.monotonic()
        workload.scale(api, namespace, name, n)
        trial.created_s = created.wait(timeout) - up
        trial.running_s = running.wait(timeout) - up
        trial.settled_up_s = _wait_settled(workload, api, namespace, name, n, timeout) - up
        trial.pods_created = tracker.counts().added
        trial.cpu_up_s = cpu_up.stop()

        gone = tracker.arm(f"no pod left in {namespace}", lambda c: c.existing == 0)
        cpu_down.start()
        down_wall, down = time.time(), time.monotonic()
        workload.scale(api, namespace, name, 0)
        trial.deleted_s = gone.wait(timeout) - down
        trial.settled_down_s = _wait_settled(workload, api, namespace, name, 0, timeout) - down
        end_wall = time.time()
        trial.cpu_down_s = cpu_down.stop()
    finally:
        tracker.stop()

    audit.flush(api, namespace)
    trial.window = (up_wall, end_wall)
    trial.stall_s = round(audit.longest_silence(up_wall, end_wall), 2)
    up_events = audit.select(namespace, workload.actor, up_wall, down_wall)
    down_events = audit.select(namespace, workload.actor, down_wall, end_wall)
    up_counts, down_counts = breakdown(up_events), breakdown(down_events)
    trial.requests_up, trial.requests_down = up_counts.total(), down_counts.total()
    trial.breakdown_up, trial.breakdown_down = _sorted(up_counts), _sorted(down_counts)
    trial.create_span_s = span(up_events, "create", "pods", up_wall)
    trial.create_times_s = sorted(
        round(e.received - up_wall, 3)
        for e in up_events
        if (e.verb, e.resource) == ("create", "pods")
    )
    trial.delete_span_s = span(down_events, "delete", "pods", down_wall)
    kopf = audit.select(namespace, by_user_agent(KOPF_USER_AGENT), up_wall, down_wall)
    trial.watch_requests_up = len(kopf)
    return trial


def _measure(
    workload: Workload,
    round_: int,
    namespace: str,
    api: client.ApiClient,
    audit: AuditTail,
    config: Config,
    pids: dict[str, int | None],
    progress: Callable[[str], None],
) -> Trial:
    """One trial, repeated (with a new object) while the API server stalls during it."""
    for attempt in range(1, config.retries + 2):
        name = f"bench-{attempt}"
        trial = run_trial(workload, round_, namespace, api, audit, config, pids, name)
        trial.attempt = attempt
        progress(
            f"round {round_} {workload.label:10} created {trial.created_s:6.2f} s  "
            f"running {trial.running_s:6.2f} s  deleted {trial.deleted_s:6.2f} s  "
            f"requests/pod {trial.requests_per_created_pod:.3f} "
            f"({trial.requests_up}/{trial.pods_created})"
        )
        if trial.stall_s <= STALL_SECONDS:
            return trial
        if attempt <= config.retries:
            progress(
                f"  the API server received nothing for {trial.stall_s:.1f} s during this trial "
                "(stalled); repeating it"
            )
            workload.delete(api, namespace, name)
            time.sleep(config.pause)
    progress(f"  still stalled after {config.retries} repeats; keeping the last attempt")
    return trial


def _sorted(counts: Counter[str]) -> dict[str, int]:
    return dict(counts.most_common())


def schedule(rounds: int) -> list[tuple[int, Workload]]:
    """(round, workload) in run order: ReplicaSet first in odd rounds, PodSet first in even."""
    order: list[tuple[int, Workload]] = []
    for r in range(1, rounds + 1):
        pair = (REPLICASET, PODSET) if r % 2 else (PODSET, REPLICASET)
        order.extend((r, w) for w in pair)
    return order


def run(
    api: client.ApiClient,
    config: Config,
    progress: Callable[[str], None] = print,
    operator_log: Path = OPERATOR_LOG,
) -> list[Trial]:
    """Run every trial; operator and namespaces are cleaned up however this ends."""
    apply_crds(CRD_DIR, CRD_NAME)
    run_id = secrets.token_hex(3)
    plan = [(r, w, f"bench-{run_id}-{w.label.lower()}-{r}") for r, w in schedule(config.rounds)]
    audit = AuditTail(AUDIT_LOG, f"bench-{run_id}-")
    namespaces: list[str] = []
    operator: OperatorProcess | None = None
    trials: list[Trial] = []
    try:
        for _, _, ns in plan:
            create_namespace(api, ns, {NAMESPACE_LABEL: run_id})
            namespaces.append(ns)
        podset_namespaces = [ns for _, w, ns in plan if w is PODSET]
        operator = OperatorProcess(
            "podset-operator", [f"--namespace={ns}" for ns in podset_namespaces], operator_log
        ).start()
        progress(f"podset-operator ready (pid {operator.pid})")
        for i, (r, workload, ns) in enumerate(plan):
            if i:
                time.sleep(config.pause)
            if not operator.alive():
                raise RuntimeError(f"podset-operator exited; see {operator_log}")
            controller = operator.pid if workload is PODSET else plane_pid(KCM)
            pids = {"controller": controller} | {c: plane_pid(c) for c in PLANE_COMPONENTS}
            trials.append(_measure(workload, r, ns, api, audit, config, pids, progress))
    finally:
        if operator is not None:
            code = operator.stop()
            progress(f"podset-operator stopped (exit code {code}); log {operator_log}")
        audit.close()
        if namespaces:
            progress(f"deleting {len(namespaces)} namespaces bench-{run_id}-*")
            left = delete_namespaces(api, namespaces)
            if left:
                progress(f"still terminating: {', '.join(left)}")
    return trials
