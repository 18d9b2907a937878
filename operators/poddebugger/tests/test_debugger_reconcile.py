"""The planner on hand-made cases: profiles, refusals, status and the generated manifests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from opsuite_common.crd import build_crd
from poddebugger_operator.__main__ import ENV_PREFIXES, split_args
from poddebugger_operator.manifests import (
    CRD,
    SAMPLES,
    admission_policy,
    image_allowlist_policy,
)
from poddebugger_operator.reconcile import (
    IMAGE_NOT_ALLOWED,
    INJECTION_FAILED,
    INVALID_SPEC,
    container_name,
    ephemeral_container,
    injection_may_be_due,
    parse_spec,
    plan,
    security_context,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def debugger(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "dbg", "namespace": "ns", "uid": "u", "generation": 2},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "image": "busybox", **spec},
    }


def pod(name: str, *containers: str, phase: str = "Running", ns: str = "ns") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}", "labels": {"app": "web"}},
        "spec": {"ephemeralContainers": [{"name": c, "image": "busybox"} for c in containers]},
        "status": {"phase": phase},
    }


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        (
            "restricted",
            {
                "runAsNonRoot": True,
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
                "seccompProfile": {"type": "RuntimeDefault"},
            },
        ),
        ("general", {"capabilities": {"add": ["SYS_PTRACE"]}}),
        ("baseline", None),
        ("netadmin", {"capabilities": {"add": ["NET_ADMIN", "NET_RAW"]}}),
        ("sysadmin", {"privileged": True}),
    ],
)
def test_profiles_set_the_security_context_as_kubectl_debug(
    profile: Any, expected: dict[str, Any] | None
) -> None:
    assert security_context(profile) == expected
    container = ephemeral_container("dbg", parse_spec(debugger(profile=profile)))
    assert container.get("securityContext") == expected


def test_container_carries_the_spec() -> None:
    spec = parse_spec(
        debugger(
            command=["sh"],
            args=["-c", "sleep 1"],
            env=[{"name": "A", "value": "1"}],
            stdin=True,
            tty=True,
            targetContainer="main",
        )
    )
    container = ephemeral_container("dbg", spec)
    assert container["name"] == container_name("dbg", spec)
    assert container["name"].startswith("pdbg-dbg-")
    assert {k: container[k] for k in ("image", "command", "args", "env", "stdin", "tty")} == {
        "image": "busybox",
        "command": ["sh"],
        "args": ["-c", "sleep 1"],
        "env": [{"name": "A", "value": "1"}],
        "stdin": True,
        "tty": True,
    }
    assert container["targetContainerName"] == "main"


def test_terminated_foreign_and_debugged_pods_are_left_alone() -> None:
    name = container_name("dbg", parse_spec(debugger()))
    pods = [
        pod("done", phase="Succeeded"),
        pod("elsewhere", ns="other"),
        pod("has-it", name),
        pod("new"),
    ]
    actions = plan(debugger(), pods, NOW)
    assert [i.pod_name for i in actions.injections] == ["new"]
    status = actions.status_patch
    assert status is not None
    assert (status["matchedPods"], status["debuggedCount"], status["skippedPods"]) == (2, 2, 0)


def test_max_pods_prefers_pods_already_debugged_then_reports_the_rest() -> None:
    old = container_name("dbg", parse_spec(debugger(image="old")))
    pods = [pod("a"), pod("b"), pod("c", old)]
    actions = plan(debugger(maxPods=1), pods, NOW)
    assert [i.pod_name for i in actions.injections] == ["c"]
    assert actions.outcome.skipped == 2
    assert "2 more matching pods over maxPods" in str(actions.status_patch)


def test_refused_pods_are_reported_and_not_retried_for_the_same_container() -> None:
    obj = debugger()
    name = container_name("dbg", parse_spec(obj))
    obj["status"] = {
        "failedPods": [
            {
                "pod": "a",
                "uid": "uid-a",
                "container": name,
                "reason": "Rejected",
                "message": "violates PodSecurity",
            }
        ]
    }
    actions = plan(obj, [pod("a")], NOW)
    assert actions.injections == ()
    status = actions.status_patch
    assert status is not None
    degraded = next(c for c in status["conditions"] if c["type"] == "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", INJECTION_FAILED)
    assert "violates PodSecurity" in degraded["message"]
    # A recreated pod (new uid) is tried again.
    again = pod("a")
    again["metadata"]["uid"] = "uid-a2"
    assert [i.pod_name for i in plan(obj, [again], NOW).injections] == ["a"]


def test_invalid_spec_is_reported() -> None:
    obj = debugger()
    obj["spec"]["selector"] = {}
    actions = plan(obj, [pod("a")], NOW)
    assert actions.injections == ()
    assert actions.status_patch is not None
    ready = actions.status_patch["conditions"][0]
    assert (ready["status"], ready["reason"]) == ("False", INVALID_SPEC)


def test_crd_and_policy() -> None:
    crd = build_crd(CRD)
    names = crd["spec"]["names"]
    assert (names["shortNames"], names["categories"]) == (["pdbg"], ["opsuite"])
    version = crd["spec"]["versions"][0]
    columns = [c["name"] for c in version["additionalPrinterColumns"]]
    assert columns == ["Image", "Matched", "Debugged", "Ready", "Age"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert sorted(spec["required"]) == ["image", "selector"]
    assert spec["properties"]["selector"]["x-kubernetes-validations"]
    policy, binding = admission_policy()
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    rule = policy["spec"]["validations"][0]
    assert "subresource('ephemeralcontainers')" in rule["expression"]
    assert rule["reason"] == "Forbidden"
    parse_spec(SAMPLES[0])


def test_images_outside_the_allowed_prefixes_are_not_injected() -> None:
    actions = plan(debugger(image="alpine"), [pod("a")], NOW, allowed_prefixes=("busybox",))
    assert actions.injections == ()
    assert actions.status_patch is not None
    degraded = next(c for c in actions.status_patch["conditions"] if c["type"] == "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", IMAGE_NOT_ALLOWED)
    allowed = plan(debugger(image="busybox:1"), [pod("a")], NOW, allowed_prefixes=("busybox",))
    assert [i.pod_name for i in allowed.injections] == ["a"]


def test_allowed_image_prefix_flag_is_repeatable_and_the_rest_goes_to_the_common_flags(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ENV_PREFIXES, raising=False)
    prefixes, rest = split_args(
        ["--allowed-image-prefix=busybox", "--namespace=x", "--allowed-image-prefix", "reg/"]
    )
    assert (prefixes, rest) == (["busybox", "reg/"], ["--namespace=x"])
    monkeypatch.setenv(ENV_PREFIXES, "a/, b/")
    assert split_args([]) == (["a/", "b/"], [])


def test_image_allowlist_policy_is_a_policy_binding_and_a_cluster_scoped_param() -> None:
    policy, binding, params = image_allowlist_policy(("x/", "y"), param="mine")
    kind = {"apiVersion": params["apiVersion"], "kind": params["kind"]}
    assert (
        policy["spec"]["paramKind"]
        == kind
        == {
            "apiVersion": "debug.opsuite.dev/v1alpha1",
            "kind": "DebugImagePolicy",
        }
    )
    assert binding["spec"]["paramRef"] == {"name": "mine", "parameterNotFoundAction": "Deny"}
    assert params["metadata"] == {"name": "mine"}
    assert params["spec"] == {"allowedPrefixes": ["x/", "y"]}


def test_only_new_pods_and_label_changes_can_call_for_an_injection() -> None:
    meta = {"name": "p", "namespace": "ns", "uid": "p1"}
    pod = {"metadata": {**meta, "labels": {"app": "web"}}, "status": {"phase": "Pending"}}
    running = {**pod, "status": {"phase": "Running"}}
    relabelled = {**pod, "metadata": {**meta, "labels": {"app": "db"}}}
    assert injection_may_be_due(None, pod)
    assert not injection_may_be_due(pod, running)
    assert injection_may_be_due(pod, relabelled)
    # The planner agrees: a phase change alone plans no injection it did not plan before.
    d = debugger()
    assert plan(d, [pod], NOW).injections
    assert plan(d, [running], NOW).injections
