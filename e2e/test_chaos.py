"""Chaos: the three operators under control-plane faults and SIGKILLs, each run ending converged.

Local plane only (faults are injected with ``hack/localplane.py stop/start/pause/resume``);
marked ``chaos`` and left out of ``make e2e``: run with ``make chaos``. The three operators run
as local processes with ``--watch-timeout=5``; the work is a PodSet scaled 0→300 whose pods a
PodDebugger (maxPods 10) debugs, and a ConfigMapSync fanning a ConfigMap out to 200 namespaces.
"Converged" is the exact end state: 300 active pods, 200 copies equal to the source (and no
other copy), 10 pods holding the current debug container.

Network-level faults (partitions, latency, loss, stalled watch streams) are in
``e2e/test_network_faults.py``, which runs operators in network namespaces of their own. A
paused API server (SIGSTOP) stands in here for a half-open connection to a frozen API server.

Figures (seconds from the API server being ready again to convergence, pause to unready...)
are printed and written to ``.local/measurements/chaos.json``.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kubernetes import client, config
from prometheus_client.parser import text_string_to_metric_families

from e2e import configmapsync_support, poddebugger_support, podset_support
from e2e.cluster import ROOT, Cluster, condition, wait_until
from e2e.fanout import SYNC, FanOut
from e2e.measurements import record
from e2e.operators import OperatorProcess, operator_env
from poddebugger_operator.names import container_name
from poddebugger_operator.spec import parse_spec

pytestmark = pytest.mark.chaos

WATCH_TIMEOUT = 5
REPLICAS = 300
DESTINATIONS = 200
MAX_DEBUGGED = 10
CONVERGE_WITHIN = 30.0
"""Seconds from the API server being ready again to the exact end state."""
MID_SCALE = 60
"""Pods that must exist before a fault is injected (the scale-up is then in flight)."""
ETCD_DOWN = 20.0
PAUSE = 20.0
"""SIGSTOP of the API server: longer than twice the watch timeout, so /readyz must fail."""
KILLS = 10


def plane(*args: str) -> float:
    """Run ``hack/localplane.py`` (same OPSUITE_PLANE_PORT_BASE); the seconds it took."""
    started = time.monotonic()
    subprocess.run([sys.executable, str(ROOT / "hack" / "localplane.py"), *args], check=True)
    return time.monotonic() - started


@dataclass(kw_only=True)
class Fleet(FanOut):
    """The fan-out, the PodSet ``web``, the PodDebugger ``dbg`` and the operator processes
    every scenario works on."""

    cluster: Cluster
    log_dir: Path
    operators: dict[str, OperatorProcess] = field(default_factory=dict)

    # --- operators -------------------------------------------------------------------------

    def start_operators(self) -> None:
        common = [f"--watch-timeout={WATCH_TIMEOUT}"]
        commands = {
            "podset-operator": [f"--namespace={self.work}"],
            "configmapsync-operator": [],  # all namespaces: the 200 destinations
            # No admission policies here: the PodDebugger operator opts out of needing them.
            "pod-debugger-operator": [f"--namespace={self.work}", poddebugger_support.OPT_OUT],
        }
        for command, args in commands.items():
            log = self.log_dir / f"{command}-{uuid.uuid4().hex[:6]}.log"
            env = operator_env(self.cluster, command, POD_NAME=f"{self.prefix}{command}")
            self.operators[command] = OperatorProcess(command, [*args, *common], log, env).start()
        for proc in self.operators.values():
            proc.wait_ready(timeout=120)

    def pids(self) -> dict[str, int]:
        return {name: proc.pid for name, proc in self.operators.items()}

    def assert_no_restart(self, pids: dict[str, int]) -> None:
        """Every operator still runs as the same process (no exit, no crash loop)."""
        for name, proc in self.operators.items():
            assert proc.alive(), f"{name} exited:\n{proc.log_tail()}"
            assert proc.pid == pids[name], f"{name} was restarted"

    # --- the work --------------------------------------------------------------------------

    def scale(self, replicas: int) -> None:
        self.custom.patch_namespaced_custom_object(
            podset_support.GROUP,
            podset_support.VERSION,
            self.work,
            podset_support.PLURAL,
            "web",
            {"spec": {"replicas": replicas}},
        )

    def remove_sync(self) -> None:
        """Delete the ConfigMapSync and wait until it and its copies are gone."""
        self.delete_sync()
        wait_until(
            lambda: int(self.has_sync()) + len(self.copies()),
            lambda n: n == 0,
            timeout=180,
            what="copies removed",
        )

    def active_pods(self) -> list[client.V1Pod]:
        pods = self.core.list_namespaced_pod(self.work, label_selector="app=web").items
        return [p for p in pods if podset_support.is_active(p)]

    # --- convergence -----------------------------------------------------------------------

    def divergence(self, replicas: int, data: str, copies: int = DESTINATIONS) -> list[str]:
        """What differs from the exact end state (empty when converged)."""
        problems = []
        pods = self.active_pods()
        if len(pods) != replicas:
            problems.append(f"{len(pods)}/{replicas} pods")
        found = self.copies()
        stale = [c for c in found if (c.data or {}).get("value") != data]
        if len(found) != copies or stale:
            problems.append(f"{len(found)}/{copies} copies, {len(stale)} stale")
        debugger = self.custom.get_namespaced_custom_object(
            poddebugger_support.GROUP,
            poddebugger_support.VERSION,
            self.work,
            poddebugger_support.PLURAL,
            "dbg",
        )
        name = container_name("dbg", parse_spec(debugger))
        holders = sum(any(c.name == name for c in p.spec.ephemeral_containers or ()) for p in pods)
        expected = min(MAX_DEBUGGED, replicas)
        if holders != expected:
            problems.append(f"{holders}/{expected} debugged")
        return problems

    def wait_converged(
        self, replicas: int, data: str, timeout: float, copies: int = DESTINATIONS
    ) -> float:
        """Seconds until the exact end state (fails with what differs after ``timeout``)."""
        started = time.monotonic()
        wait_until(
            lambda: self.divergence(replicas, data, copies),
            lambda problems: not problems,
            timeout=timeout,
            interval=1.0,
            what=f"{replicas} pods, {copies} copies of {data!r}, debugged pods",
        )
        return time.monotonic() - started

    def reset(self) -> None:
        """No pods, no sync: the start of every scale-up and fan-out."""
        self.scale(0)
        if self.has_sync() or self.copies():
            self.remove_sync()
        wait_until(self.active_pods, lambda pods: not pods, timeout=180, what="no pods")


@pytest.fixture(scope="module")
def fleet(
    cluster: Cluster, api: client.ApiClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Fleet]:
    if cluster.kind != "local":
        pytest.skip(
            f"injects faults into the local plane's processes; the cluster is {cluster.kind}"
        )
    for support in (podset_support, configmapsync_support, poddebugger_support):
        support.install_crd(cluster)
    fleet = Fleet(
        api=api,
        destinations=DESTINATIONS,
        kind="chaos",
        cluster=cluster,
        log_dir=tmp_path_factory.mktemp("chaos"),
    ).create()
    podsets = podset_support.PodSets(api, fleet.work)
    podsets.create(podset_support.podset("web", 0))
    fleet.custom.create_namespaced_custom_object(
        poddebugger_support.GROUP,
        poddebugger_support.VERSION,
        fleet.work,
        poddebugger_support.PLURAL,
        {
            "apiVersion": f"{poddebugger_support.GROUP}/{poddebugger_support.VERSION}",
            "kind": "PodDebugger",
            "metadata": {"name": "dbg"},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "image": "docker.io/library/busybox:1.37",
                "maxPods": MAX_DEBUGGED,
            },
        },
    )
    fleet.start_operators()
    yield fleet
    for proc in fleet.operators.values():
        proc.stop()
    fleet.delete()


def _fault_mid_scale(fleet: Fleet, scenario: str, fault: Callable[[], dict[str, float]]) -> None:
    """Start the 0→300 scale-up and, once MID_SCALE pods exist, the 200-namespace fan-out;
    inject ``fault`` as soon as the first copy exists; then require the exact end state
    within CONVERGE_WITHIN seconds of the API server being ready, every operator still the
    same process."""
    fleet.reset()
    pids = fleet.pids()
    data = f"{scenario}-{uuid.uuid4().hex[:4]}"
    fleet.set_source(data)
    fleet.scale(REPLICAS)
    wait_until(
        lambda: len(fleet.active_pods()), lambda n: n >= MID_SCALE, timeout=120, what="mid-scale"
    )
    fleet.create_sync()  # the fan-out is fast: the fault follows its first copy
    wait_until(lambda: len(fleet.copies()), bool, timeout=60, what="the first copy")
    before = {"pods_at_fault": len(fleet.active_pods()), "copies_at_fault": len(fleet.copies())}
    figures = fault()
    converged = fleet.wait_converged(REPLICAS, data, timeout=180)
    fleet.assert_no_restart(pids)
    record("chaos", scenario, {**before, **figures, "converged_after_ready_s": round(converged, 1)})
    assert converged <= CONVERGE_WITHIN, f"converged {converged:.1f} s after the API server"


def test_apiserver_killed_mid_scale(fleet: Fleet) -> None:
    """SIGKILL of kube-apiserver in the middle of the scale-up and fan-out, then a restart."""

    def fault() -> dict[str, float]:
        down = plane("stop", "kube-apiserver", "--signal", "KILL")
        restart = plane("start", "kube-apiserver")  # returns once /readyz answers 200
        return {"kill_s": round(down, 1), "restart_to_ready_s": round(restart, 1)}

    _fault_mid_scale(fleet, "apiserver_sigkill", fault)


def _apiserver_ready(cluster: Cluster) -> bool:
    try:
        return cluster.kubectl("get", "--raw", "/readyz").strip() == "ok"
    except RuntimeError:
        return False


def test_etcd_down_for_twenty_seconds(fleet: Fleet) -> None:
    """etcd SIGKILLed (kill and restart, not SIGSTOP) for 20 s in the middle of the work."""

    def fault() -> dict[str, float]:
        plane("stop", "etcd", "--signal", "KILL")
        time.sleep(ETCD_DOWN)
        plane("start", "etcd")
        started = time.monotonic()
        wait_until(
            lambda: _apiserver_ready(fleet.cluster), bool, timeout=120, what="API server ready"
        )
        return {
            "etcd_down_s": ETCD_DOWN,
            "apiserver_ready_after_etcd_s": round(time.monotonic() - started, 1),
        }

    _fault_mid_scale(fleet, "etcd_kill_20s", fault)


def test_apiserver_paused_longer_than_the_watch_timeout(fleet: Fleet) -> None:
    """SIGSTOP of kube-apiserver for PAUSE seconds: every /readyz fails, then recovers.

    "A change made during the pause": nothing can be written while the only API server is
    stopped, so the changes (scale 0→300, new source data, the fan-out's ConfigMapSync) are
    committed right before SIGSTOP, which follows the last write's response at once: the
    operators may have seen them, but whatever they must write for them can only be written
    after SIGCONT. The test then requires the exact end state.
    """
    fleet.reset()
    wait_until(
        lambda: [p.readyz()[0] for p in fleet.operators.values()],
        lambda codes: set(codes) == {200},
        timeout=60,
        what="every operator ready",
    )
    pids = fleet.pids()
    data = f"paused-{uuid.uuid4().hex[:4]}"
    fleet.set_source(data)
    fleet.create_sync()
    fleet.scale(REPLICAS)
    # A watchdog resumes the API server even if this process dies during the pause.
    watchdog = subprocess.Popen(
        [
            "sh",
            "-c",
            f"sleep {PAUSE + 30:g}; {sys.executable} {ROOT}/hack/localplane.py resume "
            "kube-apiserver",
        ],
        start_new_session=True,
        env=os.environ.copy(),
    )
    plane("pause", "kube-apiserver")
    paused_at = time.monotonic()
    unready_after: dict[str, float] = {}
    try:
        while time.monotonic() - paused_at < PAUSE:
            for name, proc in fleet.operators.items():
                if name not in unready_after and proc.readyz()[0] != 200:
                    unready_after[name] = round(time.monotonic() - paused_at, 1)
            time.sleep(0.2)
    finally:
        plane("resume", "kube-apiserver")
        os.killpg(watchdog.pid, signal.SIGKILL)
        watchdog.wait()
    resumed = time.monotonic()
    assert set(unready_after) == set(fleet.operators), f"unready: {unready_after}"
    wait_until(
        lambda: [p.readyz()[0] for p in fleet.operators.values()],
        lambda codes: set(codes) == {200},
        timeout=60,
        what="every operator ready again",
    )
    ready_again = time.monotonic() - resumed
    converged = fleet.wait_converged(REPLICAS, data, timeout=180)
    fleet.assert_no_restart(pids)
    record(
        "chaos",
        "apiserver_sigstop",
        {
            "pause_s": PAUSE,
            "watch_timeout_s": WATCH_TIMEOUT,
            "unready_after_pause_s": unready_after,
            "ready_after_resume_s": round(ready_again, 1),
            "converged_after_resume_s": round(converged + ready_again, 1),
        },
    )


THROTTLE_SHARES = 1
"""The operators' priority level's share of the API server's concurrency: a few seats, and
``Reject`` instead of queuing, so the scale-up and the fan-out meet 429s."""


def _identity(cluster: Cluster, command: str) -> str:
    """The user name the operator ``command`` authenticates as (a SelfSubjectReview)."""
    own = config.new_client_from_config(config_file=str(cluster.operator_kubeconfig(command)))
    try:
        review = client.AuthenticationV1Api(own).create_self_subject_review({})
        return str(review.status.user_info.username)
    finally:
        own.close()


@contextmanager
def _throttled(fleet: Fleet) -> Iterator[None]:
    """The operators' requests in a priority level of :data:`THROTTLE_SHARES` shares that
    rejects what it cannot serve at once (API Priority and Fairness answers 429)."""
    name = f"{fleet.prefix}throttled"
    users = [_identity(fleet.cluster, command) for command in fleet.operators]
    if any(u.startswith("system:admin") or u == "admin" for u in users):
        pytest.skip(f"the operators run as the admin ({users}), whom APF exempts")
    flow = client.FlowcontrolApiserverV1Api(fleet.api)
    flow.create_priority_level_configuration(
        {
            "metadata": {"name": name},
            "spec": {
                "type": "Limited",
                "limited": {
                    "nominalConcurrencyShares": THROTTLE_SHARES,
                    "lendablePercent": 0,
                    "borrowingLimitPercent": 0,
                    "limitResponse": {"type": "Reject"},
                },
            },
        }
    )
    everything = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": True}
    flow.create_flow_schema(
        {
            "metadata": {"name": name},
            "spec": {
                "priorityLevelConfiguration": {"name": name},
                "matchingPrecedence": 100,
                "distinguisherMethod": {"type": "ByUser"},
                "rules": [
                    {
                        "subjects": [{"kind": "User", "user": {"name": u}} for u in users],
                        "resourceRules": [{**everything, "namespaces": ["*"]}],
                        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                    }
                ],
            },
        }
    )
    try:
        yield
    finally:
        flow.delete_flow_schema(name)
        flow.delete_priority_level_configuration(name)


def _throttles(fleet: Fleet) -> int:
    """The 429 answers the operators have counted (``rest_client_requests_total``)."""
    return sum(
        int(sample.value)
        for proc in fleet.operators.values()
        for family in text_string_to_metric_families(proc.metrics())
        if family.name == "rest_client_requests"
        for sample in family.samples
        if sample.name.endswith("_total") and sample.labels.get("code") == "429"
    )


def test_throttled_by_priority_and_fairness(fleet: Fleet) -> None:
    """The operators' requests in a priority level of a few seats that rejects the rest (429,
    with Retry-After), during the 0→300 scale-up and the 200-namespace fan-out: everything
    converges with no Degraded condition and no Warning Event; each throttled request is
    retried as client-go retries it, and counted by code."""
    fleet.reset()
    pids = fleet.pids()
    before = _throttles(fleet)
    since = time.time()
    data = f"throttled-{uuid.uuid4().hex[:4]}"
    with _throttled(fleet):
        fleet.set_source(data)
        fleet.scale(REPLICAS)
        fleet.create_sync()
        converged = fleet.wait_converged(REPLICAS, data, timeout=240)
        throttled = _throttles(fleet) - before
    fleet.assert_no_restart(pids)
    record(
        "chaos",
        "apf_throttled",
        {"converged_s": round(converged, 1), "throttled_requests": throttled},
    )
    assert throttled > 0, "no request was throttled: the priority level did not bite"
    warnings = [
        f"{e.involved_object.kind}/{e.involved_object.name}: {e.reason}: {e.message}"
        for ns in (fleet.work, fleet.source)
        for e in fleet.core.list_namespaced_event(ns, field_selector="type=Warning").items
        if (e.last_timestamp or e.event_time or e.metadata.creation_timestamp).timestamp() >= since
    ]
    assert not warnings, warnings
    objects = [
        (podset_support.GROUP, podset_support.VERSION, fleet.work, podset_support.PLURAL, "web"),
        (
            configmapsync_support.GROUP,
            configmapsync_support.VERSION,
            fleet.source,
            configmapsync_support.PLURAL,
            SYNC,
        ),
    ]
    for group, version, namespace, plural, name in objects:
        obj = fleet.custom.get_namespaced_custom_object(group, version, namespace, plural, name)
        degraded = condition(obj, "Degraded")
        assert degraded.get("status") != "True", (plural, degraded)


def test_operators_sigkilled_at_random_points(fleet: Fleet) -> None:
    """Ten rounds: new work for all three operators, SIGKILL of all three at a random moment,
    a restart; each round must end in its exact end state."""
    rng = random.Random(int(os.environ.get("CHAOS_SEED", "0")) or None)
    fleet.reset()
    fleet.create_sync()
    rounds = []
    for round_ in range(KILLS):
        replicas = rng.randint(MAX_DEBUGGED, 80)
        data = f"kill-{round_}-{uuid.uuid4().hex[:4]}"
        fleet.scale(replicas)
        fleet.set_source(data)
        delay = rng.uniform(0, 3)
        time.sleep(delay)
        for proc in fleet.operators.values():
            proc.signal(signal.SIGKILL)
        for proc in fleet.operators.values():
            proc.process.wait(timeout=30)
        fleet.operators.clear()
        fleet.start_operators()
        converged = fleet.wait_converged(replicas, data, timeout=180)
        rounds.append(
            {
                "replicas": replicas,
                "kill_after_s": round(delay, 2),
                "converged_s": round(converged, 1),
            }
        )
    record("chaos", "operator_sigkill", {"rounds": rounds})
