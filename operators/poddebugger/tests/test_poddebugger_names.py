"""Which containers are a PodDebugger's (exactly, not by name prefix), and a status that says
how many there are when it cannot list them all."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest

from opsuite_packaging.crd import build_crd
from opsuite_testkit import is_dns_label
from poddebugger_manifests import CRD
from poddebugger_operator.models import MAX_PODS_LIMIT, PodDebuggerStatus
from poddebugger_operator.names import container_name, ephemeral_container
from poddebugger_operator.reconcile import plan
from poddebugger_operator.spec import parse_spec
from poddebugger_operator.status import DEBUGGED

NOW = datetime(2026, 1, 1, tzinfo=UTC)
LONG = "l" * 50
"""A name stem longer than any container name can hold."""


def debugger(name: str = "dbg", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}", "generation": 2},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "image": "busybox", **spec},
    }


def pod(name: str, *containers: str, age: int = 0) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "labels": {"app": "web"},
            "creationTimestamp": f"2026-01-01T00:00:{age:02}Z",
        },
        "spec": {"ephemeralContainers": [{"name": c, "image": "busybox"} for c in containers]},
        "status": {
            "phase": "Running",
            "ephemeralContainerStatuses": [
                {"name": c, "state": {"running": {}}} for c in containers
            ],
        },
    }


def name_of(debugger_name: str, **spec: Any) -> str:
    return container_name(debugger_name, parse_spec(debugger(debugger_name, **spec)))


def legacy_name(debugger_name: str, **spec: Any) -> str:
    """The name the operator gave containers before 0.2: ``pdbg-<name with every character
    outside [a-z0-9-] as '-', at most 46>-<10 hex digits of the container's spec>``."""
    parsed = parse_spec(debugger(debugger_name, **spec))
    body = {k: v for k, v in ephemeral_container(debugger_name, parsed).items() if k != "name"}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())
    stem = re.sub(r"[^a-z0-9-]", "-", debugger_name)[:46].strip("-") or "x"
    return f"pdbg-{stem}-{digest.hexdigest()[:10]}"


def listed(status: dict[str, Any] | None) -> set[tuple[str, str]]:
    assert status is not None
    return {(d["pod"], d["container"]) for d in status["debuggedPods"]}


def condition(status: dict[str, Any] | None, type_: str) -> tuple[str, str, str]:
    assert status is not None
    found = next(c for c in status["conditions"] if c["type"] == type_)
    return found["status"], found["reason"], found["message"]


# --- names: one debugger's containers are never another's -----------------------------------


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("a.b", "a-b"),
        ("a.b.c", "a-b.c"),
        ("shell.admin", "shell-admin"),
        (LONG + "x", LONG + "y"),
        (LONG + ".x", LONG + "-x"),
        ("x" * 253, "x" * 252 + "y"),
    ],
)
def test_debuggers_whose_names_differ_get_different_containers(first: str, second: str) -> None:
    a, b = name_of(first), name_of(second)
    assert a != b
    assert is_dns_label(a)
    assert is_dns_label(b)
    # The second one injects its own container into a pod that holds the first one's.
    actions = plan(debugger(second), [pod("p", a)], NOW)
    assert [i.container["name"] for i in actions.injections] == [b]
    assert listed(actions.status_patch) == {("p", b)}


@pytest.mark.parametrize(("short", "longer"), [("shell", "shell-admin"), ("a", "a-b.c")])
def test_a_debugger_whose_name_is_a_prefix_of_another_claims_none_of_its_containers(
    short: str, longer: str
) -> None:
    others = [name_of(longer), name_of(longer, image="old"), legacy_name(longer, image="old")]
    pods = [pod("young", *others, age=30), pod("old", age=10)]
    actions = plan(debugger(short, maxPods=1), pods, NOW)
    # The oldest pod is chosen: the other debugger's containers give "young" no precedence.
    assert [i.pod_name for i in actions.injections] == ["old"]
    assert listed(actions.status_patch) == {("old", name_of(short))}
    assert actions.status_patch is not None
    assert actions.status_patch["skippedPods"] == 1


def test_names_keep_the_debuggers_name_readable_and_the_pdbg_prefix() -> None:
    name = name_of("shell")
    assert name.startswith("pdbg-shell-")
    assert re.fullmatch(r"pdbg-shell-[0-9a-f]{18}", name), name
    assert name_of("shell", image="other") != name
    assert name_of("shell", image="other")[:-10] == name[:-10]


# --- upgrade: containers named by the previous scheme stay the debugger's ---------------------


def test_the_current_container_named_by_the_previous_scheme_is_not_added_again() -> None:
    current = legacy_name("shell")
    actions = plan(debugger("shell"), [pod("p", current)], NOW)
    assert actions.injections == ()
    assert listed(actions.status_patch) == {("p", current)}
    assert condition(actions.status_patch, "Ready")[:2] == ("True", DEBUGGED)
    assert actions.status_patch is not None
    assert actions.status_patch["debuggedCount"] == 1


def test_older_containers_named_by_the_previous_scheme_are_listed_and_keep_their_pods_first() -> (
    None
):
    old = legacy_name("shell-admin", image="old")
    pods = [pod("young", old, age=30), pod("old", age=10)]
    actions = plan(debugger("shell-admin", maxPods=1), pods, NOW)
    assert [i.pod_name for i in actions.injections] == ["young"]
    assert ("young", old) in listed(actions.status_patch)


@pytest.mark.parametrize("dotted", ["a.b", LONG + "x"])
def test_a_name_the_previous_scheme_shortened_or_rewrote_does_not_claim_its_old_containers(
    dotted: str,
) -> None:
    """The previous scheme gave a.b and a-b the same names (and two names sharing their first
    46 characters): those containers cannot be told apart, so such a debugger does not count
    them as its own (docs/poddebugger.md, Upgrading)."""
    ambiguous = legacy_name(dotted)
    actions = plan(debugger(dotted), [pod("p", ambiguous)], NOW)
    assert [i.container["name"] for i in actions.injections] == [name_of(dotted)]
    assert listed(actions.status_patch) == {("p", name_of(dotted))}


# --- status: a count of the containers, and the first 200 of them --------------------------


def _generations(n: int) -> list[str]:
    return [name_of("dbg", image=f"busybox:1.{i}") for i in range(n)]


def test_three_spec_generations_over_100_pods_are_counted_and_the_list_is_bounded() -> None:
    """maxPods 100 and two spec edits: 300 containers, more than debuggedPods may hold."""
    *older, current = _generations(3)
    pods = [pod(f"p{i:03}", *older, current) for i in range(MAX_PODS_LIMIT)]
    obj = debugger(maxPods=100, image="busybox:1.2")
    assert container_name("dbg", parse_spec(obj)) == current
    status = plan(obj, pods, NOW).status_patch
    assert status is not None
    PodDebuggerStatus.model_validate(status)
    assert status["debuggedPodsTotal"] == 3 * MAX_PODS_LIMIT
    assert len(status["debuggedPods"]) == 2 * MAX_PODS_LIMIT
    assert sum(d["container"] == current for d in status["debuggedPods"]) == MAX_PODS_LIMIT
    assert condition(status, "Ready")[:2] == ("True", DEBUGGED)


def test_the_total_equals_the_list_when_everything_fits() -> None:
    current = name_of("dbg")
    status = plan(debugger(), [pod("a", current), pod("b")], NOW).status_patch
    assert status is not None
    assert status["debuggedPodsTotal"] == len(status["debuggedPods"]) == 2


def test_a_planned_status_is_written_once_with_the_total() -> None:
    current = name_of("dbg")
    pods = [pod(f"p{i:03}", *_generations(2), current) for i in range(MAX_PODS_LIMIT)]
    first = plan(debugger(maxPods=100), pods, NOW).status_patch
    assert first is not None
    assert plan({**debugger(maxPods=100), "status": first}, pods, NOW).status_patch is None


def test_kubectl_explain_tells_the_list_may_be_truncated() -> None:
    version = build_crd(CRD)["spec"]["versions"][0]
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    total = status["debuggedPodsTotal"]
    assert (total["type"], total["minimum"]) == ("integer", 0)
    assert "debuggedPods" in total["description"]
    assert "200" in status["debuggedPods"]["description"]
    assert "debuggedPodsTotal" in status["debuggedPods"]["description"]


def test_a_refusal_recorded_under_the_previous_name_still_holds() -> None:
    obj = debugger("shell")
    obj["status"] = {
        "failedPods": [
            {
                "pod": "p",
                "uid": "uid-p",
                "container": legacy_name("shell"),
                "reason": "Rejected",
                "message": "violates PodSecurity",
                "attempts": 1,
                "lastAttemptTime": "2026-01-01T00:00:00Z",
            }
        ]
    }
    actions = plan(obj, [pod("p")], NOW)
    assert actions.injections == ()
    assert condition(actions.status_patch, "Degraded")[:2] == ("True", "InjectionFailed")
