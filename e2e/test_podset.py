"""PodSet behaviour on a real API server, with kwok making pods Running."""

from __future__ import annotations

import json
import os
import random
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException
from prometheus_client.parser import text_string_to_metric_families

from e2e.cluster import ROOT, WRITE_VERBS, Cluster, wait_until
from e2e.configmapsync_support import metric_value
from e2e.operators import OperatorHandle
from e2e.podset_support import (
    GROUP,
    PLURAL,
    VERSION,
    PodCounter,
    PodSets,
    condition,
    podset,
    podset_events,
    start_podset_operator,
)

TEMPLATE_HASH_LABEL = "opsuite.dev/pod-template-hash"
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
OVERCREATE_MEASUREMENTS = ROOT / ".local" / "measurements" / "podset-overcreate.json"


@pytest.mark.smoke
def test_scale_up_down_and_garbage_collection(
    cluster: Cluster, podset_op: OperatorHandle, podsets: PodSets, namespace: str
) -> None:
    reconciles_before = _successful_reconciles(podset_op)
    podsets.create(podset("web", 3))
    pods = podsets.wait_running("app=web", 3)
    for pod in pods:
        assert pod.metadata.generate_name == "web-"
        (ref,) = pod.metadata.owner_references
        assert (ref.kind, ref.name, ref.controller, ref.block_owner_deletion) == (
            "PodSet",
            "web",
            True,
            True,
        )
        assert "opsuite.dev/pod-template-hash" in pod.metadata.labels
    ps = podsets.wait_status(
        "web", replicas=3, readyReplicas=3, availableReplicas=3, updatedReplicas=3
    )
    assert sorted(ps["status"]["podNames"]) == sorted(p.metadata.name for p in pods)
    assert condition(ps, "Ready")["status"] == "True"
    assert condition(ps, "Ready")["observedGeneration"] == ps["metadata"]["generation"]
    assert condition(ps, "Degraded")["status"] == "False"

    # kubectl scale goes through the scale subresource, which reports the selector for HPA.
    cluster.kubectl("scale", f"{PLURAL}.{GROUP}/web", "-n", namespace, "--replicas=5")
    podsets.wait_running("app=web", 5)
    scale = json.loads(
        cluster.kubectl(
            "get", "--raw", f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}/web/scale"
        )
    )
    assert scale["spec"]["replicas"] == 5
    assert scale["status"]["selector"] == "apps.opsuite.dev/podset=web"
    cluster.kubectl("scale", f"{PLURAL}.{GROUP}/web", "-n", namespace, "--replicas=0")
    podsets.wait_running("app=web", 0)
    podsets.wait_status("web", replicas=0, readyReplicas=0)
    cluster.kubectl("scale", f"{PLURAL}.{GROUP}/web", "-n", namespace, "--replicas=2")
    podsets.wait_running("app=web", 2)

    # Deleting the PodSet garbage-collects its pods (kube-controller-manager, ownerReferences).
    podsets.delete("web")
    wait_until(lambda: podsets.pods("app=web"), lambda p: not p, timeout=60, what="pods collected")

    assert _successful_reconciles(podset_op) > reconciles_before


def _successful_reconciles(operator: OperatorHandle) -> float:
    """controller_runtime_reconcile_total of successful PodSet reconciles (the counter exists
    at 0 from the start, so a test asserts that it grew)."""
    labels = {"controller": "podset", "result": "success"}
    return metric_value(operator.metrics(), "controller_runtime_reconcile_total", labels)


def test_deleted_and_failed_pods_are_replaced(podset_op: OperatorHandle, podsets: PodSets) -> None:
    podsets.create(podset("replace", 3))
    pods = podsets.wait_running("app=replace", 3)
    podsets.core.delete_namespaced_pod(pods[0].metadata.name, podsets.namespace)
    failed = pods[1].metadata.name
    podsets.core.patch_namespaced_pod_status(
        failed, podsets.namespace, {"status": {"phase": "Failed"}}
    )
    survivors = wait_until(
        lambda: podsets.active_pods("app=replace"),
        lambda ps: (
            len(ps) == 3
            and all(p.status.phase == "Running" for p in ps)
            and pods[0].metadata.name not in {p.metadata.name for p in ps}
            and failed not in {p.metadata.name for p in ps}
        ),
        timeout=60,
        what="replacements for the deleted and the Failed pod",
    )
    assert pods[2].metadata.name in {p.metadata.name for p in survivors}


def test_rolling_update_stays_within_surge(podset_op: OperatorHandle, podsets: PodSets) -> None:
    strategy = {
        "updateStrategy": {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
        }
    }
    podsets.create(podset("roll", 4, **strategy))
    old = {p.metadata.name for p in podsets.wait_running("app=roll", 4)}
    podsets.patch(
        "roll",
        {"spec": {"template": {"metadata": {"annotations": {"version": "2"}}}}},
    )
    highest = 0

    def probe() -> list[client.V1Pod]:
        nonlocal highest
        pods = podsets.active_pods("app=roll")
        highest = max(highest, len(pods))
        return pods

    wait_until(
        probe,
        lambda ps: (
            len(ps) == 4
            and all(p.status.phase == "Running" for p in ps)
            and not old & {p.metadata.name for p in ps}
        ),
        timeout=120,
        interval=0.1,
        what="all 4 pods replaced by the new template",
    )
    assert highest <= 5, f"observed {highest} active pods, more than replicas + maxSurge"
    ps = podsets.wait_status("roll", replicas=4, updatedReplicas=4, readyReplicas=4)
    assert condition(ps, "Progressing")["status"] == "False"


def test_adoption_and_release(podset_op: OperatorHandle, podsets: PodSets) -> None:
    orphan = {
        "metadata": {"name": "orphan", "labels": {"app": "adopt"}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }
    podsets.core.create_namespaced_pod(podsets.namespace, orphan)
    # OnDelete keeps an adopted pod although it is not from the current template (RollingUpdate
    # would replace it).
    podsets.create(
        podset(
            "adopt",
            2,
            selector={"matchLabels": {"app": "adopt"}},
            updateStrategy={"type": "OnDelete"},
        )
    )
    pods = podsets.wait_running("app=adopt", 2)
    owners = {p.metadata.name: [r.name for r in p.metadata.owner_references or []] for p in pods}
    assert owners.get("orphan") == ["adopt"], owners  # adopted instead of creating two
    # A pod whose labels stop matching is released (kept, no longer owned) and replaced.
    podsets.core.patch_namespaced_pod(
        "orphan", podsets.namespace, {"metadata": {"labels": {"app": "gone"}}}
    )
    released = wait_until(
        lambda: podsets.core.read_namespaced_pod("orphan", podsets.namespace),
        lambda p: not p.metadata.owner_references,
        timeout=60,
        what="the relabelled pod released",
    )
    assert released.metadata.deletion_timestamp is None
    podsets.wait_running("app=adopt", 2)


def test_rejected_template_sets_degraded_and_others_keep_working(
    podset_op: OperatorHandle, podsets: PodSets
) -> None:
    bad = podset("bad", 2)
    bad["spec"]["template"]["spec"]["containers"][0]["name"] = "Not_A_DNS_Label"
    podsets.create(bad)
    podsets.create(podset("good", 2))
    ps = wait_until(
        lambda: podsets.get("bad"),
        lambda p: condition(p, "Degraded").get("status") == "True",
        timeout=60,
        what="Degraded on the PodSet whose pods are rejected",
    )
    degraded = condition(ps, "Degraded")
    assert degraded["reason"] == "FailedCreate"
    assert "Not_A_DNS_Label" in degraded["message"]
    podsets.wait_running("app=good", 2)
    assert podset_op.alive()

    # The failure is also an Event on the PodSet, as the ReplicaSet controller posts it, and
    # the operator keeps retrying (with backoff): the same Event's count grows.
    def failed_creates() -> list[client.CoreV1Event]:
        events = podset_events(podsets.core.api_client, podsets.namespace, "bad")
        return [e for e in events if e.reason == "FailedCreate"]

    (event,) = wait_until(failed_creates, bool, timeout=30, what="a FailedCreate Event")
    assert event.type == "Warning"
    assert event.message.startswith("Error creating: ")
    assert "Not_A_DNS_Label" in event.message
    assert event.involved_object.uid == ps["metadata"]["uid"]
    assert event.source.component == event.reporting_component == "podset-operator"
    assert event.reporting_instance
    wait_until(
        failed_creates,
        lambda events: len(events) == 1 and events[0].count >= 3,
        timeout=30,
        what="the FailedCreate Event counting retries",
    )
    good = podset_events(podsets.core.api_client, podsets.namespace, "good")
    assert {e.reason for e in good} == {"SuccessfulCreate"}, [(e.reason, e.message) for e in good]
    assert all(e.type == "Normal" and e.message.startswith("Created pod: good-") for e in good)


SELECTOR_UPDATES = [
    ("changed", {"matchLabels": {"app": "immutable"}}, {"matchLabels": {"tier": "web"}}),
    ("removed", {"matchLabels": {"app": "immutable"}}, None),
    ("added", None, {"matchLabels": {"app": "immutable"}}),
]


@pytest.mark.parametrize(
    ("case", "before", "after"), SELECTOR_UPDATES, ids=[c[0] for c in SELECTOR_UPDATES]
)
def test_selector_is_immutable(
    podset_crd: None,
    podsets: PodSets,
    case: str,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
) -> None:
    spec = {"selector": before} if before is not None else {}
    podsets.create(podset("immutable", 1, labels={"app": "immutable", "tier": "web"}, **spec))
    with pytest.raises(ApiException) as rejected:
        podsets.patch("immutable", {"spec": {"selector": after}})
    assert rejected.value.status == 422, case
    assert "spec.selector: Invalid value" in (rejected.value.body or ""), rejected.value.body
    assert "selector is immutable" in (rejected.value.body or ""), rejected.value.body
    # Changing anything else is fine.
    podsets.patch("immutable", {"spec": {"replicas": 2}})


def _kwok_node(core: client.CoreV1Api) -> str:
    """A kwok node the test's pods can go to: untainted (a benchmark's nodes are tainted)."""
    for node in core.list_node().items:
        tainted = any(t.effect in ("NoSchedule", "NoExecute") for t in node.spec.taints or ())
        kwok = (node.metadata.annotations or {}).get("kwok.x-k8s.io/node") == "fake"
        if kwok and not tainted and node.metadata.deletion_timestamp is None:
            return str(node.metadata.name)
    pytest.skip("needs kwok nodes: a kubelet would set a pod's Ready condition back to True")


def _active_names(podsets: PodSets, selector: str) -> set[str]:
    return {p.metadata.name for p in podsets.active_pods(selector)}


@pytest.mark.local_operators("stops the operator to stage pods, then starts a new one")
def test_scale_down_deletes_in_replicaset_order(
    cluster: Cluster, podset_crd: None, podsets: PodSets, namespace: str, tmp_path: Path
) -> None:
    """Unscheduled < Pending < not ready < lower deletion cost < newest, on real pods."""
    core = podsets.core
    node = _kwok_node(core)
    selector = "app=order"
    body = podset("order", 4)
    # One node for every running pod, so that colocation (ranked before age) is a tie.
    body["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    operator = start_podset_operator(cluster, namespace, tmp_path)
    try:
        operator.wait_ready()
        podsets.create(body)
        made = sorted(p.metadata.name for p in podsets.wait_running(selector, 4))
        template_labels = dict(podsets.pods(selector)[0].metadata.labels)
    finally:
        code = operator.stop()  # also when a wait failed: no operator outlives the test
    assert code == 0, f"operator exited {code}; log:\n{operator.log_tail()}"

    # With the operator down, give pods the states to rank. Pods the PodSet adopts (same
    # labels, template hash included) stand in for pods it could not schedule or start.
    not_ready, low_cost, high_cost, plain = made

    def orphan(name: str, **pod_spec: Any) -> None:
        container = {"name": "main", "image": "busybox", "command": ["sleep", "3600"]}
        core.create_namespaced_pod(
            namespace,
            {
                "metadata": {"name": name, "labels": template_labels},
                "spec": {"containers": [container], **pod_spec},
            },
        )

    orphan("unscheduled", nodeSelector={"opsuite.dev/no-such-node": "true"})
    orphan("pending", nodeName="opsuite-e2e-no-such-node")  # bound, but no kubelet starts it
    time.sleep(1.1)  # creation and readiness times have one-second resolution
    orphan("newest", nodeName=node)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    ready_false = {"type": "Ready", "status": "False", "lastTransitionTime": now}
    cluster.kubectl(
        "patch",
        "pod",
        not_ready,
        "-n",
        namespace,
        "--subresource=status",
        "--type=strategic",
        "-p",
        json.dumps({"status": {"conditions": [ready_false]}}),
    )
    for name, cost in ((low_cost, "-5"), (high_cost, "100")):
        core.patch_namespaced_pod(
            name, namespace, {"metadata": {"annotations": {DELETION_COST: cost}}}
        )
    podsets.patch("order", {"spec": {"replicas": 7}})

    def states() -> dict[str, tuple[str, bool, bool]]:
        pods = podsets.pods(selector)
        return {
            p.metadata.name: (
                p.status.phase,
                bool(p.spec.node_name),
                any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or []),
            )
            for p in pods
        }

    expected_states = {
        "unscheduled": ("Pending", False, False),
        "pending": ("Pending", True, False),
        "newest": ("Running", True, True),
        not_ready: ("Running", True, False),
        low_cost: ("Running", True, True),
        high_cost: ("Running", True, True),
        plain: ("Running", True, True),
    }
    # kwok only starts Pending pods: the not-ready pod stays not ready.
    wait_until(states, lambda s: s == expected_states, timeout=60, what="the staged pod states")

    operator = start_podset_operator(cluster, namespace, tmp_path)
    operator.wait_ready()
    try:
        podsets.wait_status("order", replicas=7, readyReplicas=4)
        owned = {
            p.metadata.name
            for p in podsets.pods(selector)
            if [r.name for r in p.metadata.owner_references or []] == ["order"]
        }
        assert owned == set(expected_states), "every staged pod adopted, none deleted"
        remaining = set(expected_states)
        order = ["unscheduled", "pending", not_ready, low_cost, "newest", plain]
        for replicas, victim in zip(range(6, 0, -1), order, strict=True):
            if victim == "newest":
                # Ready times are compared on a log2 scale back from now (LogarithmicScaleDown):
                # seconds apart, "newest" and the plain pod may share a bucket and tie (then
                # the UID decides). Ready just now, it is surely in a more recent bucket.
                now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                ready_now = {"type": "Ready", "status": "True", "lastTransitionTime": now}
                cluster.kubectl(
                    "patch", "pod", "newest", "-n", namespace, "--subresource=status",
                    "--type=strategic", "-p", json.dumps({"status": {"conditions": [ready_now]}}),
                )  # fmt: skip
            podsets.patch("order", {"spec": {"replicas": replicas}})
            names = wait_until(
                lambda: _active_names(podsets, selector),
                lambda names, n=replicas: len(names) == n,
                timeout=60,
                what=f"{replicas} active pods",
            )
            remaining.discard(victim)
            assert names == remaining, (
                f"scaling to {replicas} should delete {victim}, deleted {sorted(remaining - names)}"
            )
        assert remaining == {high_cost}
    finally:
        code = operator.stop()
    assert code == 0, f"operator exited {code}; log:\n{operator.log_tail()}"


def _record_overcreate(run: dict[str, Any]) -> None:
    """Write the run, with earlier ones, to .local/measurements/podset-overcreate.json."""
    try:
        history = list(json.loads(OVERCREATE_MEASUREMENTS.read_text()).get("history", []))
    except (OSError, ValueError, AttributeError):
        history = []
    OVERCREATE_MEASUREMENTS.parent.mkdir(parents=True, exist_ok=True)
    summary = {"latest": run, "history": [*history, run][-20:]}
    OVERCREATE_MEASUREMENTS.write_text(json.dumps(summary, indent=2) + "\n")


OVERCREATE_REPLICAS = 300
OVERCREATE_RAMPS = 5
KILLS_PER_RAMP = 2


@pytest.mark.local_operators("SIGKILLs and restarts the operator process ten times")
def test_operator_killed_during_scale_up_never_over_creates(
    cluster: Cluster,
    podset_crd: None,
    api: client.ApiClient,
    podsets: PodSets,
    namespace: str,
    tmp_path: Path,
) -> None:
    """SIGKILL the operator at random points of 0->300 scale-ups, ten times: never >300 pods.

    Five scale-ups from 0 to 300, each with two SIGKILLs (and restarts) at random pod counts;
    each ends with exactly 300 pods, then goes back to 0. A watch on the namespace's pods
    records the highest count of active pods (and of all pods, terminating ones included).
    PODSET_OVERCREATE_SEED replays a run's kill points.
    """
    seed = int(os.environ.get("PODSET_OVERCREATE_SEED") or random.randrange(2**32))
    rng = random.Random(seed)
    target = OVERCREATE_REPLICAS
    podsets.create(podset("burst", 0))
    quiet = "--log-level=info"  # eleven processes' debug logs would cost more than the test
    operator = start_podset_operator(cluster, namespace, tmp_path, quiet)
    operator.wait_ready()
    ramps: list[dict[str, Any]] = []
    started = time.monotonic()
    try:
        with PodCounter(api, namespace) as pods:
            for number in range(1, OVERCREATE_RAMPS + 1):
                kill_points = sorted(rng.sample(range(target), KILLS_PER_RAMP))
                pods.reset_highest()
                ramp_start = time.monotonic()
                podsets.patch("burst", {"spec": {"replicas": target}})
                kills = []
                for kill_at in kill_points:
                    wait_until(
                        lambda: pods.active,
                        lambda n, k=kill_at: n >= k,
                        timeout=120,
                        interval=0.005,
                        what=f"{kill_at} pods before a kill",
                    )
                    kills.append(
                        {"after_pods": pods.active, "at": round(time.monotonic() - ramp_start, 1)}
                    )
                    assert operator.process is not None
                    operator.process.kill()
                    operator.process.wait()
                    operator = start_podset_operator(cluster, namespace, tmp_path, quiet)
                    operator.wait_ready()
                ps = podsets.wait_status(
                    "burst", timeout=180, replicas=target, readyReplicas=target
                )
                converged = time.monotonic()
                time.sleep(1.0)  # a late extra create would show up here
                listed = podsets.active_pods("app=burst")
                entry: dict[str, Any] = {
                    "ramp": number,
                    "kills": kills,
                    "highest_active": pods.highest_active,
                    "highest_total": pods.highest_total,
                    "end_active": len(listed),
                    "end_running": sum(p.status.phase == "Running" for p in listed),
                    "seconds_to_converge": round(converged - ramp_start, 1),
                }
                ramps.append(entry)
                assert condition(ps, "Ready")["status"] == "True", entry
                assert len(listed) == target, entry
                assert pods.highest_active <= target, entry
                scale_down = time.monotonic()
                podsets.patch("burst", {"spec": {"replicas": 0}})
                wait_until(lambda: pods.total, lambda n: n == 0, timeout=120, what="all pods gone")
                entry["seconds_to_scale_down"] = round(time.monotonic() - scale_down, 1)
    finally:
        code = operator.stop()
        kill_counts = [k["after_pods"] for r in ramps for k in r["kills"]]
        run = {
            "when": datetime.now(UTC).isoformat(timespec="seconds"),
            "cluster": cluster.kind,
            "replicas": target,
            "ramps": len(ramps),
            "kills": len(kill_counts),
            "seed": seed,
            "highest_active_pods": max((r["highest_active"] for r in ramps), default=None),
            "highest_total_pods": max((r["highest_total"] for r in ramps), default=None),
            "seconds": round(time.monotonic() - started, 1),
            "rounds": ramps,
        }
        _record_overcreate(run)
        print(
            f"\nover-create: {len(ramps)} scale-ups 0->{target}, {len(kill_counts)} SIGKILLs "
            f"(seed {seed}) after {kill_counts} pods: highest active pods "
            f"{run['highest_active_pods']}, highest including terminating "
            f"{run['highest_total_pods']}; {run['seconds']} s"
        )
    assert code == 0, f"operator exited {code}; log:\n{operator.log_tail()}"
    assert len(ramps) == OVERCREATE_RAMPS


def _replica_gauges(operator: OperatorHandle, namespace: str, name: str) -> dict[str, float]:
    values = {}
    for family in text_string_to_metric_families(operator.metrics()):
        if family.name != "opsuite_podset_replicas":
            continue
        for sample in family.samples:
            labels = sample.labels
            if labels.get("namespace") == namespace and labels.get("podset") == name:
                values[labels["kind"]] = sample.value
    return values


def test_replica_gauges_and_events_follow_the_podset(
    podset_op: OperatorHandle, podsets: PodSets, namespace: str
) -> None:
    reconciles_before = _successful_reconciles(podset_op)
    podsets.create(podset("gauged", 3))
    podsets.wait_running("app=gauged", 3)
    wait_until(
        lambda: _replica_gauges(podset_op, namespace, "gauged"),
        lambda g: g == {"desired": 3, "current": 3, "ready": 3},
        timeout=30,
        what="replica gauges 3/3/3",
    )
    podsets.patch("gauged", {"spec": {"replicas": 1}})
    podsets.wait_running("app=gauged", 1)
    wait_until(
        lambda: _replica_gauges(podset_op, namespace, "gauged"),
        lambda g: g == {"desired": 1, "current": 1, "ready": 1},
        timeout=30,
        what="replica gauges 1/1/1",
    )
    events = wait_until(
        lambda: podset_events(podsets.core.api_client, namespace, "gauged"),
        lambda es: {e.reason for e in es} == {"SuccessfulCreate", "SuccessfulDelete"},
        timeout=30,
        what="SuccessfulCreate and SuccessfulDelete Events",
    )
    deleted = [e for e in events if e.reason == "SuccessfulDelete"]
    assert sorted(e.message.removeprefix("Deleted pod: ")[:7] for e in deleted) == ["gauged-"] * 2
    assert _successful_reconciles(podset_op) > reconciles_before
    podsets.delete("gauged")
    wait_until(
        lambda: _replica_gauges(podset_op, namespace, "gauged"),
        lambda g: g == {},
        timeout=30,
        what="the gauges of the deleted PodSet removed",
    )


def _operator_writes(audit_log: Path, namespace: str) -> list[dict[str, Any]]:
    """Audit events of write requests by a podset-operator in ``namespace``."""
    marker = f'"namespace":"{namespace}"'
    writes = []
    for path in sorted(audit_log.parent.glob(audit_log.stem + "*" + audit_log.suffix)):
        with path.open() as lines:
            for line in lines:
                if marker not in line or "podset-operator/" not in line:
                    continue
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if (
                    event.get("userAgent", "").startswith("podset-operator/")
                    and event.get("verb") in WRITE_VERBS
                    and event.get("objectRef", {}).get("namespace") == namespace
                ):
                    writes.append(event)
    return writes


def _received(event: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00"))


QUIET_PODSETS = 20
QUIET_SECONDS = 60


def test_steady_state_makes_no_writes(
    cluster: Cluster, podset_op: OperatorHandle, podsets: PodSets, namespace: str
) -> None:
    """20 reconciled PodSets: no create/update/patch/delete by the operator for 60 s."""
    if cluster.audit_log is None:
        pytest.skip(f"audit log not readable on a {cluster.kind} cluster")
    audit_log = cluster.audit_log
    names = [f"quiet-{i:02d}" for i in range(QUIET_PODSETS)]
    for i, name in enumerate(names):
        podsets.create(podset(name, 1 + i % 2))
    for i, name in enumerate(names):
        replicas = 1 + i % 2
        ps = podsets.wait_status(
            name, timeout=120, replicas=replicas, readyReplicas=replicas, availableReplicas=replicas
        )
        assert condition(ps, "Ready")["status"] == "True"
    time.sleep(2)  # let the last Event writes land
    start = datetime.now(UTC)
    time.sleep(QUIET_SECONDS)
    end = datetime.now(UTC)
    time.sleep(3)  # the audit log is written in batches of up to 1 s
    writes = _operator_writes(audit_log, namespace)
    before = [w for w in writes if _received(w) < start]
    during = [w for w in writes if start <= _received(w) <= end + timedelta(seconds=1)]
    pod_creates = [
        w for w in before if w["verb"] == "create" and w["objectRef"]["resource"] == "pods"
    ]
    assert len(pod_creates) >= 30, "the audit filter should see the operator's pod creates"
    assert not during, "writes in steady state:\n" + "\n".join(
        f"{w['requestReceivedTimestamp']} {w['verb']} {w['objectRef'].get('resource')}"
        f"/{w['objectRef'].get('subresource', '')} {w['objectRef'].get('name')}"
        for w in during
    )
    assert podset_op.alive()
