"""Network faults between an operator and the API server (#20), on the wire.

Each operator under a fault runs in a network namespace of its own (``e2e.netns``): a partition,
latency and loss, or watch streams stalled while requests are answered. Writes are attributed to
each process by its User-Agent (``<command>/<version> (<identity>)``) in the plane's audit log;
figures go to ``.local/measurements/network-faults.json`` and, through
``python -m bench.robustness``, into docs/robustness.md. Marked ``chaos`` (``make chaos``);
needs root and the plane's audit log.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from e2e import configmapsync_support, netns, poddebugger_support, podset_support
from e2e.cluster import WRITE_VERBS, Cluster, audit_events, flush_audit_log, wait_until
from e2e.fanout import FanOut
from e2e.measurements import record
from e2e.operators import OperatorProcess, operator_env, wait_exit
from e2e.poddebugger_support import ALLOWED_PREFIX, OPT_OUT, Debuggers, debugger_manifest
from e2e.podset_support import PodCounter, PodSets, podset
from opsuite_common.kopfwatch.settings import watch_dead_after
from opsuite_common.manager import WATCHDOG_PERIOD

pytestmark = [
    pytest.mark.chaos,
    pytest.mark.local_operators("runs operators in network namespaces of their own"),
]

# client-go's defaults, which the manager uses (opsuite_common.leader_election).
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 15.0, 10.0, 2.0
FAILOVER_BOUND = LEASE_DURATION + RETRY_PERIOD
POLL_SLACK = 0.5
WATCH_TIMEOUT = 5.0
BURST = 120
"""Replicas of the PodSet scale-up during which the leader is partitioned."""
FAN_OUT = 60
"""Destination namespaces of the ConfigMapSync fan-out during which the leader is partitioned."""
FAN_OUT_KBIT = 512


@pytest.fixture(scope="module", autouse=True)
def network_namespaces(cluster: Cluster) -> None:
    if (why := netns.available()) is not None:
        pytest.skip(why)
    if cluster.audit_log is None:
        pytest.skip("needs the cluster's audit log (E2E_AUDIT_LOG)")
    for support in (podset_support, configmapsync_support, poddebugger_support):
        support.install_crd(cluster)


@pytest.fixture
def link(cluster: Cluster) -> Iterator[netns.NetNs]:
    """A network namespace with its veth and relay to the API server, removed afterwards."""
    config = cluster.api_client().configuration
    namespace = netns.NetNs(api_server=config.host).create()
    try:
        yield namespace
    finally:
        namespace.delete()


def parse_time(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


@dataclass
class Processes:
    """Operator processes of one test: some in ``link``'s namespace, some on the host."""

    cluster: Cluster
    link: netns.NetNs
    log_dir: Path
    procs: dict[str, OperatorProcess] = field(default_factory=dict)

    def start(self, command: str, identity: str, *args: str, isolated: bool) -> OperatorProcess:
        """``command`` as ``identity`` (its POD_NAME), in the namespace when ``isolated``."""
        env = operator_env(self.cluster, command, POD_NAME=identity)
        env["KUBECONFIG"] = str(self.cluster.kubeconfig)  # admin: Leases in the test namespace
        extra: dict[str, Any] = {}
        if isolated:
            kubeconfig = self.link.kubeconfig(
                self.cluster.kubeconfig, self.log_dir / f"{identity}.kubeconfig"
            )
            env["KUBECONFIG"] = str(kubeconfig)
            extra = {"host": self.link.ip, "wrapper": self.link.exec_prefix()}
        proc = OperatorProcess(
            command, list(args), self.log_dir / f"{command}-{identity}.log", env, **extra
        ).start()
        self.procs[identity] = proc
        return proc

    def leader_and_standby(
        self, api: client.ApiClient, command: str, lease: tuple[str, str], *args: str
    ) -> OperatorProcess:
        """``command`` electing itself on ``lease``: "a" in the namespace, holding the Lease,
        then "b" on the host; both ready. Returns the leader."""
        flags = [
            "--leader-elect",
            f"--leader-election-namespace={lease[0]}",
            f"--leader-election-id={lease[1]}",
            *args,
        ]
        leader = self.start(command, "a", *flags, isolated=True)
        wait_holder(api, *lease, "a", timeout=60)
        standby = self.start(command, "b", *flags, isolated=False)
        leader.wait_ready()
        standby.wait_ready()
        return leader

    def stop_all(self) -> None:
        for proc in self.procs.values():
            proc.stop(timeout=10)

    def logs(self) -> str:
        return "\n".join(
            f"--- {name} (alive={proc.alive()}):\n{proc.log_tail(25)}"
            for name, proc in self.procs.items()
        )


@pytest.fixture
def processes(cluster: Cluster, link: netns.NetNs, tmp_path: Path) -> Iterator[Processes]:
    procs = Processes(cluster, link, tmp_path)
    try:
        yield procs
    finally:
        procs.stop_all()


def lease_holder(api: client.ApiClient, namespace: str, name: str) -> str:
    try:
        lease = client.CoordinationV1Api(api).read_namespaced_lease(name, namespace)
    except client.ApiException:
        return ""
    return str(lease.spec.holder_identity or "")


def wait_holder(
    api: client.ApiClient, namespace: str, name: str, wanted: str, timeout: float
) -> float:
    """Poll every 0.1 s until the Lease names ``wanted``; the wall time it did."""
    wait_until(
        lambda: lease_holder(api, namespace, name),
        lambda holder: holder == wanted,
        timeout=timeout,
        interval=0.1,
        what=f"{wanted} holding lease {name}",
    )
    return time.time()


def writes(
    cluster: Cluster, api: client.ApiClient, command: str, needle: str, since: float
) -> list[dict[str, Any]]:
    """Completed writes by ``command`` processes on objects whose audit line has ``needle``
    (a namespace prefix), received after ``since``: identity, verb, resource, namespace, name,
    code, received, completed (Unix time), is_lease."""
    audit_log = flush_audit_log(cluster, api)
    agent = re.compile(rf"^{re.escape(command)}/\S+ \((?P<identity>[^)]+)\)")
    found = []
    for event in audit_events(audit_log, needle):
        ref = event.get("objectRef") or {}
        if event.get("verb") not in WRITE_VERBS or event.get("stage") != "ResponseComplete":
            continue
        if needle not in (ref.get("namespace") or ""):
            continue
        match = agent.match(event.get("userAgent") or "")
        received = parse_time(event["requestReceivedTimestamp"])
        if match is None or received < since:
            continue
        found.append(
            {
                "identity": match.group("identity"),
                "verb": event["verb"],
                "resource": ref.get("resource"),
                "namespace": ref.get("namespace"),
                "name": ref.get("name"),
                "code": (event.get("responseStatus") or {}).get("code"),
                "received": received,
                "completed": parse_time(event["stageTimestamp"]),
                "is_lease": ref.get("resource") == "leases",
            }
        )
    return found


def handover_figures(
    all_writes: list[dict[str, Any]], old: str, new: str, partitioned_at: float, took_over: float
) -> dict[str, Any]:
    """What the audit log says about a partitioned leader ``old`` and its successor ``new``."""
    old_lease = [w for w in all_writes if w["identity"] == old and w["is_lease"]]
    # Its acquisition (a create, 201) counts as much as a renewal (an update, 200): both set the
    # Lease's renewTime, and a partition can come before the first renewal.
    renewed = max(
        w["completed"] for w in old_lease if w["code"] in (200, 201) and w["completed"] <= took_over
    )
    deadline = renewed + RETRY_PERIOD + RENEW_DEADLINE  # its renewal round's end, at the latest
    old_writes = [w for w in all_writes if w["identity"] == old and not w["is_lease"]]
    new_writes = [w for w in all_writes if w["identity"] == new and not w["is_lease"]]
    # A refused or timed-out request (its body never arrived) did nothing after its receipt.
    last_old = max(
        (w["completed"] if w["code"] < 300 else w["received"] for w in old_writes), default=0.0
    )
    first_new = min((w["received"] for w in new_writes), default=float("inf"))
    return {
        "last_renewal_before_partition_s": round(partitioned_at - renewed, 2),
        "writes_after_renew_deadline": len([w for w in old_writes if w["received"] > deadline]),
        "writes_after_partition": len([w for w in old_writes if w["received"] > partitioned_at]),
        "writes_after_handover": len([w for w in old_writes if w["received"] > took_over]),
        "lease_writes_after_handover": len(
            [w for w in old_lease if w["received"] > took_over and w["code"] in (200, 201)]
        ),
        "both_wrote_overlap_s": round(max(0.0, last_old - first_new), 3),
        "writes_by_old": len(old_writes),
        "writes_by_new": len(new_writes),
    }


def partition_leader(
    api: client.ApiClient,
    link: netns.NetNs,
    lease: tuple[str, str],
    leader: OperatorProcess,
    converged: Any,
) -> dict[str, float]:
    """Partition ``leader`` (isolated) from the API server until the standby "b" leads, the
    work has ``converged()`` and the leader has exited; heal; wait for what TCP would still
    deliver. Times: partitioned_at, took_over (wall), failover_s, exit code, exited_after_s."""
    with link.partition():
        partitioned_at = time.time()
        took_over = wait_holder(api, *lease, "b", timeout=FAILOVER_BOUND + 15)
        code = wait_exit(leader, timeout=RENEW_DEADLINE + RETRY_PERIOD + RENEW_DEADLINE + 10)
        exited_after = time.time() - partitioned_at
        converged()
        partition_s = time.time() - partitioned_at
    # Healed: a segment the partitioned leader's kernel still holds (a request sent before the
    # partition, never acknowledged) is retransmitted on the next backoff, at most as long
    # after as the partition lasted. Wait that long for it to show up in the audit log.
    time.sleep(min(partition_s, 60) + 5)
    return {
        "partitioned_at": partitioned_at,
        "took_over": took_over,
        "failover_s": took_over - partitioned_at,
        "exit_code": code,
        "exited_after_s": exited_after,
        "partition_s": partition_s,
    }


def test_leader_partitioned_during_a_podset_scale_up(
    cluster: Cluster, api: client.ApiClient, namespace: str, processes: Processes, link: netns.NetNs
) -> None:
    """The leader loses the API server in the middle of a 0→120 scale-up; the standby does not."""
    started = time.time()
    lease = (namespace, f"netfault-{uuid.uuid4().hex[:6]}")
    leader = processes.leader_and_standby(api, "podset-operator", lease, f"--namespace={namespace}")
    podsets = PodSets(api, namespace)
    podsets.create(podset("web", 2))
    podsets.wait_running("app=web", 2)

    with PodCounter(api, namespace) as pods:
        podsets.patch("web", {"spec": {"replicas": BURST}})
        wait_until(lambda: pods.total, lambda n: n >= 20, timeout=30, interval=0.02, what="burst")
        at_fault = pods.total

        def converged() -> None:
            podsets.wait_status("web", replicas=BURST, timeout=180)

        times = partition_leader(api, link, lease, leader, converged)
        highest = pods.highest_active
    all_writes = writes(cluster, api, "podset-operator", namespace, started)
    figures = handover_figures(all_writes, "a", "b", times["partitioned_at"], times["took_over"])
    figures |= {
        "pods_at_partition": at_fault,
        "replicas": BURST,
        "pods_over_replicas": max(0, highest - BURST),
        "failover_s": round(times["failover_s"], 2),
        "failover_bound_s": FAILOVER_BOUND,
        "old_leader_exit_code": times["exit_code"],
        "old_leader_exited_after_s": round(times["exited_after_s"], 2),
        "partition_s": round(times["partition_s"], 1),
    }
    record("network-faults", "partition_podset", figures)
    assert figures["writes_after_renew_deadline"] == 0, all_writes
    assert figures["writes_after_handover"] == 0
    assert figures["both_wrote_overlap_s"] == 0
    assert figures["pods_over_replicas"] == 0, highest
    assert times["failover_s"] <= FAILOVER_BOUND + POLL_SLACK, processes.logs()
    assert times["exit_code"] == 1, processes.logs()
    assert lease_holder(api, *lease) == "b"
    assert figures["lease_writes_after_handover"] == 0


@pytest.fixture
def make_work(api: client.ApiClient) -> Iterator[Callable[[int], FanOut]]:
    """A fan-out with that many destinations, deleted at the end of the test."""
    made: list[FanOut] = []

    def make(destinations: int) -> FanOut:
        made.append(FanOut(api, destinations, "nf"))
        return made[-1].create()

    try:
        yield make
    finally:
        for work in made:
            work.delete()


def test_leader_partitioned_during_a_configmapsync_fan_out(
    cluster: Cluster,
    api: client.ApiClient,
    make_work: Callable[[int], FanOut],
    processes: Processes,
    link: netns.NetNs,
) -> None:
    """The leader loses the API server in the middle of a fan-out to 60 namespaces; the standby
    does not. No copy is written by the old leader after the handover."""
    work = make_work(FAN_OUT)
    started = time.time()
    lease = (work.work, f"netfault-{work.run}")
    leader = processes.leader_and_standby(
        api, "configmapsync-operator", lease, *work.namespace_flags()
    )
    work.set_source("fanned")
    # Unhindered, the 60 copies are written before the test sees the first: a bandwidth limit
    # spreads them over a second or two, so that the partition lands in the middle.
    with link.bandwidth(FAN_OUT_KBIT):
        work.create_sync()
        wait_until(lambda: len(work.copies()), lambda n: n >= 5, timeout=60, interval=0.02,
                   what="the fan-out under way")  # fmt: skip
        at_fault = len(work.copies())
        times = partition_leader(
            api, link, lease, leader, lambda: work.wait_copies("fanned", FAN_OUT)
        )
    all_writes = writes(cluster, api, "configmapsync-operator", work.prefix, started)
    figures = handover_figures(all_writes, "a", "b", times["partitioned_at"], times["took_over"])
    late_copies = [
        w
        for w in all_writes
        if w["identity"] == "a" and w["resource"] == "configmaps"
        if w["received"] > times["took_over"]
    ]
    figures |= {
        "copies_at_partition": at_fault,
        "destinations": FAN_OUT,
        "copies_by_old_leader_after_handover": len(late_copies),
        "failover_s": round(times["failover_s"], 2),
        "failover_bound_s": FAILOVER_BOUND,
        "old_leader_exit_code": times["exit_code"],
        "old_leader_exited_after_s": round(times["exited_after_s"], 2),
        "partition_s": round(times["partition_s"], 1),
    }
    record("network-faults", "partition_configmapsync", figures)
    assert not late_copies, late_copies
    assert figures["writes_after_renew_deadline"] == 0, all_writes
    assert figures["both_wrote_overlap_s"] == 0
    assert times["failover_s"] <= FAILOVER_BOUND + POLL_SLACK, processes.logs()
    assert times["exit_code"] == 1, processes.logs()
    assert figures["lease_writes_after_handover"] == 0
    work.wait_copies("fanned", FAN_OUT, timeout=30)


WATCH_GAP = 2 * WATCH_TIMEOUT


def test_a_partition_of_twice_the_watch_timeout(
    cluster: Cluster,
    api: client.ApiClient,
    make_work: Callable[[int], FanOut],
    processes: Processes,
    link: netns.NetNs,
) -> None:
    """Both operators cut off for 2 x --watch-timeout while pods, a PodSet and copies are
    deleted and the source changes; after the heal every deletion is processed once: exactly
    the deleted pods and copies are re-created, the deleted PodSet's pods are not, and every
    copy is updated once."""
    work = make_work(6)
    flags = [f"--watch-timeout={WATCH_TIMEOUT:g}"]
    procs = [
        processes.start("podset-operator", "ps", f"--namespace={work.work}", *flags, isolated=True),
        processes.start(
            "configmapsync-operator", "cms", *work.namespace_flags(), *flags, isolated=True
        ),
    ]
    for proc in procs:
        proc.wait_ready()
    podsets = PodSets(api, work.work)
    podsets.create(podset("web", 5))
    podsets.create(podset("gone", 3, labels={"app": "gone"}))
    work.create_sync()
    podsets.wait_running("app=web", 5)
    podsets.wait_running("app=gone", 3)
    work.wait_copies("initial", 6)
    time.sleep(2 * WATCH_TIMEOUT)  # quiet: every watch has reconnected since
    victims = [p.metadata.name for p in podsets.active_pods("app=web")[:2]]
    lost = work.destination_names()[:2]

    with link.partition():
        partitioned_at = time.time()
        for name in victims:
            work.core.delete_namespaced_pod(name, work.work, grace_period_seconds=0)
        podsets.delete("gone")
        for ns in lost:
            work.core.delete_namespaced_config_map("cfg", ns)
        work.set_source("changed")
        unready = wait_until(
            lambda: [p.readyz()[0] for p in procs],
            lambda codes: 200 not in codes,
            timeout=WATCH_GAP + 5,
            interval=0.2,
            what="both operators unready",
        )
        time.sleep(max(0.0, partitioned_at + WATCH_GAP - time.time()))
    healed = time.time()
    wait_until(lambda: [p.readyz()[0] for p in procs], lambda c: set(c) == {200}, timeout=60,
               interval=0.2, what="both ready")  # fmt: skip
    ready = time.time() - healed
    # Pods count once Running (kwok, shared with other tests, can be slow to get there).
    podsets.wait_running("app=web", 5, timeout=180)
    work.wait_copies("changed", 6, timeout=120)
    wait_until(lambda: podsets.active_pods("app=gone"), lambda p: not p, timeout=60, what="gone")
    converged = time.time() - healed
    time.sleep(2 * WATCH_TIMEOUT)  # anything late or doubled would be written by now

    ps_writes = writes(cluster, api, "podset-operator", work.prefix, partitioned_at)
    cms_writes = writes(cluster, api, "configmapsync-operator", work.prefix, partitioned_at)
    # What was written: a request refused (409: a stale resourceVersion, or a copy that exists
    # already) wrote nothing; those are counted apart. On a shared plane another test's
    # configmapsync-operator serving every namespace may act on this run's ConfigMapSync too:
    # its writes (other identities) are counted apart and the checks of what "cms" wrote are
    # about this process; a create succeeds once whoever sends it.
    done = [w for w in ps_writes + cms_writes if w["code"] < 300]
    mine = [w for w in done if w["identity"] in ("ps", "cms")]
    refused = len([w for w in ps_writes + cms_writes if w["code"] >= 300])
    pod_creates = [w for w in mine if w["resource"] == "pods" and w["verb"] == "create"]
    copy_creates = [w for w in done if w["resource"] == "configmaps" and w["verb"] == "create"]
    # A copy another operator also wrote may rightly be written again: those are left out.
    contested = {w["namespace"] for w in done if w not in mine and w["resource"] == "configmaps"}
    copy_updates: dict[str, int] = dict.fromkeys(set(work.destination_names()) - contested, 0)
    for w in mine:
        update = w["resource"] == "configmaps" and w["verb"] in ("update", "patch")
        if update and w["namespace"] in copy_updates:
            copy_updates[w["namespace"]] += 1
    figures = {
        "partition_s": round(healed - partitioned_at, 1),
        "watch_timeout_s": WATCH_TIMEOUT,
        "unready_codes_during_partition": unready,
        "converged_after_heal_s": round(converged, 1),
        "ready_after_heal_s": round(ready, 1),
        "pods_deleted": len(victims),
        "pods_created": len(pod_creates),
        "copies_deleted": len(lost),
        "copies_created": len(copy_creates),
        "copy_updates_max": max(copy_updates.values(), default=0),
        "refused_writes": refused,
        "writes_by_other_operators": len(done) - len(mine),
        "copies_written_by_other_operators": len(contested),
    }
    record("network-faults", "watch_gap_partition", figures)
    assert len(pod_creates) == len(victims), pod_creates
    assert sorted(w["namespace"] for w in copy_creates) == sorted(lost), copy_creates
    assert max(copy_updates.values(), default=0) <= 1, copy_updates
    for proc in procs:
        assert proc.alive(), proc.log_tail()


def test_watch_streams_stalled_while_requests_are_answered(
    cluster: Cluster, api: client.ApiClient, namespace: str, processes: Processes, link: netns.NetNs
) -> None:
    """The leader's watch streams stall (what the API server sends on them is held) while its
    requests, Lease renewals included, are answered: /readyz fails at 2 x --watch-timeout and
    the leader steps down at watch_dead_after, releasing the Lease to the standby."""
    started = time.time()
    lease = (namespace, f"netfault-{uuid.uuid4().hex[:6]}")
    leader = processes.leader_and_standby(
        api,
        "podset-operator",
        lease,
        f"--namespace={namespace}",
        f"--watch-timeout={WATCH_TIMEOUT:g}",
    )
    podsets = PodSets(api, namespace)
    podsets.create(podset("web", 2))
    podsets.wait_running("app=web", 2)
    dead_after = watch_dead_after(WATCH_TIMEOUT)
    bound = WATCH_TIMEOUT + dead_after + WATCHDOG_PERIOD + 3.0

    assert link.relay is not None
    with link.stall_streams():
        stalled_at = time.time()
        wait_until(leader.readyz, lambda r: r[0] != 200, timeout=3 * WATCH_TIMEOUT, interval=0.2,
                   what="the leader unready")  # fmt: skip
        unready_after = time.time() - stalled_at
        took_over = wait_holder(api, *lease, "b", timeout=bound + 15) - stalled_at
        code = wait_exit(leader, timeout=RENEW_DEADLINE + 5)
        held = link.relay.held_chunks
    log = leader.log_path.read_text(errors="replace")
    figures = {
        "watch_timeout_s": WATCH_TIMEOUT,
        "unready_after_s": round(unready_after, 1),
        "unready_bound_s": 2 * WATCH_TIMEOUT,
        "stepped_down_after_s": round(took_over, 1),
        "step_down_bound_s": bound,
        "watch_dead_after_s": dead_after,
        "held_chunks": held,
        "old_leader_exit_code": code,
    }
    record("network-faults", "stalled_watch_streams", figures)
    assert held > 0, "the relay held nothing: the streams were not stalled"
    assert code == 1, processes.logs()
    assert f"watch dead (silent for over {dead_after:.0f} s)" in log, log[-3000:]
    assert "released lease" in log, leader.log_tail()
    assert unready_after <= 2 * WATCH_TIMEOUT + 2, processes.logs()
    assert took_over <= bound + POLL_SLACK, processes.logs()
    podsets.patch("web", {"spec": {"replicas": 3}})
    podsets.wait_running("app=web", 3)
    all_writes = writes(cluster, api, "podset-operator", namespace, started)
    released = max(w["received"] for w in all_writes if w["identity"] == "a" and w["is_lease"])
    mine = [w for w in all_writes if w["identity"] == "a" and not w["is_lease"]]
    assert not [w for w in mine if w["completed"] >= released], "a wrote after its release"
    assert not [
        w
        for w in all_writes
        if w["identity"] == "b" and not w["is_lease"] and w["received"] < released
    ]


SLOW_RTT, SLOW_LOSS = 0.3, 0.05
SLOW_PODS, SLOW_FAN_OUT, SLOW_DEBUGGED = 60, 30, 10
"""The benchmark workloads (bench/), smaller: PodSet 0→60→0, a fan-out to 30 namespaces and
back, a PodDebugger on 10 of the pods (its default maxPods: the field survives a shared plane's
tests installing an older PodDebugger CRD for a moment, which would prune a larger one)."""


QUIET = 3.0
"""Seconds without a request after which a round's count is complete (steady state writes
nothing)."""


WORKLOAD_KEYS = (
    "podset_0_to_n_s",
    "poddebugger_n_pods_s",
    "podset_n_to_0_s",
    "configmapsync_fan_out_s",
    "configmapsync_fan_in_s",
)


def requests_sent(procs: list[OperatorProcess]) -> tuple[int, int]:
    """rest_client_requests_total over every operator, code and method; and those of them that
    got no response (code ``<error>``: a timeout, a connection dropped)."""
    total = errors = 0.0
    for proc in procs:
        for family in text_string_to_metric_families(proc.metrics()):
            for sample in family.samples:
                if sample.name == "rest_client_requests_total":
                    total += sample.value
                    errors += sample.value if sample.labels["code"] == "<error>" else 0
    return int(total), int(errors)


def settled(procs: list[OperatorProcess]) -> tuple[int, int]:
    """``requests_sent`` once it has not changed for QUIET seconds: nothing still in flight."""
    last = requests_sent(procs)
    while True:
        time.sleep(QUIET)
        now = requests_sent(procs)
        if now == last:
            return now
        last = now


def workloads(work: FanOut, procs: list[OperatorProcess], round_: str) -> dict[str, float]:
    """Seconds each workload took to converge, and the requests the operators sent."""
    podsets, debuggers = PodSets(work.api, work.work), Debuggers(work.api)
    before, errors_before = settled(procs)
    seconds: dict[str, float] = {}

    def timed(name: str, step: Callable[[], object]) -> None:
        began = time.monotonic()
        step()
        seconds[name] = round(time.monotonic() - began, 1)

    def scale(replicas: int) -> None:
        podsets.patch("web", {"spec": {"replicas": replicas}})
        podsets.wait_running("app=web", replicas, timeout=600)
        podsets.wait_status("web", replicas=replicas, timeout=120)

    def debug() -> None:
        debuggers.create(work.work, debugger_manifest(name, {"app": "web"}, maxPods=SLOW_DEBUGGED))
        debuggers.wait_debugged(work.work, name, SLOW_DEBUGGED, timeout=600)

    def fan_out() -> None:
        work.create_sync()
        work.wait_copies(value, SLOW_FAN_OUT, timeout=600)

    def fan_in() -> None:
        work.delete_sync()
        wait_until(lambda: len(work.copies()), lambda n: n == 0, timeout=600, what="no copy")

    name, value = f"dbg-{round_}", f"data-{round_}"
    timed("podset_0_to_n_s", lambda: scale(SLOW_PODS))
    timed("poddebugger_n_pods_s", debug)
    debuggers.delete(work.work, name)
    timed("podset_n_to_0_s", lambda: scale(0))
    work.set_source(value)
    timed("configmapsync_fan_out_s", fan_out)
    timed("configmapsync_fan_in_s", fan_in)
    after, errors_after = settled(procs)
    return {**seconds, "requests": after - before, "no_response": errors_after - errors_before}


def test_latency_and_loss_during_the_benchmark_workloads(
    cluster: Cluster,
    api: client.ApiClient,
    make_work: Callable[[int], FanOut],
    processes: Processes,
    link: netns.NetNs,
) -> None:
    """The three operators, in a network namespace, run the workloads on a clean link and then
    with 300 ms RTT and 5 % loss: everything converges; the slowdown and the extra requests
    against the clean run are reported."""
    work = make_work(SLOW_FAN_OUT)
    procs = [
        processes.start("podset-operator", "ps", f"--namespace={work.work}", isolated=True),
        processes.start("configmapsync-operator", "cms", *work.namespace_flags(), isolated=True),
        processes.start(
            "pod-debugger-operator",
            "pd",
            f"--namespace={work.work}",
            f"--allowed-image-prefix={ALLOWED_PREFIX}",
            OPT_OUT,
            isolated=True,
        ),
    ]
    for proc in procs:
        proc.wait_ready()
    PodSets(api, work.work).create(podset("web", 0))
    # Clean, faulted, clean again: the two clean rounds show the machine's own variation.
    clean = [workloads(work, procs, "clean")]
    with link.delay(SLOW_RTT), link.loss(SLOW_LOSS):
        slow = workloads(work, procs, "slow")
    clean.append(workloads(work, procs, "clean2"))
    mean = {k: sum(r[k] for r in clean) / len(clean) for k in slow}
    figures: dict[str, Any] = {
        "rtt_s": SLOW_RTT,
        "loss": SLOW_LOSS,
        "sizes": {"pods": SLOW_PODS, "destinations": SLOW_FAN_OUT, "debugged": SLOW_DEBUGGED},
        "clean": clean[0],
        "clean_again": clean[1],
        "faulted": slow,
        "slowdown": {k: round(slow[k] / max(mean[k], 0.1), 1) for k in WORKLOAD_KEYS},
        "extra_requests": round(slow["requests"] - mean["requests"]),
    }
    record("network-faults", "latency_and_loss", figures)
    for proc in procs:
        assert proc.alive(), proc.log_tail()
