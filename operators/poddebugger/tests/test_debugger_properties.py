"""Property tests of the planner over random pods: scope, maxPods, idempotence, names."""

from __future__ import annotations

import copy
import re
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opsuite_common.crd import structural_schema
from opsuite_common.testing import LABELS, from_schema, schema_errors
from poddebugger_operator.models import PodDebuggerSpec, PodDebuggerStatus
from poddebugger_operator.reconcile import (
    container_name,
    ephemeral_names,
    is_live,
    parse_spec,
    plan,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
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
    return {
        "apiVersion": "debug.opsuite.dev/v1alpha1",
        "kind": "PodDebugger",
        "metadata": {"name": "dbg", "namespace": "ns", "uid": "u-dbg", "generation": 1},
        "spec": spec,
    }


@st.composite
def pod_lists(draw: st.DrawFn) -> list[dict[str, Any]]:
    pods = []
    for i in range(draw(st.integers(0, 12))):
        extra = draw(st.lists(st.sampled_from(["pdbg-dbg-0123456789", "other-debug"]), max_size=2))
        meta: dict[str, Any] = {
            "name": f"p{i}",
            "namespace": draw(st.sampled_from(["ns", "ns", "other"])),
            "uid": f"uid-{i}",
            "labels": draw(labels),
            "creationTimestamp": f"2026-01-01T00:00:{draw(st.integers(10, 59))}Z",
        }
        if draw(st.integers(0, 9)) == 0:
            meta["deletionTimestamp"] = "2026-01-01T00:01:00Z"
        pods.append(
            {
                "metadata": meta,
                "spec": {"ephemeralContainers": [{"name": n, "image": "x"} for n in set(extra)]},
                "status": {
                    "phase": draw(st.sampled_from(["Pending", "Running", "Running", "Succeeded"]))
                },
            }
        )
    return pods


def _matches(debugger: dict[str, Any], pod: dict[str, Any]) -> bool:
    spec = parse_spec(debugger)
    return (
        pod["metadata"]["namespace"] == debugger["metadata"]["namespace"]
        and is_live(pod)
        and spec.selector.matches(pod["metadata"].get("labels") or {})
    )


@FAST
@given(debuggers(), pod_lists())
def test_only_matching_live_pods_of_the_namespace_get_a_container(
    debugger: dict[str, Any], pods: list[dict[str, Any]]
) -> None:
    actions = plan(debugger, pods, NOW)
    for injection in actions.injections:
        assert _matches(debugger, dict(injection.pod))
        assert injection.container["name"] not in ephemeral_names(injection.pod)
    assert len({i.pod_name for i in actions.injections}) == len(actions.injections)


@FAST
@given(debuggers(), pod_lists())
def test_at_most_max_pods_hold_the_current_container(
    debugger: dict[str, Any], pods: list[dict[str, Any]]
) -> None:
    actions = plan(debugger, pods, NOW)
    name = container_name("dbg", parse_spec(debugger))
    matching = [p for p in pods if _matches(debugger, p)]
    holders = [p for p in matching if name in ephemeral_names(p)]
    limit = debugger["spec"]["maxPods"]
    assert len(actions.injections) <= max(limit - len(holders), 0)
    assert actions.outcome.skipped == len(matching) - len(holders) - len(actions.injections)


@FAST
@given(debuggers(), pod_lists())
def test_applying_the_plan_then_planning_again_injects_nothing(
    debugger: dict[str, Any], pods: list[dict[str, Any]]
) -> None:
    world = copy.deepcopy(pods)
    actions = plan(debugger, world, NOW)
    by_name = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in world}
    for injection in actions.injections:
        pod = by_name[(injection.pod["metadata"]["namespace"], injection.pod_name)]
        pod["spec"]["ephemeralContainers"].append(dict(injection.container))
    applied = dict(debugger, status=actions.status_patch or debugger.get("status"))
    again = plan(applied, world, NOW)
    assert again.injections == ()
    assert again.status_patch is None
    # The container spec did not change: the same pods, the same container, every time.
    assert plan(applied, copy.deepcopy(world), NOW).injections == ()


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
