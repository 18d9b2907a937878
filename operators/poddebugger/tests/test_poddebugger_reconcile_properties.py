"""Property tests of the planner over random pods: scope, maxPods, idempotence, names."""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opsuite_packaging.crd import structural_schema
from opsuite_testkit import LABELS, from_schema, is_dns_subdomain, schema_errors
from poddebugger_operator.actions import slim_pod
from poddebugger_operator.models import MAX_ACTIVE_DEADLINE, PodDebuggerSpec, PodDebuggerStatus
from poddebugger_operator.names import container_name, ephemeral_container
from poddebugger_operator.pods import ephemeral_names, is_live
from poddebugger_operator.reconcile import plan as plan_with_settings
from poddebugger_operator.spec import parse_spec

NOW = datetime(2026, 1, 1, tzinfo=UTC)
plan = functools.partial(plan_with_settings, allow_sysadmin=True)
"""These properties hold for every profile; refusing sysadmin is tested in test_poddebugger_gate."""
FAST = settings(max_examples=150, deadline=None)
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

labels = st.dictionaries(st.sampled_from(["app", "tier"]), st.sampled_from(["a", "b"]), max_size=2)
selectors = st.sampled_from(
    [
        {"matchLabels": {"app": "a"}},
        {"matchLabels": {"app": "a", "tier": "b"}},
        {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
        {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["b"]}]},
    ]
)
debugger_names = st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,250}[a-z0-9])?", fullmatch=True)


@st.composite
def debuggers(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "selector": draw(selectors),
        "image": draw(st.sampled_from(["busybox", "busybox:1.37", "alpine"])),
        "maxPods": draw(st.integers(1, 6)),
        "profile": draw(
            st.sampled_from(["general", "baseline", "restricted", "netadmin", "sysadmin"])
        ),
    }
    if draw(st.booleans()):
        spec["command"] = ["sleep", "3600"]
    run_as_user = draw(st.sampled_from([None, 0, 1000, 65532]))
    if run_as_user is not None and not (run_as_user == 0 and spec["profile"] == "restricted"):
        spec["runAsUser"] = run_as_user
    return {
        "apiVersion": "debug.opsuite.dev/v1alpha1",
        "kind": "PodDebugger",
        "metadata": {"name": "dbg", "namespace": "ns", "uid": "u-dbg", "generation": 1},
        "spec": spec,
    }


OLD_CONTAINER = "pdbg-dbg-0123456789"
"""A container of an older spec of the debugger named dbg (the same name prefix)."""
BENIGN_WAITING = ("ContainerCreating", "PodInitializing")
WAITING_REASONS = (
    *BENIGN_WAITING,
    "CreateContainerConfigError",
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CrashLoopBackOff",
    "not a reason: " + "x" * 200,
)
messages = st.one_of(st.just(""), st.text(max_size=20), st.just("m" * 3000))


@st.composite
def container_states(draw: st.DrawFn) -> dict[str, Any] | None:
    """What the kubelet reports of one ephemeral container (None: not reported yet), as a
    real kubelet writes it, with the fields the planner does not read."""
    kind = draw(st.sampled_from(["none", "empty", "running", "waiting", "terminated"]))
    if kind == "none":
        return None
    if kind == "empty":
        return {}
    if kind == "running":
        return {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    detail: dict[str, Any] = {}
    if kind == "terminated":
        detail = {
            "exitCode": draw(st.sampled_from([0, 0, 1, 2, 137])),
            "startedAt": "2026-01-01T00:00:00Z",
            "finishedAt": "2026-01-01T00:00:01Z",
            "containerID": "containerd://0123",
        }
    if draw(st.integers(0, 4)):
        detail["reason"] = draw(
            st.sampled_from(WAITING_REASONS if kind == "waiting" else ("Completed", "Error"))
        )
    message = draw(messages)
    if message:
        detail["message"] = message
    return {kind: detail}


@st.composite
def pod_lists(draw: st.DrawFn, current: str | None = None) -> list[dict[str, Any]]:
    """Pods of two namespaces; some hold an older container of the debugger dbg, a foreign
    one, or ``current`` (the debugger's current container), each reported in some state."""
    names = [OLD_CONTAINER, "other-debug", *([current] if current else [])]
    pods = []
    for i in range(draw(st.integers(0, 12))):
        extra = sorted(set(draw(st.lists(st.sampled_from(names), max_size=3))))
        meta: dict[str, Any] = {
            "name": f"p{i}",
            "namespace": draw(st.sampled_from(["ns", "ns", "other"])),
            "uid": f"uid-{i}",
            "labels": draw(labels),
            "creationTimestamp": f"2026-01-01T00:00:{draw(st.integers(10, 59))}Z",
        }
        if draw(st.integers(0, 9)) == 0:
            meta["deletionTimestamp"] = "2026-01-01T00:01:00Z"
        statuses = []
        for name in extra:
            state = draw(container_states())
            if state is not None:
                statuses.append(
                    {"name": name, "state": state, "ready": False, "restartCount": 0, "image": "x"}
                )
        pods.append(
            {
                "metadata": {**meta, "resourceVersion": str(i)},
                "spec": {
                    "containers": [{"name": "main", "image": "app"}],
                    "ephemeralContainers": [
                        {"name": n, "image": "x", "terminationMessagePolicy": "File"} for n in extra
                    ],
                },
                "status": {
                    "phase": draw(st.sampled_from(["Pending", "Running", "Running", "Succeeded"])),
                    "podIP": "10.0.0.1",
                    "ephemeralContainerStatuses": statuses,
                },
            }
        )
    return pods


@st.composite
def worlds(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A debugger and pods, some of which hold its current container."""
    debugger = draw(debuggers())
    current = container_name("dbg", parse_spec(debugger))
    return debugger, draw(pod_lists(current))


def _matches(debugger: dict[str, Any], pod: dict[str, Any]) -> bool:
    spec = parse_spec(debugger)
    return (
        pod["metadata"]["namespace"] == debugger["metadata"]["namespace"]
        and is_live(pod)
        and spec.selector.matches(pod["metadata"].get("labels") or {})
    )


@FAST
@given(worlds())
def test_only_matching_live_pods_of_the_namespace_get_a_container(
    world: tuple[dict[str, Any], list[dict[str, Any]]],
) -> None:
    debugger, pods = world
    actions = plan(debugger, pods, NOW)
    for injection in actions.injections:
        assert _matches(debugger, dict(injection.pod))
        assert injection.container["name"] not in ephemeral_names(injection.pod)
    assert len({i.pod_name for i in actions.injections}) == len(actions.injections)


@FAST
@given(worlds())
def test_at_most_max_pods_hold_the_current_container(
    world: tuple[dict[str, Any], list[dict[str, Any]]],
) -> None:
    debugger, pods = world
    actions = plan(debugger, pods, NOW)
    name = container_name("dbg", parse_spec(debugger))
    matching = [p for p in pods if _matches(debugger, p)]
    holders = [p for p in matching if name in ephemeral_names(p)]
    limit = debugger["spec"]["maxPods"]
    assert len(actions.injections) <= max(limit - len(holders), 0)
    assert actions.outcome.skipped == len(matching) - len(holders) - len(actions.injections)


@FAST
@given(worlds())
def test_applying_the_plan_then_planning_again_injects_nothing(
    world: tuple[dict[str, Any], list[dict[str, Any]]],
) -> None:
    debugger, pods = world
    cluster = copy.deepcopy(pods)
    actions = plan(debugger, cluster, NOW)
    by_name = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in cluster}
    for injection in actions.injections:
        pod = by_name[(injection.pod["metadata"]["namespace"], injection.pod_name)]
        pod["spec"]["ephemeralContainers"].append(dict(injection.container))
    applied = dict(debugger, status=actions.status_patch or debugger.get("status"))
    again = plan(applied, cluster, NOW)
    assert again.injections == ()
    assert again.status_patch is None
    # The container spec did not change: the same pods, the same container, every time.
    assert plan(applied, copy.deepcopy(cluster), NOW).injections == ()


@FAST
@given(worlds(), st.integers(1, MAX_ACTIVE_DEADLINE), st.integers(0, 2 * MAX_ACTIVE_DEADLINE))
def test_nothing_is_added_after_the_deadline_and_the_pass_before_it_is_asked_for_at_it(
    world: tuple[dict[str, Any], list[dict[str, Any]]], deadline: int, elapsed: int
) -> None:
    debugger, pods = world
    debugger = copy.deepcopy(debugger)
    debugger["spec"]["activeDeadlineSeconds"] = deadline
    debugger["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    now = NOW + timedelta(seconds=elapsed)
    actions = plan(debugger, pods, now)
    left = deadline - elapsed
    without = plan({**debugger, "spec": _no_deadline(debugger)}, pods, now)
    if left > 0:
        # Before it: the same plan as without a deadline, and a pass asked for at it.
        assert actions.injections == without.injections
        assert actions.requeue_after is not None
        assert 0 < actions.requeue_after <= left
    else:
        assert actions.injections == ()
        assert actions.requeue_after is None
        assert actions.status_patch is not None
        ready = _conditions(actions.status_patch)["Ready"]
        assert ready[:2] == ("False", "DeadlineExceeded")
        # Written once: then nothing, whatever the time.
        applied = dict(debugger, status=actions.status_patch)
        later = plan(applied, pods, now + timedelta(days=1))
        assert (later.injections, later.status_patch, later.requeue_after) == ((), None, None)


def _no_deadline(debugger: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in debugger["spec"].items() if k != "activeDeadlineSeconds"}


@FAST
@given(worlds(), st.data())
def test_a_target_container_is_only_ever_one_of_the_pods_own(
    world: tuple[dict[str, Any], list[dict[str, Any]]], data: st.DataObject
) -> None:
    debugger, pods = world
    debugger = copy.deepcopy(debugger)
    debugger["spec"]["targetContainer"] = "app"
    pods = copy.deepcopy(pods)
    for pod in pods:
        names = data.draw(st.lists(st.sampled_from(["app", "main", "sidecar"]), unique=True))
        pod["spec"]["containers"] = [{"name": n} for n in names]
    actions = plan(debugger, pods, NOW)
    for injection in actions.injections:
        assert injection.container["targetContainerName"] == "app"
        assert "app" in {c["name"] for c in injection.pod["spec"]["containers"]}
    lacking = {
        p["metadata"]["uid"]
        for p in pods
        if _matches(debugger, p) and "app" not in {c["name"] for c in p["spec"]["containers"]}
    }
    reported = {f.uid for f in actions.outcome.failures if f.reason == "TargetContainerNotFound"}
    assert reported == lacking - {
        p["metadata"]["uid"]
        for p in pods
        if not set(ephemeral_names(p)).isdisjoint(actions.outcome.current)
    }
    # Written once, announced once: then quiet.
    applied = dict(debugger, status=actions.status_patch or debugger.get("status"))
    cluster = copy.deepcopy(pods)
    by_uid = {p["metadata"]["uid"]: p for p in cluster}
    for injection in actions.injections:
        by_uid[injection.pod_uid]["spec"]["ephemeralContainers"].append(dict(injection.container))
    again = plan(applied, cluster, NOW)
    assert (again.injections, again.unfit, again.status_patch) == ((), (), None)


# --- the status tells what the kubelet reports, and Ready claims no more than that ---------


def _reported(pod: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The kubelet's state of the container ``name`` (None: not reported)."""
    for status in pod["status"].get("ephemeralContainerStatuses") or ():
        if status["name"] == name:
            return dict(status["state"])
    return None


def _verdict(state: dict[str, Any] | None) -> str:
    """ok (running, or exited 0), failed (an error reason, or exited non-zero) or starting."""
    if state is None or not state:
        return "starting"
    if "running" in state:
        return "ok"
    if "terminated" in state:
        return "ok" if state["terminated"].get("exitCode") == 0 else "failed"
    reason = state["waiting"].get("reason") or ""
    return "starting" if reason in ("", *BENIGN_WAITING) else "failed"


def _conditions(status: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in status["conditions"]}


@FAST
@given(worlds())
def test_each_listed_container_carries_the_kubelets_state(
    world: tuple[dict[str, Any], list[dict[str, Any]]],
) -> None:
    debugger, pods = world
    status = plan(debugger, pods, NOW).status_patch
    assert status is not None  # the debugger had no status yet
    by_name = {p["metadata"]["name"]: p for p in pods if _matches(debugger, p)}
    for entry in status["debuggedPods"]:
        state = _reported(by_name[entry["pod"]], entry["container"])
        if state is None:
            assert entry["state"] == "Unknown"
            assert entry.keys() == {"pod", "container", "image", "state"}
            continue
        kind = next(iter(state), "waiting")
        assert entry["state"] == kind.capitalize()
        detail = state.get(kind) or {}
        assert entry.get("reason", "") == (detail.get("reason") or "")[:128]
        assert entry.get("exitCode") == detail.get("exitCode")
        message = detail.get("message") or ""
        assert entry.get("message", "") == message[: len(entry.get("message", ""))]
        assert bool(entry.get("message")) == bool(message)


@FAST
@given(worlds())
def test_ready_only_when_every_current_container_runs_or_exited_zero(
    world: tuple[dict[str, Any], list[dict[str, Any]]],
) -> None:
    debugger, pods = world
    actions = plan(debugger, pods, NOW)
    assert actions.status_patch is not None
    found = _conditions(actions.status_patch)
    name = container_name("dbg", parse_spec(debugger))
    verdicts = [
        _verdict(_reported(p, name))
        for p in pods
        if _matches(debugger, p) and name in ephemeral_names(p)
    ] + ["starting"] * len(actions.injections)
    ready, ready_reason, _ = found["Ready"]
    degraded, degraded_reason, message = found["Degraded"]
    if actions.outcome.failures:  # refused by the API server (not generated here)
        assert (ready, degraded) == ("False", "True")
    elif "failed" in verdicts:
        assert (ready, ready_reason) == ("False", "ContainerFailed")
        assert (degraded, degraded_reason) == ("True", "ContainerFailed")
        assert f"/{name}" in message
    elif "starting" in verdicts:
        assert (ready, ready_reason) == ("False", "Starting")
        assert degraded == "False"
    else:
        assert ready == "True"
        assert ready_reason in ("Debugged", "NoMatchingPods")
        assert degraded == "False"
    # Older containers of the debugger never decide Ready.
    assert ready_reason != "ContainerFailed" or "failed" in verdicts


@FAST
@given(worlds(), st.sampled_from(["running", "completed", "failing"]))
def test_once_the_kubelet_runs_every_current_container_the_debugger_is_ready(
    world: tuple[dict[str, Any], list[dict[str, Any]]], outcome: str
) -> None:
    debugger, pods = world
    cluster = copy.deepcopy(pods)
    actions = plan(debugger, cluster, NOW)
    name = container_name("dbg", parse_spec(debugger))
    by_name = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in cluster}
    for injection in actions.injections:
        pod = by_name[(injection.pod["metadata"]["namespace"], injection.pod_name)]
        pod["spec"]["ephemeralContainers"].append(dict(injection.container))
    state = {
        "running": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
        "completed": {"terminated": {"exitCode": 0, "reason": "Completed"}},
        "failing": {"waiting": {"reason": "ErrImagePull", "message": "not found"}},
    }[outcome]
    for pod in cluster:
        pod["status"]["ephemeralContainerStatuses"] = [
            s for s in pod["status"]["ephemeralContainerStatuses"] if s["name"] != name
        ]
        if name in ephemeral_names(pod):
            pod["status"]["ephemeralContainerStatuses"].append({"name": name, "state": state})
    status = plan(dict(debugger, status=actions.status_patch), cluster, NOW).status_patch
    found = _conditions({**(actions.status_patch or {}), **(status or {})})
    debugged = any(_matches(debugger, p) and name in ephemeral_names(p) for p in cluster)
    if outcome == "failing" and debugged:
        assert found["Ready"][:2] == ("False", "ContainerFailed")
        assert found["Degraded"][:2] == ("True", "ContainerFailed")
        assert "ErrImagePull: not found" in found["Degraded"][2]
    else:
        assert found["Ready"][:2] == ("True", "Debugged" if debugged else "NoMatchingPods")
        assert found["Degraded"][:2] == ("False", "AsExpected")


@FAST
@given(worlds())
def test_slim_records_plan_like_whole_pods(
    world: tuple[dict[str, Any], list[dict[str, Any]]],
) -> None:
    debugger, pods = world
    whole = plan(debugger, pods, NOW)
    slim = plan(debugger, [slim_pod(p) for p in pods], NOW)
    assert slim.status_patch == whole.status_patch
    assert [(i.pod_name, i.container) for i in slim.injections] == [
        (i.pod_name, i.container) for i in whole.injections
    ]


@FAST
@given(worlds())
def test_restricted_containers_never_run_as_root(
    world: tuple[dict[str, Any], list[dict[str, Any]]],
) -> None:
    debugger, pods = world
    spec = debugger["spec"]
    for injection in plan(debugger, pods, NOW).injections:
        context = injection.container.get("securityContext") or {}
        if spec["profile"] == "restricted":
            assert context["runAsNonRoot"] is True
            assert context["runAsUser"] == spec.get("runAsUser", 65532) != 0
        else:
            assert context.get("runAsUser") == spec.get("runAsUser")


@FAST
@given(debugger_names, debuggers())
def test_names_are_deterministic_dns_labels(name: str, debugger: dict[str, Any]) -> None:
    spec = parse_spec(debugger)
    first = container_name(name, spec)
    assert first == container_name(name, parse_spec(copy.deepcopy(debugger)))
    assert len(first) <= 63
    assert DNS_LABEL.match(first), first
    changed = parse_spec({"spec": {**debugger["spec"], "image": "other/image:2"}})
    assert container_name(name, changed) != first


@st.composite
def related_names(draw: st.DrawFn) -> list[str]:
    """Valid debugger names alike: a name, its dot/dash variants, names it is a prefix of."""
    base = draw(debugger_names)
    variants = {
        base,
        base.replace(".", "-"),
        base.replace("-", "."),
        base + "-admin",
        base + ".admin",
        base + "-" + "x" * draw(st.integers(0, 60)),
        base[: draw(st.integers(1, len(base)))],
    }
    return sorted(v for v in variants if is_dns_subdomain(v))


@FAST
@given(related_names(), debuggers())
def test_alike_names_never_share_a_container_nor_claim_each_others(
    names: list[str], debugger: dict[str, Any]
) -> None:
    spec = parse_spec(debugger)
    containers = {n: container_name(n, spec) for n in names}
    assert len(set(containers.values())) == len(names)
    older = parse_spec({"spec": {**debugger["spec"], "image": "older"}})
    for name in names:
        others = [container_name(o, s) for o in names if o != name for s in (spec, older)]
        obj = {**debugger, "metadata": {**debugger["metadata"], "name": name}}
        young: dict[str, Any] = {
            "metadata": {
                "name": "young",
                "namespace": "ns",
                "uid": "y",
                "labels": {"app": "a"},
                "creationTimestamp": "2026-01-01T00:00:30Z",
            },
            "spec": {"ephemeralContainers": [{"name": c, "image": "x"} for c in others]},
            "status": {"phase": "Running"},
        }
        old = {
            **young,
            "metadata": {
                **young["metadata"],
                "name": "old",
                "uid": "o",
                "creationTimestamp": "2026-01-01T00:00:10Z",
            },
            "spec": {},
        }
        obj["spec"] = {**obj["spec"], "selector": {"matchLabels": {"app": "a"}}, "maxPods": 1}
        actions = plan(obj, [young, old], NOW)
        assert [i.pod_name for i in actions.injections] == ["old"]
        assert actions.status_patch is not None
        assert [d["container"] for d in actions.status_patch["debuggedPods"]] == [containers[name]]


# --- any spec the CRD schema admits: no exception, only requests the API accepts -----------

DEBUGGER_SPECS = from_schema(structural_schema(PodDebuggerSpec))
STATUS_SCHEMA = structural_schema(PodDebuggerStatus)
_DNS_LABEL_FIELD = {"type": "string", "maxLength": 63, "pattern": DNS_LABEL.pattern}
_STRINGS = {"type": "array", "items": {"type": "string"}}
_CAPABILITIES = {"type": "array", "items": {"type": "string", "minLength": 1}}
EPHEMERAL_CONTAINER_SCHEMA = {
    "type": "object",
    "required": ["name", "image"],
    "properties": {
        "name": _DNS_LABEL_FIELD,
        "image": {"type": "string", "minLength": 1},
        "command": _STRINGS,
        "args": _STRINGS,
        "env": {
            "type": "array",
            "x-kubernetes-list-map-keys": ["name"],
            "items": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "value": {"type": "string"},
                },
            },
        },
        "stdin": {"type": "boolean"},
        "tty": {"type": "boolean"},
        "targetContainerName": _DNS_LABEL_FIELD,
        "securityContext": {
            "type": "object",
            "properties": {
                "privileged": {"type": "boolean"},
                "runAsNonRoot": {"type": "boolean"},
                "runAsUser": {"type": "integer", "minimum": 0, "maximum": 2147483647},
                "allowPrivilegeEscalation": {"type": "boolean"},
                "capabilities": {
                    "type": "object",
                    "properties": {"add": _CAPABILITIES, "drop": _CAPABILITIES},
                },
                "seccompProfile": {
                    "type": "object",
                    "required": ["type"],
                    "properties": {"type": {"enum": ["RuntimeDefault", "Unconfined", "Localhost"]}},
                },
            },
        },
    },
}
"""The part of core/v1 EphemeralContainer the operator writes, with the API server's rules."""


@st.composite
def schema_debuggers(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A PodDebugger with any spec the schema admits (CEL aside) and pods it may select."""
    spec = draw(DEBUGGER_SPECS)
    if draw(st.integers(0, 3)):  # mostly a selector of well-formed labels, as real ones
        spec["selector"] = {"matchLabels": draw(LABELS)}
    debugger = {
        "metadata": {"name": draw(debugger_names), "namespace": "ns", "uid": "u", "generation": 2},
        "spec": spec,
    }
    if draw(st.booleans()):
        debugger["status"] = draw(from_schema(STATUS_SCHEMA))
    selected = spec["selector"].get("matchLabels") or {}
    pods = draw(pod_lists())
    for pod in pods:
        if draw(st.integers(0, 3)):
            pod["metadata"]["labels"] = dict(selected)
    return debugger, pods


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world=schema_debuggers(), allowed=st.sampled_from([(), ("busybox",)]))
def test_any_admitted_spec_plans_only_valid_requests(
    world: tuple[dict[str, Any], list[dict[str, Any]]], allowed: tuple[str, ...]
) -> None:
    """Each container added fits core/v1 EphemeralContainer and is new to its pod; the status
    after the merge patch fits the CRD. (Not checked: a targetContainer the pod lacks, which
    the API server refuses; that refusal is reported in failedPods, not retried.)"""
    debugger, pods = world
    actions = plan(debugger, pods, NOW, allowed_prefixes=allowed)
    for injection in actions.injections:
        container = injection.container
        assert not schema_errors(container, EPHEMERAL_CONTAINER_SCHEMA, "container"), container
        assert container["name"] not in ephemeral_names(injection.pod)
        assert injection.pod["metadata"]["namespace"] == "ns"
    if actions.status_patch is not None:
        status = {**debugger.get("status", {}), **actions.status_patch}
        assert not schema_errors(status, STATUS_SCHEMA, ".status"), status


# --- neighbours: debuggers whose names are prefixes or dot/dash variants of each other, ----
# --- many pods and several spec generations each ---------------------------------------------

LONG = "l" * 50
NEIGHBOUR_NAMES = (
    "shell",
    "shell-admin",
    "shell.admin",
    "shell-a",
    "a",
    "a.b",
    "a-b",
    "a-b.c",
    "a.b-c",
    LONG + "x",
    LONG + "y",
    LONG + ".x",
)
IMAGES = ("busybox:1.35", "busybox:1.36", "busybox:1.37", "alpine:3")
NEIGHBOUR_STATES: tuple[dict[str, Any] | None, ...] = (
    {"running": {}},
    {"terminated": {"exitCode": 0, "reason": "Completed"}},
    {"waiting": {"reason": "ImagePullBackOff", "message": "back-off"}},
    {"waiting": {"reason": "ContainerCreating"}},
    None,
)


def _previous_scheme(name: str, debugger: dict[str, Any]) -> str | None:
    """The name the previous scheme gave the debugger's container (``pdbg-<name>-<hash>``),
    when that name was the debugger's alone: a name without dots of at most 46 characters."""
    if "." in name or len(name) > 46:
        return None
    body = {k: v for k, v in ephemeral_body(name, debugger).items() if k != "name"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return f"pdbg-{name}-{hashlib.sha256(canonical.encode()).hexdigest()[:10]}"


def ephemeral_body(name: str, debugger: dict[str, Any]) -> dict[str, Any]:
    return ephemeral_container(name, parse_spec(debugger))


def _neighbour(name: str, image: str, max_pods: int) -> dict[str, Any]:
    return {
        "apiVersion": "debug.opsuite.dev/v1alpha1",
        "kind": "PodDebugger",
        "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}", "generation": 3},
        "spec": {
            "selector": {"matchLabels": {"app": "a"}},
            "image": image,
            "maxPods": max_pods,
        },
    }


Neighbourhood = tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, str]]


@st.composite
def neighbourhoods(draw: st.DrawFn) -> Neighbourhood:
    """Debuggers with related names (identical specs are likely: identical names would collide)
    and up to 250 pods, each holding containers of some of them, of up to four spec
    generations, some named by the previous scheme. Also: which debugger made each container."""
    names = draw(st.lists(st.sampled_from(NEIGHBOUR_NAMES), min_size=1, max_size=3, unique=True))
    count = draw(st.integers(0, 250))
    debuggers = [
        _neighbour(n, draw(st.sampled_from(IMAGES)), draw(st.sampled_from([1, 7, 100])))
        for n in names
    ]
    owner: dict[str, str] = {}
    holding: list[list[str]] = [[] for _ in range(count)]
    for debugger in debuggers:
        name = debugger["metadata"]["name"]
        for image in draw(st.lists(st.sampled_from(IMAGES), max_size=4, unique=True)):
            generation = {**debugger, "spec": {**debugger["spec"], "image": image}}
            container = container_name(name, parse_spec(generation))
            previous = _previous_scheme(name, generation)
            if previous is not None and draw(st.booleans()):
                container = previous
            owner[container] = name
            start, size = draw(st.integers(0, max(count - 1, 0))), draw(st.integers(0, count))
            for i in range(start, start + size):
                holding[i % count].append(container)
    pods = []
    for i, containers in enumerate(holding):
        statuses = []
        for j, container in enumerate(containers):
            state = NEIGHBOUR_STATES[(i + j) % len(NEIGHBOUR_STATES)]
            if state is not None:
                statuses.append({"name": container, "state": state})
        pods.append(
            {
                "metadata": {
                    "name": f"p{i:03}",
                    "namespace": "ns",
                    "uid": f"uid-{i}",
                    "labels": {"app": "a"},
                    "creationTimestamp": f"2026-01-01T00:{i // 60:02}:{i % 60:02}Z",
                },
                "spec": {"ephemeralContainers": [{"name": c, "image": "x"} for c in containers]},
                "status": {"phase": "Running", "ephemeralContainerStatuses": statuses},
            }
        )
    return debuggers, pods, owner


def _only(pods: list[dict[str, Any]], keep: Any) -> list[dict[str, Any]]:
    """``pods`` with only the ephemeral containers whose name ``keep`` accepts."""
    return [
        {
            **p,
            "spec": {
                "ephemeralContainers": [
                    c for c in p["spec"]["ephemeralContainers"] if keep(c["name"])
                ]
            },
            "status": {
                **p["status"],
                "ephemeralContainerStatuses": [
                    s for s in p["status"]["ephemeralContainerStatuses"] if keep(s["name"])
                ],
            },
        }
        for p in pods
    ]


NEIGHBOURS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@NEIGHBOURS
@given(neighbourhoods())
def test_a_debugger_plans_as_if_its_neighbours_containers_were_not_there(
    world: Neighbourhood,
) -> None:
    debuggers, pods, owner = world
    for debugger in debuggers:
        name = debugger["metadata"]["name"]
        alone = _only(pods, lambda c, name=name: owner.get(c) == name)
        together, by_itself = plan(debugger, pods, NOW), plan(debugger, alone, NOW)
        assert [i.pod_name for i in together.injections] == [
            i.pod_name for i in by_itself.injections
        ]
        assert together.status_patch == by_itself.status_patch
        assert together.status_patch is not None
        listed = {d["container"] for d in together.status_patch["debuggedPods"]}
        assert {owner.get(c, name) for c in listed} == ({name} if listed else set())


@NEIGHBOURS
@given(neighbourhoods())
def test_the_status_counts_every_container_and_lists_the_first_200_within_the_schema(
    world: Neighbourhood,
) -> None:
    debuggers, pods, owner = world
    for debugger in debuggers:
        name = debugger["metadata"]["name"]
        actions = plan(debugger, pods, NOW)
        status = actions.status_patch
        assert status is not None
        assert not schema_errors(status, STATUS_SCHEMA, ".status")
        own = sum(owner.get(c) == name for p in pods for c in ephemeral_names(p))
        injected = len(actions.injections)
        assert status["debuggedPodsTotal"] == own + injected
        assert len(status["debuggedPods"]) == min(own + injected, 200)
        # Those of the current spec come first.
        current = current_names(debugger)
        holding = sum(bool(current & set(ephemeral_names(p))) for p in pods) + injected
        shown = sum(d["container"] in current for d in status["debuggedPods"])
        assert shown == min(holding, 200)


def current_names(debugger: dict[str, Any]) -> set[str]:
    """The names the debugger's current container may have (this scheme's, the previous)."""
    name = debugger["metadata"]["name"]
    return {container_name(name, parse_spec(debugger))} | (
        {n} if (n := _previous_scheme(name, debugger)) else set()
    )


@NEIGHBOURS
@given(neighbourhoods())
def test_neighbours_converge_each_with_its_own_container_in_at_most_max_pods_pods(
    world: Neighbourhood,
) -> None:
    debuggers, pods, owner = world
    cluster = copy.deepcopy(pods)
    for _ in range(2):  # every debugger once, then once more: nothing left to do
        for debugger in debuggers:
            actions = plan(debugger, cluster, NOW)
            by_name = {p["metadata"]["name"]: p for p in cluster}
            for injection in actions.injections:
                by_name[injection.pod_name]["spec"]["ephemeralContainers"].append(
                    {"name": injection.container["name"], "image": injection.container["image"]}
                )
                owner[injection.container["name"]] = debugger["metadata"]["name"]
    for debugger in debuggers:
        assert plan(debugger, cluster, NOW).injections == ()
        holders = [p for p in cluster if current_names(debugger) & set(ephemeral_names(p))]
        before = [p for p in pods if current_names(debugger) & set(ephemeral_names(p))]
        assert len(holders) == max(len(before), min(debugger["spec"]["maxPods"], len(cluster)))
