"""Lease leader election between real podset-operator processes on a real API server.

Only the holder of the coordination.k8s.io/v1 Lease reconciles; a standby is ready and takes
over when the leader is killed (after the lease expires) or stops (at once: it releases the
lease); a leader whose lease is taken away exits 1; a leader whose watch dies (its RBAC for pods
revoked) steps down and a standby takes over. The audit log shows that no two processes ever
write at the same time, and that a leader's writes, even in the middle of a burst, are all
answered before it releases the Lease (#16, items 7 and 9).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import signal
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.charts import RELEASE_NAMESPACE, token_kubeconfig
from e2e.cluster import ROOT, WRITE_VERBS, Cluster, flush_audit_log, wait_until
from e2e.operators import OperatorProcess, operator_env, wait_exit
from e2e.podset_support import PodSets, podset
from opsuite_common.kopfwatch.settings import watch_dead_after
from opsuite_common.kube_transport import UNACKNOWLEDGED_TIMEOUT
from opsuite_common.manager import RECONCILE_GRACE, WATCHDOG_PERIOD
from podset_manifests import CHART_SPEC as PODSET_CHART

pytestmark = pytest.mark.local_operators("runs several operator processes and kills them")

# client-go's defaults, which the manager uses (opsuite_common.leader_election).
LEASE_DURATION = 15.0
RENEW_DEADLINE = 10.0
RETRY_PERIOD = 2.0
# A standby watches the Lease between attempts (opsuite_common.leader_election): it sees every
# renewal as it happens and tries again the moment the observed lease expires or is released.
# So after a SIGKILL it leads within LEASE_DURATION of the leader's last renewal, which was at
# most RETRY_PERIOD before the kill: the issue's bound, LEASE_DURATION + RETRY_PERIOD, holds.
KILL_FAILOVER_BOUND = LEASE_DURATION + RETRY_PERIOD
# It must not take over before the lease can have expired: the leader renewed at most
# RETRY_PERIOD (plus a request) before it was killed.
KILL_FAILOVER_FLOOR = LEASE_DURATION - RETRY_PERIOD - 0.5
# A leader that steps down releases the Lease and a standby takes over at once.
RELEASE_FAILOVER_BOUND = 3.0
# On SIGTERM it first lets the reconciles in hand finish, for up to RECONCILE_GRACE.
TERM_FAILOVER_BOUND = RECONCILE_GRACE + RELEASE_FAILOVER_BOUND
TERM_EXIT_BOUND = RECONCILE_GRACE + 5.0
POLL_SLACK = 0.5  # Lease polling every 0.1 s, request latency on a 2-core machine
# A leader whose pods watch is refused (403) steps down once the stream has been silent for
# watch_dead_after(--watch-timeout): the open stream runs out within the watch timeout, then
# kopf's retries of the refused request (54 s) end its watcher. It releases the Lease and the
# standby takes over at once.
WATCH_TIMEOUT = 5.0
WATCH_DEAD_AFTER = watch_dead_after(WATCH_TIMEOUT)
WATCH_DEATH_FLOOR = WATCH_DEAD_AFTER - WATCH_TIMEOUT - 1
WATCH_DEATH_BOUND = WATCH_TIMEOUT + WATCH_DEAD_AFTER + WATCHDOG_PERIOD + RELEASE_FAILOVER_BOUND
BURST = 120  # replicas a leader is creating when it is stopped

LEASE_GROUP, LEASE_VERSION = "coordination.k8s.io", "v1"
OPERATOR_UA = re.compile(r"^podset-operator/\S+ \((?P<identity>[^)]+)\)")
MEASUREMENTS = ROOT / ".local" / "measurements" / "leader-failover.json"


@pytest.fixture
def lease(cluster: Cluster, api: client.ApiClient, namespace: str) -> Iterator[tuple[str, str]]:
    """(namespace, name) of the Lease: the one the chart's RBAC allows when the operator runs
    as its chart's ServiceAccount (deleted afterwards), else a new one in the test namespace."""
    if "podset-operator" not in cluster.operator_kubeconfigs:
        yield namespace, f"podset-e2e-{uuid.uuid4().hex[:8]}"
        return
    yield RELEASE_NAMESPACE, PODSET_CHART.name
    with contextlib.suppress(ApiException):
        client.CoordinationV1Api(api).delete_namespaced_lease(PODSET_CHART.name, RELEASE_NAMESPACE)


@pytest.fixture
def leases(api: client.ApiClient, lease: tuple[str, str]) -> Leases:
    return Leases(api, *lease)


@pytest.fixture
def fleet(
    cluster: Cluster, podset_crd: None, namespace: str, lease: tuple[str, str], tmp_path: Path
) -> Iterator[Fleet]:
    fleet = Fleet(cluster, namespace, lease, tmp_path)
    yield fleet
    fleet.stop_all()


def audit_log_or_skip(cluster: Cluster) -> Path:
    """The audit log; skips the rest of the test where it cannot be read."""
    if cluster.audit_log is None:
        pytest.skip(f"needs the cluster's audit log (E2E_AUDIT_LOG); the cluster is {cluster.kind}")
    return cluster.audit_log


class Fleet:
    """podset-operator processes serving the test namespace, campaigning for one Lease."""

    def __init__(
        self, cluster: Cluster, namespace: str, lease: tuple[str, str], log_dir: Path
    ) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.lease_namespace, self.lease_id = lease
        self.log_dir = log_dir
        self.procs: dict[str, OperatorProcess] = {}

    def start(self, pod_name: str, *args: str, kubeconfig: Path | None = None) -> OperatorProcess:
        env = operator_env(self.cluster, "podset-operator", POD_NAME=pod_name)
        if kubeconfig is not None:
            env["KUBECONFIG"] = str(kubeconfig)
        proc = OperatorProcess(
            "podset-operator",
            [
                "--leader-elect",
                f"--leader-election-namespace={self.lease_namespace}",
                f"--leader-election-id={self.lease_id}",
                f"--namespace={self.namespace}",
                *args,
            ],
            self.log_dir / f"podset-operator-{pod_name}.log",
            env,
        ).start()
        self.procs[pod_name] = proc
        return proc

    def stop_all(self) -> None:
        for proc in self.procs.values():
            proc.stop()

    def logs(self) -> str:
        return "\n".join(
            f"--- {name} (alive={proc.alive()}):\n{proc.log_tail(25)}"
            for name, proc in self.procs.items()
        )


class Leases:
    """The test's Lease as plain JSON (the generated model mangles MicroTime)."""

    def __init__(self, api: client.ApiClient, namespace: str, name: str) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.namespace = namespace
        self.name = name

    def get(self) -> dict[str, Any] | None:
        try:
            lease: dict[str, Any] = self.custom.get_namespaced_custom_object(
                LEASE_GROUP, LEASE_VERSION, self.namespace, "leases", self.name
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return lease

    def holder(self) -> str:
        lease = self.get()
        return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")

    def replace(self, lease: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self.custom.replace_namespaced_custom_object(
            LEASE_GROUP, LEASE_VERSION, self.namespace, "leases", self.name, lease
        )
        return result


def start_burst(podsets: PodSets) -> None:
    """Scale PodSet web to BURST and return once 20 of its pods exist: creates are in flight."""
    podsets.patch("web", {"spec": {"replicas": BURST}})
    wait_until(
        lambda: len(podsets.pods("app=web")),
        lambda n: n >= 20,
        timeout=30,
        interval=0.05,
        what="the burst under way",
    )


def wait_holder(leases: Leases, wanted: set[str], timeout: float) -> tuple[str, float]:
    """Poll the Lease every 0.1 s until its holder is one of ``wanted``: (holder, wall time)."""
    holder = wait_until(
        leases.holder, lambda h: h in wanted, timeout=timeout, interval=0.1, what=f"{wanted}"
    )
    return holder, time.time()


def watch_handover(
    leases: Leases, proc: OperatorProcess, old: str, new: str, timeout: float
) -> dict[str, float]:
    """Poll every 0.05 s after stopping ``old``: when the Lease stopped naming it ("released"),
    when ``proc`` exited ("exited") and when the Lease named ``new`` (key ``new``)."""
    seen: dict[str, float] = {}
    deadline = time.monotonic() + timeout
    while len(seen) < 3 and time.monotonic() < deadline:
        now = time.time()
        if "exited" not in seen and not proc.alive():
            seen["exited"] = now
        if "released" not in seen or new not in seen:
            holder = leases.holder()
            if holder != old:
                seen.setdefault("released", now)
            if holder == new:
                seen[new] = now
        time.sleep(0.05)
    assert len(seen) == 3, f"after {timeout} s saw only {seen}"
    return seen


def master_status(proc: OperatorProcess, lease_id: str) -> float | None:
    """leader_election_master_status{name=lease_id} scraped from the process."""
    pattern = re.compile(
        r"^leader_election_master_status\{name=\"" + re.escape(lease_id) + r"\"\} (\S+)$",
        re.MULTILINE,
    )
    match = pattern.search(proc.metrics())
    return float(match.group(1)) if match else None


def parse_time(stamp: str) -> float:
    """An RFC 3339 (Micro)Time from the API as a Unix timestamp."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone(UTC).timestamp()


def namespace_audit_events(audit_log: Path, namespace: str) -> Iterator[dict[str, Any]]:
    """Audit events about objects in ``namespace`` (rotated files included).

    Like ``audit_events`` but only lines naming the namespace are parsed: the shared log
    grows to hundreds of MB over a suite run.
    """
    needle = json.dumps({"namespace": namespace}, separators=(",", ":"))[1:-1]
    for path in sorted(audit_log.parent.glob(audit_log.stem + "*" + audit_log.suffix)):
        with path.open() as lines:
            for line in lines:
                if needle not in line:
                    continue
                try:
                    event: dict[str, Any] = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line being written
                if (event.get("objectRef") or {}).get("namespace") == namespace:
                    yield event


def operator_writes(audit_log: Path, namespaces: set[str], lease_id: str) -> list[dict[str, Any]]:
    """Completed writes by podset-operator processes in ``namespaces``, the Lease marked.

    Each: identity, verb, resource, name, code, received and completed (Unix time).
    """
    writes = []
    events = itertools.chain.from_iterable(
        namespace_audit_events(audit_log, ns) for ns in sorted(namespaces)
    )
    for event in events:
        ref = event.get("objectRef") or {}
        if event.get("verb") not in WRITE_VERBS:
            continue
        if event.get("stage") != "ResponseComplete":
            continue
        ua = OPERATOR_UA.match(event.get("userAgent") or "")
        if ua is None:
            continue
        writes.append(
            {
                "identity": ua.group("identity"),
                "verb": event["verb"],
                "resource": ref.get("resource"),
                "subresource": ref.get("subresource"),
                "name": ref.get("name"),
                "code": (event.get("responseStatus") or {}).get("code"),
                "received": parse_time(event["requestReceivedTimestamp"]),
                "completed": parse_time(event["stageTimestamp"]),
                "is_lease": ref.get("resource") == "leases" and ref.get("name") == lease_id,
            }
        )
    return writes


def assert_answered_before_release(writes: list[dict[str, Any]], identity: str) -> float:
    """Every write of ``identity`` was answered before the API server received its release of
    the Lease (its last successful Lease write): the fence let nothing leave after leadership
    ended and the writes in flight were drained first. The release's receipt time."""
    mine = [w for w in writes if w["identity"] == identity]
    released: float = max(w["received"] for w in mine if w["is_lease"] and w["code"] == 200)
    late = [w for w in mine if not w["is_lease"] and w["completed"] >= released]
    assert not late, f"{identity} wrote after releasing the Lease at {released}: {late}"
    return released


def fence_log(proc: OperatorProcess) -> str:
    """The write fence's log lines: when it closed, how many writes were in flight, refused."""
    return "\n".join(
        line
        for line in proc.log_path.read_text(errors="replace").splitlines()
        if "opsuite_common.fence" in line
    )


def fence_closed(proc: OperatorProcess) -> tuple[float, int]:
    """When ``proc``'s write fence closed (Unix time, from its log) and how many writes it had
    in flight then."""
    pattern = re.compile(
        r"^(?P<at>\S+ \S+) INFO +opsuite_common\.fence: "
        r"write fence closed.*\((?P<n>\d+) in flight\)$",
        re.MULTILINE,
    )
    match = pattern.search(proc.log_path.read_text(errors="replace"))
    assert match is not None, proc.log_tail()
    at = datetime.strptime(match.group("at"), "%Y-%m-%d %H:%M:%S,%f").timestamp()
    return at, int(match.group("n"))


def own_identity(api: client.ApiClient, cluster: Cluster, namespace: str, name: str) -> Path:
    """A ServiceAccount ``name`` with a Role ``name`` of its own in ``namespace`` holding what
    the operator needs there (the chart ClusterRole's rules, and Leases), so that a test can
    revoke some of it for one process alone: its kubeconfig. Nothing cluster-scoped."""
    rbac = client.RbacAuthorizationV1Api(api)
    rules = [
        api.sanitize_for_serialization(rule)
        for rule in rbac.read_cluster_role(PODSET_CHART.name).rules or []
    ]
    rules.append(
        {
            "apiGroups": [LEASE_GROUP],
            "resources": ["leases"],
            "verbs": ["create", "get", "update", "watch"],
        }
    )
    client.CoreV1Api(api).create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    rbac.create_namespaced_role(namespace, {"metadata": {"name": name}, "rules": rules})
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
    )
    return token_kubeconfig(cluster, api, namespace, name)


def revoke_pods(api: client.ApiClient, namespace: str, role: str) -> None:
    """Take every permission on pods out of ``role``."""
    rbac = client.RbacAuthorizationV1Api(api)
    current = rbac.read_namespaced_role(role, namespace)
    kept = [
        api.sanitize_for_serialization(r)
        for r in current.rules
        if "pods" not in (r.resources or [])
    ]
    rbac.patch_namespaced_role(role, namespace, {"rules": kept})


def record_measurements(run: dict[str, Any]) -> None:
    """Write the latest run, with the earlier ones, to .local/measurements/leader-failover.json."""
    try:
        history = list(json.loads(MEASUREMENTS.read_text()).get("history", []))
    except (OSError, ValueError, AttributeError):
        history = []
    history = [*history, run][-20:]
    MEASUREMENTS.parent.mkdir(parents=True, exist_ok=True)
    summary = {
        "lease": {
            "leaseDurationSeconds": LEASE_DURATION,
            "renewDeadlineSeconds": RENEW_DEADLINE,
            "retryPeriodSeconds": RETRY_PERIOD,
        },
        "sigkill_failover_bound_seconds": KILL_FAILOVER_BOUND,
        "sigterm_failover_bound_seconds": TERM_FAILOVER_BOUND,
        "latest": run,
        "history": history,
    }
    MEASUREMENTS.write_text(json.dumps(summary, indent=2) + "\n")


def test_one_leader_reconciles_and_fails_over(
    cluster: Cluster,
    api: client.ApiClient,
    namespace: str,
    fleet: Fleet,
    leases: Leases,
    podsets: PodSets,
) -> None:
    started = time.time()  # the Lease may be shared with earlier tests (and runs)
    intervals: dict[str, list[float]] = {}  # identity -> [start, end] of its leadership

    def lead_started(identity: str) -> None:
        lease = leases.get()
        assert lease is not None
        assert lease["spec"]["holderIdentity"] == identity
        intervals[identity] = [parse_time(lease["spec"]["acquireTime"]), float("inf")]

    # Two candidates: exactly one holds the Lease; both are ready; the gauge tells them apart.
    procs = {"a": fleet.start("a"), "b": fleet.start("b")}
    first, _ = wait_holder(leases, {"a", "b"}, timeout=60)
    second = "b" if first == "a" else "a"
    lead_started(first)
    for proc in procs.values():
        proc.wait_ready()  # the standby too
    wait_until(
        lambda: (
            master_status(procs[first], leases.name),
            master_status(procs[second], leases.name),
        ),
        lambda s: s == (1.0, 0.0),
        timeout=10,
        what="leader_election_master_status 1 on the leader, 0 on the standby",
    )
    assert leases.holder() == first

    # The leader reconciles.
    podsets.create(podset("web", 2))
    podsets.wait_running("app=web", 2)
    podsets.wait_status("web", replicas=2, readyReplicas=2)

    # SIGKILL: nothing is released; the standby takes over once the lease has expired.
    killed = procs[first].process
    assert killed is not None
    killed_at = time.time()
    killed.kill()
    _, took_over_at = wait_holder(leases, {second}, timeout=KILL_FAILOVER_BOUND + 15)
    kill_failover = took_over_at - killed_at
    # A process cannot send once killed, but a write it sent just before may reach the API
    # server after: for UNACKNOWLEDGED_TIMEOUT at most, its connection then drops the bytes
    # (#20). The ordering check at the end still needs all of them before the next leader's.
    intervals[first][1] = killed_at + UNACKNOWLEDGED_TIMEOUT
    lead_started(second)
    print(f"\nSIGKILL failover: {kill_failover:.2f} s ({first} -> {second})")
    assert killed.wait(timeout=10) == -signal.SIGKILL
    assert KILL_FAILOVER_FLOOR <= kill_failover <= KILL_FAILOVER_BOUND + POLL_SLACK, fleet.logs()
    wait_until(
        lambda: master_status(procs[second], leases.name), lambda s: s == 1.0, timeout=10, what="1"
    )
    podsets.patch("web", {"spec": {"replicas": 3}})
    podsets.wait_running("app=web", 3)
    podsets.wait_status("web", replicas=3, readyReplicas=3)

    # SIGTERM: the leader stops and releases the lease; the third candidate leads at once.
    procs["c"] = fleet.start("c")
    procs["c"].wait_ready()
    wait_until(
        lambda: master_status(procs["c"], leases.name), lambda s: s == 0.0, timeout=10, what="0"
    )
    assert leases.holder() == second
    # Stopped in the middle of a burst of creates: the writes in flight must be answered
    # before the Lease is released, and none may leave after (checked in the audit log below).
    start_burst(podsets)
    termed_at = time.time()
    procs[second].signal(signal.SIGTERM)
    seen = watch_handover(leases, procs[second], second, "c", timeout=30)
    intervals[second][1] = seen["released"]
    lead_started("c")
    code = procs[second].process.returncode
    exited_after = seen["exited"] - termed_at
    term_release = seen["released"] - termed_at
    term_failover = seen["c"] - termed_at
    release_to_leader = seen["c"] - seen["released"]
    print(
        f"SIGTERM failover: {term_failover:.2f} s ({second} -> c; lease released after "
        f"{term_release:.2f} s, {second} exited {code} after {exited_after:.2f} s, c leading "
        f"{release_to_leader:.2f} s after the release)"
    )
    assert code == 0, fleet.logs()
    assert exited_after <= TERM_EXIT_BOUND, fleet.logs()
    assert term_failover <= TERM_FAILOVER_BOUND, fleet.logs()
    print(fence_log(procs[second]))
    podsets.patch("web", {"spec": {"replicas": 1}})
    podsets.wait_running("app=web", 1, timeout=120)
    podsets.wait_status("web", replicas=1, readyReplicas=1, timeout=120)

    record_measurements(
        {
            "measured_at": datetime.now(UTC).isoformat(),
            "sigkill_failover_seconds": round(kill_failover, 2),
            "sigterm_failover_seconds": round(term_failover, 2),
            "sigterm_lease_released_after_seconds": round(term_release, 2),
            "sigterm_release_to_new_leader_seconds": round(release_to_leader, 2),
            "sigterm_exit_seconds": round(exited_after, 2),
        }
    )

    # At no moment do two processes both act: every write falls in its writer's leadership.
    assert procs["c"].stop() == 0, fleet.logs()
    intervals["c"][1] = time.time()
    audit_log = audit_log_or_skip(cluster)
    flush_audit_log(cluster, api)
    all_writes = [
        w
        for w in operator_writes(audit_log, {namespace, leases.namespace}, leases.name)
        if w["received"] >= started
    ]
    for identity in (second, "c"):  # stopped with SIGTERM: released the Lease
        assert_answered_before_release(all_writes, identity)
    writes = [w for w in all_writes if not w["is_lease"]]
    by_identity: dict[str, list[dict[str, Any]]] = {}
    for w in writes:
        by_identity.setdefault(w["identity"], []).append(w)
    assert set(by_identity) == {first, second, "c"}, {k: len(v) for k, v in by_identity.items()}
    spans = {}
    for identity, ws in by_identity.items():
        start, end = intervals[identity]
        outside = [w for w in ws if not start <= w["received"] <= end]
        assert not outside, f"{identity} wrote outside its leadership {start}..{end}: {outside}"
        spans[identity] = (min(w["received"] for w in ws), max(w["completed"] for w in ws))
    ordered = sorted(spans.items(), key=lambda item: item[1][0])
    for (one, (_, one_end)), (other, (other_start, _)) in itertools.pairwise(ordered):
        assert one_end < other_start, f"writes of {one} and {other} overlap: {spans}"


def test_leader_exits_when_its_lease_is_taken(
    cluster: Cluster,
    api: client.ApiClient,
    namespace: str,
    fleet: Fleet,
    leases: Leases,
    podsets: PodSets,
) -> None:
    started = time.time()  # the Lease may be shared with earlier tests (and runs)
    leader = fleet.start("a")
    wait_holder(leases, {"a"}, timeout=60)
    leader.wait_ready()
    podsets.create(podset("web", 2))
    podsets.wait_running("app=web", 2)
    podsets.wait_status("web", replicas=2, readyReplicas=2)
    # The lease is taken in the middle of a burst of creates.
    start_burst(podsets)

    # Take the lease with the current resourceVersion, under a User-Agent of our own.
    with cluster.api_client() as thief_api:
        thief_api.user_agent = "e2e-lease-thief"
        thief = Leases(thief_api, leases.namespace, leases.name)

        def take() -> dict[str, Any]:
            lease = thief.get()
            assert lease is not None
            now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            lease["spec"].update(
                holderIdentity="intruder",
                acquireTime=now,
                renewTime=now,
                leaseTransitions=int(lease["spec"].get("leaseTransitions") or 0) + 1,
            )
            return thief.replace(lease)  # 409 if the leader renewed in between: try again

        wait_until(take, lambda _: True, timeout=10, interval=0.1, what="the lease taken")
    taken_at = time.time()
    code = wait_exit(leader, timeout=RENEW_DEADLINE + RETRY_PERIOD)
    exited_after = time.time() - taken_at
    print(f"\nlease taken: leader exited {code} after {exited_after:.2f} s")
    assert code == 1, leader.log_tail()
    assert "leader election lost" in leader.log_path.read_text()
    assert leases.holder() == "intruder", "the old leader must not take the lease back"

    audit_log = audit_log_or_skip(cluster)
    flush_audit_log(cluster, api)
    takeover = [
        e
        for e in namespace_audit_events(audit_log, leases.namespace)
        if e.get("userAgent") == "e2e-lease-thief"
        and parse_time(e["requestReceivedTimestamp"]) >= started
        and e.get("verb") == "update"
        and e.get("stage") == "ResponseComplete"
        and (e.get("responseStatus") or {}).get("code") == 200
    ]
    assert len(takeover) == 1, takeover
    taken = parse_time(takeover[0]["stageTimestamp"])
    writes = [
        w
        for w in operator_writes(audit_log, {namespace, leases.namespace}, leases.name)
        if w["identity"] == "a" and w["received"] >= started
    ]
    # Of the Lease, only a renewal attempt may follow, and it must be refused.
    after = [w for w in writes if w["is_lease"] and w["completed"] > taken]
    assert all(w["code"] == 409 for w in after), after
    # The leader knew when its fence closed (its log, same clock as the API server's on this
    # machine): only the writes it had in flight then may reach the API server afterwards.
    closed_at, in_flight = fence_closed(leader)
    late = [w for w in writes if not w["is_lease"] and w["received"] > closed_at]
    print(
        f"knew {closed_at - taken:.2f} s after the takeover; {in_flight} writes in flight, "
        f"{len(late)} received after"
    )
    assert len(late) <= in_flight, late


def test_a_leader_whose_watch_dies_steps_down_and_the_standby_takes_over(
    cluster: Cluster, api: client.ApiClient, namespace: str, podset_crd: None, tmp_path: Path
) -> None:
    """#16, item 7. The leader's own ServiceAccount loses its RBAC for pods: its pods watch is
    refused when it reconnects (kopf retries, then its watcher dies) and goes silent, while
    the Lease renewals go on. Past watch_dead_after the leader steps down: it releases the
    Lease (its writes all answered first) and exits 1; the standby, whose RBAC is intact,
    takes over at once and reconciles."""
    started = time.time()
    lease_id = f"podset-e2e-{uuid.uuid4().hex[:8]}"
    fleet = Fleet(cluster, namespace, (namespace, lease_id), tmp_path)
    leases = Leases(api, namespace, lease_id)
    podsets = PodSets(api, namespace)
    flags = (f"--watch-timeout={WATCH_TIMEOUT:g}",)
    try:
        leader = fleet.start("a", *flags, kubeconfig=own_identity(api, cluster, namespace, "a"))
        wait_holder(leases, {"a"}, timeout=60)
        standby = fleet.start("b", *flags, kubeconfig=own_identity(api, cluster, namespace, "b"))
        leader.wait_ready()
        standby.wait_ready()
        podsets.create(podset("web", 2))
        podsets.wait_running("app=web", 2)
        podsets.wait_status("web", replicas=2, readyReplicas=2)

        revoke_pods(api, namespace, "a")
        revoked_at = time.time()
        _, took_over_at = wait_holder(leases, {"b"}, timeout=WATCH_DEATH_BOUND + 15)
        took_over = took_over_at - revoked_at
        code = wait_exit(leader, timeout=10)
        print(f"\nwatch death: a stepped down, b leading {took_over:.1f} s after the revocation")
        print(fence_log(leader))
        log = leader.log_path.read_text(errors="replace")
        assert code == 1, leader.log_tail()
        dead = f"watch dead (silent for over {WATCH_DEAD_AFTER:.0f} s): pods in {namespace}"
        assert dead in log, log[-3000:]
        assert "released lease" in log, leader.log_tail()
        assert WATCH_DEATH_FLOOR <= took_over <= WATCH_DEATH_BOUND + POLL_SLACK, fleet.logs()

        podsets.patch("web", {"spec": {"replicas": 3}})
        podsets.wait_running("app=web", 3)
        podsets.wait_status("web", replicas=3, readyReplicas=3)
        assert standby.alive()
    finally:
        fleet.stop_all()

    audit_log = audit_log_or_skip(cluster)
    flush_audit_log(cluster, api)
    writes = [
        w for w in operator_writes(audit_log, {namespace}, lease_id) if w["received"] >= started
    ]
    released = assert_answered_before_release(writes, "a")
    assert not [
        w for w in writes if w["identity"] == "b" and not w["is_lease"] and w["received"] < released
    ]
