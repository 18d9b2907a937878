"""What the operators claim about containers, where containers really run.

Every pod here is placed by e2e.placement on a node that runs containers (the local plane's real
node; any node on kind) and runs busybox:1.37, so Running, Ready, readiness probes, the
user a debug container runs as and the kubelet's reasons are the kubelet's, not kwok's. Few pods
(at most six at a time): the local real node has two cores.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import pytest
from kubernetes import client

from e2e.cluster import Cluster, condition, wait_until
from e2e.operators import OperatorHandle
from e2e.placement import BUSYBOX, SLEEP, is_kwok, real_pod_spec, sleeper
from e2e.poddebugger_support import Debuggers, debugger_manifest, ephemeral
from e2e.podset_support import (
    ConditionHistory,
    PodCounter,
    PodSets,
    podset,
)

TEMPLATE_HASH_LABEL = "opsuite.dev/pod-template-hash"
RESTRICTED_USER = "65532"
"""The user the restricted profile runs a debug container as when the spec names none."""
STARTING = frozenset({None, "", "ContainerCreating", "PodInitializing"})
"""Waiting reasons of a container on its way up (any other is the kubelet giving up)."""
MAX_STATE_MESSAGE = 256
"""A debuggedPods entry keeps this much of the kubelet's message."""
PULL_FAILURES = frozenset({"ErrImagePull", "ImagePullBackOff"})
MISSING_IMAGE = "docker.io/library/busybox:does-not-exist"
"""Allowed by the operator's image prefix; no registry answers for it on the local plane, none
has it on kind: the kubelet cannot pull it."""
START_FAILURES = frozenset({"RunContainerError", "StartError"})
MISSING_COMMAND = "/no/such/command"
"""Not in busybox: the runtime fails to start the container (RunContainerError)."""


# --- helpers -----------------------------------------------------------------------------------


def _ready(pod: client.V1Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def _containers_running(pod: client.V1Pod) -> bool:
    statuses = pod.status.container_statuses or []
    return bool(statuses) and all(s.state.running is not None for s in statuses)


def _describe(pods: list[client.V1Pod]) -> list[tuple[str, str, str, bool]]:
    """(name, node, phase, ready) of each pod, for failure messages."""
    return [(p.metadata.name, p.spec.node_name, p.status.phase, _ready(p)) for p in pods]


def _wait_running_and_ready(
    podsets: PodSets, selector: str, count: int, timeout: float = 120
) -> list[client.V1Pod]:
    """Exactly ``count`` active pods, each Running with its containers running and Ready."""
    return wait_until(
        lambda: podsets.active_pods(selector),
        lambda pods: (
            len(pods) == count
            and all(
                p.status.phase == "Running" and _containers_running(p) and _ready(p) for p in pods
            )
        ),
        timeout=timeout,
        what=f"{count} pods matching {selector} Running and Ready",
    )


def _assert_on_real_nodes(api: client.ApiClient, pods: list[client.V1Pod]) -> None:
    fakes = {n.metadata.name for n in client.CoreV1Api(api).list_node().items if is_kwok(n)}
    on_fakes = [p.metadata.name for p in pods if p.spec.node_name in fakes]
    assert not on_fakes, f"pods on kwok nodes, where nothing runs: {on_fakes}"


def _real_podset(api: client.ApiClient, name: str, replicas: int, **spec: Any) -> dict[str, Any]:
    body = podset(name, replicas, **spec)
    body["spec"]["template"]["spec"] = real_pod_spec(api)
    return body


# --- PodSet ------------------------------------------------------------------------------------


@pytest.mark.smoke
def test_podset_of_sleepers_runs_and_scales(
    cluster: Cluster,
    api: client.ApiClient,
    podset_op: OperatorHandle,
    podsets: PodSets,
    namespace: str,
) -> None:
    """The README's busybox-sleepers on a node that runs them: 3, then 5, then 2 pods, each time
    exactly that many Running and Ready for real."""
    selector = "app=sleepers"
    podsets.create(_real_podset(api, "sleepers", 3))
    pods = _wait_running_and_ready(podsets, selector, 3)
    _assert_on_real_nodes(api, pods)
    # A process answers inside the container: its hostname is the pod's name.
    name = pods[0].metadata.name
    hostname = cluster.kubectl("exec", name, "-n", namespace, "-c", "main", "--", "hostname")
    assert hostname.strip() == name
    podsets.wait_status("sleepers", replicas=3, readyReplicas=3, availableReplicas=3)

    for replicas in (5, 2):
        cluster.kubectl("scale", "podset/sleepers", "-n", namespace, f"--replicas={replicas}")
        pods = _wait_running_and_ready(podsets, selector, replicas)
        _assert_on_real_nodes(api, pods)
        ps = podsets.wait_status(
            "sleepers", replicas=replicas, readyReplicas=replicas, availableReplicas=replicas
        )
        assert condition(ps, "Ready")["status"] == "True", ps["status"]
        running = [p for p in podsets.pods(selector) if p.status.phase == "Running"]
        active = [p for p in running if p.metadata.deletion_timestamp is None]
        assert len(active) == replicas, _describe(running)


ROLL_REPLICAS = 4
ROLL_MAX_SURGE = 1
ROLL_MAX_UNAVAILABLE = 1
ROLL_WATCH_SECONDS = 30


def test_rolling_update_to_pods_that_never_get_ready_keeps_enough_ready(
    api: client.ApiClient, podset_op: OperatorHandle, podsets: PodSets, namespace: str
) -> None:
    """A template whose pods run but never pass their readinessProbe: for 30 s after the change,
    a watch on the pods never sees fewer than replicas - maxUnavailable of them Ready, and the
    rollout stalls as a Deployment's would (3 old Ready, 2 new not Ready)."""
    selector = "app=roll"
    strategy = {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": ROLL_MAX_SURGE, "maxUnavailable": ROLL_MAX_UNAVAILABLE},
    }
    podsets.create(_real_podset(api, "roll", ROLL_REPLICAS, updateStrategy=strategy))
    old_pods = _wait_running_and_ready(podsets, selector, ROLL_REPLICAS)
    podsets.wait_status("roll", readyReplicas=ROLL_REPLICAS, updatedReplicas=ROLL_REPLICAS)
    min_ready = ROLL_REPLICAS - ROLL_MAX_UNAVAILABLE

    with PodCounter(api, namespace) as pods:
        wait_until(lambda: pods.ready, lambda n: n == ROLL_REPLICAS, timeout=30, what="4 Ready")
        # The watch sees a drop below min_ready: two Ready pods deleted at once (what a rollout
        # that ignored maxUnavailable would do) take it to 2 until their replacements are Ready.
        pods.reset_lowest()
        for pod in old_pods[:2]:
            podsets.core.delete_namespaced_pod(pod.metadata.name, namespace)
        wait_until(lambda: pods.lowest_ready, lambda n: n < min_ready, timeout=30, what="a drop")
        old_pods = _wait_running_and_ready(podsets, selector, ROLL_REPLICAS)
        wait_until(lambda: pods.ready, lambda n: n == ROLL_REPLICAS, timeout=30, what="4 Ready")
        old_hash = old_pods[0].metadata.labels[TEMPLATE_HASH_LABEL]

        pods.reset_lowest()
        relists = pods.relists
        never_ready = {
            **sleeper(),
            "readinessProbe": {"exec": {"command": ["false"]}, "periodSeconds": 1},
        }
        podsets.patch("roll", {"spec": {"template": {"spec": {"containers": [never_ready]}}}})
        time.sleep(ROLL_WATCH_SECONDS)
        lowest, gaps = pods.lowest_ready, pods.relists - relists

    assert lowest >= min_ready, (
        f"{lowest} Ready pods at one point, fewer than replicas - maxUnavailable = {min_ready}"
    )
    assert gaps == 0, "the pod watch had to list again: it may have missed a moment"
    active = podsets.active_pods(selector)
    old = [p for p in active if p.metadata.labels[TEMPLATE_HASH_LABEL] == old_hash]
    new = [p for p in active if p.metadata.labels[TEMPLATE_HASH_LABEL] != old_hash]
    assert len(old) == min_ready, _describe(old)
    assert all(_ready(p) for p in old), _describe(old)
    # The new pods run (their container started) and are not Ready because of their probe.
    assert len(new) == ROLL_MAX_SURGE + ROLL_MAX_UNAVAILABLE, _describe(new)
    assert all(_containers_running(p) and not _ready(p) for p in new), _describe(new)
    _assert_on_real_nodes(api, active)
    ps = podsets.wait_status(
        "roll",
        replicas=ROLL_REPLICAS + ROLL_MAX_SURGE,
        readyReplicas=min_ready,
        updatedReplicas=ROLL_MAX_SURGE + ROLL_MAX_UNAVAILABLE,
    )
    assert condition(ps, "Progressing")["status"] == "True", ps["status"]
    assert condition(ps, "Ready")["status"] == "False", ps["status"]


STALL_REPLICAS = 2
STALL_DEADLINE = 10
"""progressDeadlineSeconds of the stalled rollout: short, so the test waits little."""
QUIET_SECONDS = 5
"""How long a stalled, reported rollout is watched for writes (there must be none)."""


def _progress_state(ps: dict[str, Any]) -> tuple[str, str]:
    found = condition(ps, "Progressing")
    return found.get("status", ""), found.get("reason", "")


def _seconds_between(earlier: str, later: str) -> float:
    def parse(stamp: str) -> datetime:
        return datetime.fromisoformat(stamp)

    return (parse(later) - parse(earlier)).total_seconds()


def test_stalled_rollout_is_reported_after_its_progress_deadline_and_recovers(
    api: client.ApiClient, podset_op: OperatorHandle, podsets: PodSets, namespace: str
) -> None:
    """A rollout to pods that never get ready, with progressDeadlineSeconds 10: Progressing
    turns False (ProgressDeadlineExceeded) about 10 s after the last progress although no pod
    event comes (the operator wakes itself), naming the counts; the PodSet is not written while
    it stays stalled; fixing the template makes it progress again (True) and complete."""
    name, selector = "stall", "app=stall"
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    podsets.create(
        _real_podset(
            api,
            name,
            STALL_REPLICAS,
            updateStrategy=strategy,
            progressDeadlineSeconds=STALL_DEADLINE,
        )
    )
    _wait_running_and_ready(podsets, selector, STALL_REPLICAS)
    ps = podsets.wait_status(name, readyReplicas=STALL_REPLICAS, updatedReplicas=STALL_REPLICAS)
    assert _progress_state(ps) == ("False", "Complete"), ps["status"]

    with ConditionHistory(api, namespace, name) as history:
        never_ready = {
            **sleeper(),
            "readinessProbe": {"exec": {"command": ["false"]}, "periodSeconds": 1},
        }
        started = time.monotonic()
        podsets.patch(name, {"spec": {"template": {"spec": {"containers": [never_ready]}}}})
        stalled = wait_until(
            lambda: podsets.get(name),
            lambda o: _progress_state(o) == ("False", "ProgressDeadlineExceeded"),
            timeout=STALL_DEADLINE + 60,
            what="Progressing False, ProgressDeadlineExceeded",
        )
        waited = time.monotonic() - started
        status = stalled["status"]
        reported = condition(stalled, "Progressing")
        # One new pod (maxSurge 1) that runs and is never Ready; the old two stay available.
        assert (status["replicas"], status["updatedReplicas"]) == (3, 1), status
        assert status["availableReplicas"] == STALL_REPLICAS, status
        assert "1/2 updated, 2/2 available" in reported["message"], reported
        since_progress = _seconds_between(
            status["lastProgressTime"], reported["lastTransitionTime"]
        )
        assert STALL_DEADLINE <= since_progress <= STALL_DEADLINE + 5, (since_progress, status)
        assert waited >= STALL_DEADLINE - 1, waited

        # Stalled and reported: a steady state, nothing is written.
        version = stalled["metadata"]["resourceVersion"]
        time.sleep(QUIET_SECONDS)
        assert podsets.get(name)["metadata"]["resourceVersion"] == version

        ready_now = {
            **sleeper(),
            "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1},
        }
        podsets.patch(name, {"spec": {"template": {"spec": {"containers": [ready_now]}}}})
        pods = _wait_running_and_ready(podsets, selector, STALL_REPLICAS)
        done = podsets.wait_status(
            name,
            replicas=STALL_REPLICAS,
            readyReplicas=STALL_REPLICAS,
            availableReplicas=STALL_REPLICAS,
            updatedReplicas=STALL_REPLICAS,
        )
        wait_until(
            lambda: history.seen,
            lambda seen: seen[-1:] == [("False", "Complete")],
            timeout=30,
            what="Progressing False, Complete",
        )
        seen = history.seen
    _assert_on_real_nodes(api, pods)
    assert _progress_state(done) == ("False", "Complete"), done["status"]
    assert condition(done, "Ready")["status"] == "True", done["status"]
    # Complete, True while rolling, False at the deadline, True again once fixed, Complete.
    rolling, exceeded, complete = (
        ("True", "RollingUpdate"),
        ("False", "ProgressDeadlineExceeded"),
        ("False", "Complete"),
    )
    assert seen.count(exceeded) == 1, seen
    at = seen.index(exceeded)
    assert seen[0] == complete, seen
    assert rolling in seen[1:at], seen
    assert rolling in seen[at + 1 :], seen
    assert seen[-1] == complete, seen


# --- PodDebugger -------------------------------------------------------------------------------


def _debug_status(pod: client.V1Pod, container: str) -> client.V1ContainerStatus | None:
    for status in pod.status.ephemeral_container_statuses or []:
        if status.name == container:
            return status
    return None


def _entries(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {d["pod"]: d for d in obj.get("status", {}).get("debuggedPods") or []}


@pytest.mark.smoke
def test_debug_container_runs_as_the_restricted_user(
    cluster: Cluster, debuggers: Debuggers, namespace: str
) -> None:
    """A PodDebugger with the default (restricted) profile: its container starts in a real pod,
    kubectl exec reaches it, it runs as 65532, and the status says Running and Ready."""
    labels = {"app": "target"}
    debuggers.run_pod(namespace, "target", labels, real=True)
    debuggers.create(namespace, debugger_manifest("shell", labels, image=BUSYBOX))
    (container,) = wait_until(
        lambda: ephemeral(debuggers.pod(namespace, "target")),
        bool,
        timeout=60,
        what="the debug container added",
    )
    status = wait_until(
        lambda: _debug_status(debuggers.pod(namespace, "target"), container),
        lambda s: s is not None and s.state.running is not None,
        timeout=120,
        what=f"{container} running in the pod's status",
    )
    assert status.image.endswith(BUSYBOX), status.image
    uid = cluster.kubectl("exec", "target", "-n", namespace, "-c", container, "--", "id", "-u")
    assert uid.strip() == RESTRICTED_USER
    obj = debuggers.wait(
        namespace,
        "shell",
        lambda o: (
            condition(o, "Ready").get("status") == "True"
            and _entries(o).get("target", {}).get("state") == "Running"
        ),
        "Ready with the container Running",
        timeout=60,
    )
    assert _entries(obj)["target"]["container"] == container
    assert condition(obj, "Degraded")["status"] == "False", obj["status"]


def _kubelet_failure(status: client.V1ContainerStatus | None) -> tuple[str, str, str] | None:
    """(state, reason, message) when the kubelet reports the container Waiting with an error
    reason or Terminated (it never restarts an ephemeral container); None otherwise."""
    if status is None:
        return None
    if (waiting := status.state.waiting) is not None and waiting.reason not in STARTING:
        return "Waiting", waiting.reason or "", waiting.message or ""
    if (terminated := status.state.terminated) is not None:
        return "Terminated", terminated.reason or "", terminated.message or ""
    return None


CANNOT_START = [
    pytest.param({"image": MISSING_IMAGE}, PULL_FAILURES, MISSING_IMAGE, id="image-not-pullable"),
    pytest.param(
        {"image": BUSYBOX, "command": [MISSING_COMMAND]},
        START_FAILURES,
        MISSING_COMMAND,
        id="command-not-found",
    ),
]


@pytest.mark.parametrize(("spec", "reasons", "needle"), CANNOT_START)
def test_debug_container_that_cannot_start_is_reported_with_the_kubelets_reason(
    debuggers: Debuggers,
    namespace: str,
    spec: dict[str, Any],
    reasons: frozenset[str],
    needle: str,
) -> None:
    """A debug container the kubelet cannot start: the PodDebugger's entry carries the state,
    reason and message the kubelet reports on the pod; Ready is False (ContainerFailed) and
    Degraded True, naming the pod."""
    labels = {"app": "target"}
    debuggers.run_pod(namespace, "target", labels, real=True)
    debuggers.create(namespace, debugger_manifest("broken", labels, **spec))
    (container,) = wait_until(
        lambda: ephemeral(debuggers.pod(namespace, "target")),
        bool,
        timeout=60,
        what="the debug container added",
    )
    # A failed pull reaches the pod's status only with the kubelet's next sync of the pod (about
    # 10 s later on the local node, although its Failed Event comes at once): no container
    # exists whose change would wake it earlier.
    state, reason, message = wait_until(
        lambda: _kubelet_failure(_debug_status(debuggers.pod(namespace, "target"), container)),
        lambda failure: failure is not None,
        timeout=120,
        what=f"the kubelet failing to start {container}",
    )
    assert reason in reasons, (state, reason, message)
    assert needle in message, message

    def both() -> tuple[dict[str, Any], tuple[str, str, str] | None]:
        obj = debuggers.get(namespace, "broken")
        pod = debuggers.pod(namespace, "target")
        return obj, _kubelet_failure(_debug_status(pod, container))

    def agree(seen: tuple[dict[str, Any], tuple[str, str, str] | None]) -> bool:
        obj, kubelet = seen
        entry = _entries(obj).get("target", {})
        reported = (entry.get("state"), entry.get("reason"), entry.get("message"))
        return (
            kubelet is not None
            and reported == (kubelet[0], kubelet[1], kubelet[2][:MAX_STATE_MESSAGE])
            and condition(obj, "Degraded").get("status") == "True"
            and obj["status"].get("observedGeneration") == obj["metadata"]["generation"]
        )

    obj, _ = wait_until(
        both, agree, timeout=60, what="the PodDebugger reporting what the kubelet reports"
    )
    entry = _entries(obj)["target"]
    assert (entry["container"], entry["image"]) == (container, spec["image"]), entry
    assert entry["reason"] in reasons, entry
    ready, degraded = condition(obj, "Ready"), condition(obj, "Degraded")
    assert (ready["status"], ready["reason"]) == ("False", "ContainerFailed"), obj["status"]
    assert degraded["reason"] == "ContainerFailed", obj["status"]
    assert f"target/{container}: {entry['reason']}" in degraded["message"], degraded


PID1_PROBE = [
    "sh",
    "-c",
    "echo pid1: $(tr '\\0' ' ' < /proc/1/cmdline); ps; sleep 3600",
]
"""What a debug container prints: its PID 1's command line, then every process it sees."""


def _probe_output(cluster: Cluster, namespace: str, pod: str, container: str) -> list[str]:
    """The lines ``container`` of ``pod`` printed, once it printed its process list."""
    found: str = wait_until(
        lambda: cluster.kubectl("logs", pod, "-n", namespace, "-c", container),
        lambda out: "pid1:" in out and "PID" in out,
        timeout=120,
        what=f"{container} printing its processes",
    )
    return found.splitlines()


def _pid1(lines: list[str]) -> tuple[str, list[str]]:
    """(PID 1's command line as the ``pid1:`` line says, the ``ps`` lines of PID 1)."""
    said = next(line for line in lines if line.startswith("pid1:"))
    ps = [line for line in lines if line.split()[:1] == ["1"]]
    return said.removeprefix("pid1:").strip(), ps


def test_a_target_container_shares_its_processes_as_kubectl_debug_target_does(
    cluster: Cluster, api: client.ApiClient, debuggers: Debuggers, namespace: str
) -> None:
    """spec.targetContainer: the debug container (default restricted profile, uid 65532) sees
    the target container's process as its PID 1, as `kubectl debug --target` does in the same
    kind of pod; without a target (the control), PID 1 is the debug container's own shell. A
    matching pod without that container gets nothing and is reported, with an Event naming
    the PodDebugger; the operator keeps running."""
    labels = {"app": "target"}
    debuggers.run_pod(namespace, "app", labels, real=True)  # container main: sleep 3600
    debuggers.run_pod(namespace, "by-hand", {"app": "by-hand"}, real=True)
    lacking = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "lacking", "labels": labels},
        "spec": {"containers": [{"name": "web", "image": "nginx"}]},  # a kwok pod, no main
    }
    debuggers.core.create_namespaced_pod(namespace, lacking)
    debuggers.create(
        namespace,
        debugger_manifest(
            "ps", labels, image=BUSYBOX, command=PID1_PROBE[:2], args=PID1_PROBE[2:],
            targetContainer="main",
        ),
    )  # fmt: skip
    (container,) = wait_until(
        lambda: ephemeral(debuggers.pod(namespace, "app")),
        bool,
        timeout=60,
        what="the debug container added",
    )
    assert debuggers.pod(namespace, "app").spec.ephemeral_containers[0].target_container_name == (
        "main"
    )
    output = _probe_output(cluster, namespace, "app", container)
    print("\n".join(["the PodDebugger's container printed:", *output]))
    seen, ps = _pid1(output)
    assert seen == " ".join(SLEEP), seen
    (only,) = ps
    assert only.split()[-2:] == SLEEP, ps

    # kubectl debug --target on a pod of the same kind sees the same; without it, its own.
    for name, target in (("probe", ["--target", "main"]), ("control", [])):
        cluster.kubectl(
            "debug", "by-hand", "-n", namespace, "--image", BUSYBOX, "-c", name, *target,
            "--profile", "general", "--attach=false", "--", *PID1_PROBE,
        )  # fmt: skip
    by_hand, by_hand_ps = _pid1(_probe_output(cluster, namespace, "by-hand", "probe"))
    assert (by_hand, by_hand_ps[0].split()[-2:]) == (seen, SLEEP), by_hand_ps
    control, _ = _pid1(_probe_output(cluster, namespace, "by-hand", "control"))
    assert control.startswith("sh -c echo pid1:"), control
    print(f"PID 1 seen by the PodDebugger's container: {seen!r}; by kubectl debug --target: "
          f"{by_hand!r}; by kubectl debug without --target: {control!r}")  # fmt: skip

    assert ephemeral(debuggers.pod(namespace, "lacking")) == []
    obj = debuggers.wait(
        namespace,
        "ps",
        lambda o: [f["pod"] for f in o["status"].get("failedPods") or []] == ["lacking"],
        "the pod without the target reported",
    )
    (failed,) = obj["status"]["failedPods"]
    assert (failed["reason"], failed["message"]) == (
        "TargetContainerNotFound",
        "the pod has no container main (spec.targetContainer)",
    )
    assert condition(obj, "Degraded")["reason"] == "InjectionFailed", obj["status"]
    said = (
        f"PodDebugger {namespace}/ps (requester not recorded) could not add ephemeral container "
        f"{container} to pod lacking: the pod has no container main (spec.targetContainer)"
    )
    found = wait_until(
        lambda: [
            e for e in debuggers.events(namespace, "Pod", "lacking")
            if e.reason == "TargetContainerNotFound"
        ],
        bool,
        timeout=20,
        what="the Event on the pod without the target",
    )  # fmt: skip
    assert [(e.message, e.count) for e in found] == [(said, 1)]


CUSTOM_PROBE = ["sh", "-c", "env; echo mounted:; ls /mnt/x; cat /mnt/x/hello; sleep 3600"]
"""What a custom debug container prints: its environment, then the pod's volume as it sees it."""


def test_a_custom_container_gets_its_env_and_the_pods_volume_on_the_real_node(
    cluster: Cluster, api: client.ApiClient, debuggers: Debuggers, namespace: str
) -> None:
    """spec.env (a literal, a Secret's key, a ConfigMap's key) and spec.volumeMounts, as
    `kubectl debug --custom` gives them: the debug container (restricted profile, uid 65532)
    prints them on the real node, and reads the file the application wrote in the pod's
    emptyDir. Matching pods without the volume, or whose volume of that name is a Secret's,
    get nothing and are listed with why; the container keeps the profile's securityContext."""
    labels = {"app": "custom"}
    debuggers.core.create_namespaced_secret(
        namespace, {"metadata": {"name": "db"}, "stringData": {"password": "s3cr3t-from-db"}}
    )
    debuggers.core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "cfg"}, "data": {"mode": "verbose"}}
    )
    writer = {
        "name": "main",
        "image": BUSYBOX,
        "command": ["sh", "-c", "echo written-by-app > /data/hello; sleep 3600"],
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
    }
    app = real_pod_spec(api, containers=[writer], volumes=[{"name": "data", "emptyDir": {}}])
    debuggers.core.create_namespaced_pod(
        namespace, {"metadata": {"name": "app", "labels": labels}, "spec": app}
    )
    kwok = [{"name": "main", "image": "nginx"}]  # on a kwok node: nothing runs, none is sent
    for name, volumes in (
        ("no-volume", [{"name": "other", "emptyDir": {}}]),
        ("secret-volume", [{"name": "data", "secret": {"secretName": "db"}}]),
    ):
        spec = {"containers": kwok, "volumes": volumes}
        debuggers.core.create_namespaced_pod(
            namespace, {"metadata": {"name": name, "labels": labels}, "spec": spec}
        )
    env = [
        {"name": "LEVEL", "value": "debug"},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
        {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "mode"}}},
    ]
    mounts = [{"name": "data", "mountPath": "/mnt/x", "readOnly": True}]
    debuggers.create(
        namespace,
        debugger_manifest(
            "custom", labels, image=BUSYBOX, command=CUSTOM_PROBE[:2], args=CUSTOM_PROBE[2:],
            env=env, volumeMounts=mounts,
        ),
    )  # fmt: skip
    (container,) = wait_until(
        lambda: ephemeral(debuggers.pod(namespace, "app")),
        bool,
        timeout=60,
        what="the debug container added",
    )
    output: str = wait_until(
        lambda: cluster.kubectl("logs", "app", "-n", namespace, "-c", container),
        lambda out: "written-by-app" in out,
        timeout=120,
        what=f"{container} printing its env and the volume",
    )
    print(output)
    lines = output.splitlines()
    assert {"LEVEL=debug", "TOKEN=s3cr3t-from-db", "MODE=verbose"} <= set(lines), lines
    assert lines[lines.index("mounted:") + 1 :][:2] == ["hello", "written-by-app"], lines
    (added,) = debuggers.pod(namespace, "app").spec.ephemeral_containers
    context = added.security_context
    assert (context.run_as_user, context.run_as_non_root, context.privileged) == (
        int(RESTRICTED_USER), True, None,
    )  # fmt: skip
    assert [(m.name, m.mount_path, m.read_only) for m in added.volume_mounts] == [
        ("data", "/mnt/x", True)
    ]

    obj = debuggers.wait(
        namespace,
        "custom",
        lambda o: len(o["status"].get("failedPods") or []) == 2,
        "the pods that cannot take it reported",
    )
    assert {f["pod"]: (f["reason"], f["message"]) for f in obj["status"]["failedPods"]} == {
        "no-volume": ("VolumeNotFound", "the pod has no volume data (spec.volumeMounts)"),
        "secret-volume": (
            "VolumeNotAllowed",
            "the pod's volume data holds Secrets or service account tokens, which a debug "
            "container never mounts (spec.volumeMounts; use env valueFrom secretKeyRef for a "
            "Secret you may read)",
        ),
    }
    assert condition(obj, "Degraded")["reason"] == "InjectionFailed", obj["status"]
    for name in ("no-volume", "secret-volume"):
        assert ephemeral(debuggers.pod(namespace, name)) == []
