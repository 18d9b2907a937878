"""The planner on hand-made cases: profiles, refusals, status and the generated manifests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from opsuite_packaging.crd import build_crd
from poddebugger_manifests import CRD, SAMPLES, image_allowlist_policy
from poddebugger_operator.__main__ import ENV_PREFIXES, split_args
from poddebugger_operator.deadline import DEADLINE_EXCEEDED
from poddebugger_operator.models import MAX_PODS_LIMIT, MAX_STATE_MESSAGE
from poddebugger_operator.names import container_name, ephemeral_container
from poddebugger_operator.pods import injection_may_be_due
from poddebugger_operator.policy import admission_policy
from poddebugger_operator.reconcile import IMAGE_NOT_ALLOWED, INVALID_SPEC, plan
from poddebugger_operator.requester import REQUESTED_BY
from poddebugger_operator.spec import InvalidSpecError, parse_spec, security_context
from poddebugger_operator.status import CONTAINER_FAILED, DEBUGGED, INJECTION_FAILED, STARTING

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
                "runAsUser": 65532,
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
                "attempts": 1,
                "lastAttemptTime": "2026-01-01T00:00:00Z",
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


def _refused_at(attempts: int | None, at: str | None) -> dict[str, Any]:
    obj = debugger()
    entry: dict[str, Any] = {
        "pod": "a",
        "uid": "uid-a",
        "container": container_name("dbg", parse_spec(obj)),
        "reason": "Rejected",
        "message": "violates PodSecurity",
    }
    if attempts is not None:
        entry["attempts"] = attempts
    if at is not None:
        entry["lastAttemptTime"] = at
    obj["status"] = {"failedPods": [entry]}
    return obj


@pytest.mark.parametrize(
    ("attempts", "backoff"),
    [(1, 60), (2, 120), (3, 240), (5, 960), (6, 1000), (10**6, 1000)],
)
def test_a_refused_pod_is_tried_again_after_a_backoff_that_doubles_to_1000_s(
    attempts: int, backoff: int
) -> None:
    obj = _refused_at(attempts, "2026-01-01T00:00:00Z")
    early = plan(obj, [pod("a")], NOW + timedelta(seconds=backoff - 1))
    assert early.injections == ()
    assert early.requeue_after == pytest.approx(1)
    due = plan(obj, [pod("a")], NOW + timedelta(seconds=backoff))
    assert [(i.pod_name, i.attempt) for i in due.injections] == [("a", attempts + 1)]
    assert due.requeue_after is None


def test_a_refusal_recorded_without_its_time_is_tried_again_at_once() -> None:
    """A status written by an operator that did not record when (an upgrade): one attempt."""
    (injection,) = plan(_refused_at(None, None), [pod("a")], NOW).injections
    assert injection.attempt == 2


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
    assert columns == ["Image", "Mode", "Matched", "Debugged", "Ready", "Reason", "Age"]
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
    qualified = debugger(image="docker.io/library/busybox:1")
    allowed = plan(qualified, [pod("a")], NOW, allowed_prefixes=("busybox",))
    assert [i.pod_name for i in allowed.injections] == ["a"]


def test_a_short_image_name_is_refused_under_an_allowlist() -> None:
    """#31, item 7: CRI-O resolves a short name through its search registries, so under an
    allowlist only a fully qualified image is injected; without one, short names are fine."""
    short = debugger(image="busybox:1")
    actions = plan(short, [pod("a")], NOW, allowed_prefixes=("busybox",))
    assert actions.injections == ()
    assert actions.status_patch is not None
    degraded = next(c for c in actions.status_patch["conditions"] if c["type"] == "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", IMAGE_NOT_ALLOWED)
    assert "names no registry" in degraded["message"]
    assert "docker.io/library/busybox:1" in degraded["message"]
    assert [i.pod_name for i in plan(short, [pod("a")], NOW).injections] == ["a"]


def test_allowed_image_prefix_flag_is_repeatable_and_the_rest_goes_to_the_common_flags() -> None:
    settings, rest = split_args(
        ["--allowed-image-prefix=busybox", "--namespace=x", "--allowed-image-prefix", "reg/"], {}
    )
    assert (settings.allowed_prefixes, rest) == (("busybox", "reg/"), ["--namespace=x"])
    settings, rest = split_args([], {ENV_PREFIXES: "a/, b/"})
    assert (settings.allowed_prefixes, rest) == (("a/", "b/"), [])


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


# --- runAsUser: the restricted profile runs a root image as a non-root user ----------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({}, {"runAsNonRoot": True, "runAsUser": 65532}),
        ({"runAsUser": 1000}, {"runAsNonRoot": True, "runAsUser": 1000}),
        ({"profile": "restricted", "runAsUser": 7}, {"runAsNonRoot": True, "runAsUser": 7}),
        ({"profile": "baseline"}, None),
        ({"profile": "baseline", "runAsUser": 1000}, {"runAsUser": 1000}),
        ({"profile": "general"}, {"capabilities": {"add": ["SYS_PTRACE"]}}),
        ({"profile": "sysadmin", "runAsUser": 0}, {"privileged": True, "runAsUser": 0}),
        (
            {"profile": "netadmin", "runAsUser": 5},
            {"capabilities": {"add": ["NET_ADMIN", "NET_RAW"]}, "runAsUser": 5},
        ),
    ],
)
def test_run_as_user_defaults_to_65532_under_restricted_and_is_only_set_elsewhere_when_given(
    spec: dict[str, Any], expected: dict[str, Any] | None
) -> None:
    context = ephemeral_container("dbg", parse_spec(debugger(**spec))).get("securityContext")
    if expected is None:
        assert context is None
    else:
        assert context is not None
        assert {k: context[k] for k in expected} == expected
        if "runAsUser" not in spec and spec.get("profile", "restricted") != "restricted":
            assert "runAsUser" not in context


def test_the_run_as_user_is_part_of_the_container_name() -> None:
    names = {
        container_name("dbg", parse_spec(debugger(**spec)))
        for spec in ({}, {"runAsUser": 65532}, {"runAsUser": 1000})
    }
    assert len(names) == 2  # the default is 65532: spelling it out is the same container


@pytest.mark.parametrize("spec", [{"runAsUser": 0}, {"runAsUser": 0, "profile": "restricted"}])
def test_root_under_the_restricted_profile_is_an_invalid_spec(spec: dict[str, Any]) -> None:
    with pytest.raises(InvalidSpecError, match=r"spec.*runAsUser.*restricted"):
        parse_spec(debugger(**spec))
    actions = plan(debugger(**spec), [pod("a")], NOW)
    assert actions.injections == ()
    assert actions.status_patch is not None
    ready = next(c for c in actions.status_patch["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", INVALID_SPEC)
    assert "runAsUser" in ready["message"]


def test_negative_run_as_user_is_refused() -> None:
    with pytest.raises(InvalidSpecError, match="runAsUser"):
        parse_spec(debugger(runAsUser=-1))


def test_the_crd_refuses_root_under_restricted_with_a_cel_rule() -> None:
    spec = build_crd(CRD)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    field = spec["properties"]["runAsUser"]
    assert (field["type"], field["format"], field["minimum"]) == ("integer", "int64", 0)
    assert field["maximum"] == 2147483647
    assert "65532" in field["description"]
    rules = {r["rule"]: r for r in spec["x-kubernetes-validations"]}
    rule = rules[
        "!has(self.runAsUser) || self.runAsUser != 0 "
        "|| (has(self.profile) && self.profile != 'restricted')"
    ]
    assert rule["fieldPath"] == ".runAsUser"
    assert rule["reason"] == "FieldValueForbidden"
    assert "restricted" in rule["message"]
    assert "root" in rule["message"]


# --- truthful status: the kubelet's view of each container decides Ready and Degraded ------

CURRENT = container_name("dbg", parse_spec(debugger()))
OLD = container_name("dbg", parse_spec(debugger(image="old")))
CONFIG_ERROR = (
    'container has runAsNonRoot and image will run as root (pod: "a_ns(uid-a)", '
    f"container: {CURRENT})"
)


def running() -> dict[str, Any]:
    return {"running": {"startedAt": "2026-01-01T00:00:00Z"}}


def waiting(reason: str, message: str = "") -> dict[str, Any]:
    return {"waiting": {"reason": reason, **({"message": message} if message else {})}}


def terminated(code: int, reason: str = "Error") -> dict[str, Any]:
    return {
        "terminated": {"exitCode": code, "reason": reason, "finishedAt": "2026-01-01T00:00:09Z"}
    }


def reported(name: str, *states: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """A pod holding the containers named in ``states``, each reported in that state
    (an empty state: not reported by the kubelet yet)."""
    record = pod(name, *(c for c, _ in states))
    record["status"]["ephemeralContainerStatuses"] = [
        {"name": c, "state": s, "ready": False, "restartCount": 0, "image": "busybox"}
        for c, s in states
        if s
    ]
    return record


def conditions(status: dict[str, Any] | None) -> dict[str, tuple[str, str, str]]:
    assert status is not None
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in status["conditions"]}


def entries(status: dict[str, Any] | None) -> dict[tuple[str, str], dict[str, Any]]:
    assert status is not None
    return {(d["pod"], d["container"]): d for d in status["debuggedPods"]}


def test_debugged_pods_report_the_kubelets_state_reason_message_and_exit_code() -> None:
    pods = [
        reported("a", (CURRENT, waiting("CreateContainerConfigError", CONFIG_ERROR))),
        reported("b", (CURRENT, terminated(2))),
        reported("c", (CURRENT, running())),
        reported("d", (CURRENT, {})),
        reported("e", (CURRENT, waiting("ContainerCreating"))),
    ]
    found = entries(plan(debugger(), pods, NOW).status_patch)
    assert found[("a", CURRENT)] == {
        "pod": "a",
        "container": CURRENT,
        "image": "busybox",
        "state": "Waiting",
        "reason": "CreateContainerConfigError",
        "message": CONFIG_ERROR,
    }
    assert found[("b", CURRENT)] == {
        "pod": "b",
        "container": CURRENT,
        "image": "busybox",
        "state": "Terminated",
        "reason": "Error",
        "exitCode": 2,
    }
    # Running: the four fields, as before.
    assert found[("c", CURRENT)] == {
        "pod": "c",
        "container": CURRENT,
        "image": "busybox",
        "state": "Running",
    }
    assert found[("d", CURRENT)]["state"] == "Unknown"
    assert found[("e", CURRENT)] == {
        "pod": "e",
        "container": CURRENT,
        "image": "busybox",
        "state": "Waiting",
        "reason": "ContainerCreating",
    }


def test_an_empty_reported_state_is_waiting_as_the_api_defines_it() -> None:
    record = reported("a", (CURRENT, running()))
    record["status"]["ephemeralContainerStatuses"][0]["state"] = {}
    assert entries(plan(debugger(), [record], NOW).status_patch)[("a", CURRENT)]["state"] == (
        "Waiting"
    )


@pytest.mark.parametrize(
    "states",
    [
        [running()],
        [running(), terminated(0, "Completed")],
        [terminated(0, "Completed")],
    ],
)
def test_ready_when_every_current_container_runs_or_exited_zero(
    states: list[dict[str, Any]],
) -> None:
    pods = [reported(f"p{i}", (CURRENT, s)) for i, s in enumerate(states)]
    found = conditions(plan(debugger(), pods, NOW).status_patch)
    assert found["Ready"][:2] == ("True", DEBUGGED)
    assert found["Degraded"][:2] == ("False", "AsExpected")


@pytest.mark.parametrize(
    "state",
    [{}, waiting("ContainerCreating"), waiting("PodInitializing"), {"waiting": {}}],
)
def test_starting_while_a_container_is_created_or_not_reported(state: dict[str, Any]) -> None:
    pods = [reported("a", (CURRENT, running())), reported("b", (CURRENT, state))]
    found = conditions(plan(debugger(), pods, NOW).status_patch)
    assert found["Ready"][:2] == ("False", STARTING)
    assert "1 of 2" in found["Ready"][2]
    assert "b" in found["Ready"][2]
    assert found["Degraded"][:2] == ("False", "AsExpected")


def test_a_container_just_added_is_starting() -> None:
    actions = plan(debugger(), [pod("a")], NOW)
    assert [i.pod_name for i in actions.injections] == ["a"]
    found = conditions(actions.status_patch)
    assert found["Ready"][:2] == ("False", STARTING)
    assert entries(actions.status_patch)[("a", CURRENT)]["state"] == "Unknown"


@pytest.mark.parametrize(
    ("state", "shown"),
    [
        (waiting("CreateContainerConfigError", CONFIG_ERROR), "CreateContainerConfigError"),
        (waiting("ErrImagePull", 'failed to pull image "busybox"'), "ErrImagePull"),
        (waiting("ImagePullBackOff", 'Back-off pulling image "busybox"'), "ImagePullBackOff"),
        (waiting("InvalidImageName"), "InvalidImageName"),
        (waiting("CreateContainerError"), "CreateContainerError"),
        (waiting("RunContainerError"), "RunContainerError"),
        (waiting("CrashLoopBackOff"), "CrashLoopBackOff"),
        (waiting("SomeFutureKubeletError"), "SomeFutureKubeletError"),
        (terminated(1), "exit code 1"),
        (terminated(128, "StartError"), "StartError"),
    ],
)
def test_a_failed_container_makes_the_debugger_degraded_naming_pod_container_and_reason(
    state: dict[str, Any], shown: str
) -> None:
    pods = [reported("a", (CURRENT, running())), reported("b", (CURRENT, state))]
    found = conditions(plan(debugger(), pods, NOW).status_patch)
    assert found["Ready"][:2] == ("False", CONTAINER_FAILED)
    status, reason, message = found["Degraded"]
    assert (status, reason) == ("True", CONTAINER_FAILED)
    assert f"b/{CURRENT}" in message
    assert shown in message
    assert "a/" not in message
    if state.get("waiting", {}).get("message"):
        assert state["waiting"]["message"] in message


def test_failures_outrank_containers_still_starting() -> None:
    pods = [
        reported("a", (CURRENT, waiting("ContainerCreating"))),
        reported("b", (CURRENT, waiting("ErrImagePull"))),
    ]
    assert conditions(plan(debugger(), pods, NOW).status_patch)["Ready"][1] == CONTAINER_FAILED


def test_refusals_and_failed_containers_are_both_named() -> None:
    obj = debugger()
    obj["status"] = {
        "failedPods": [
            {
                "pod": "a",
                "uid": "uid-a",
                "container": CURRENT,
                "reason": "Rejected",
                "message": "no",
                "attempts": 1,
                "lastAttemptTime": "2026-01-01T00:00:00Z",
            }
        ]
    }
    pods = [pod("a"), reported("b", (CURRENT, waiting("ErrImagePull")))]
    status, reason, message = conditions(plan(obj, pods, NOW).status_patch)["Degraded"]
    assert (status, reason) == ("True", INJECTION_FAILED)
    assert "a: no" in message
    assert f"b/{CURRENT}: ErrImagePull" in message


def test_containers_of_an_older_spec_are_listed_but_do_not_decide_ready() -> None:
    # The old image never pulled; the spec was fixed: the new container runs.
    pods = [reported("a", (OLD, waiting("ImagePullBackOff")), (CURRENT, running()))]
    actions = plan(debugger(), pods, NOW)
    found = conditions(actions.status_patch)
    assert found["Ready"][:2] == ("True", DEBUGGED)
    assert found["Degraded"][:2] == ("False", "AsExpected")
    assert entries(actions.status_patch)[("a", OLD)]["reason"] == "ImagePullBackOff"


def test_kubelet_messages_and_reasons_are_bounded_to_the_schema() -> None:
    long = "x" * 5000
    pods = [reported("a", (CURRENT, waiting("Weird reason!" + long, long)))]
    status = plan(debugger(), pods, NOW).status_patch
    entry = entries(status)[("a", CURRENT)]
    assert len(entry["reason"]) <= 128
    assert len(entry["message"]) <= MAX_STATE_MESSAGE
    assert status is not None
    assert all(len(c["message"]) <= 1024 for c in status["conditions"])


def test_debugged_pods_keep_within_their_bound_current_containers_first() -> None:
    olds = [container_name("dbg", parse_spec(debugger(image=f"old{i}"))) for i in range(3)]
    pods = [reported(f"p{i:03}", *((n, running()) for n in olds)) for i in range(100)]
    for record in pods[:40]:
        record["spec"]["ephemeralContainers"].append({"name": CURRENT, "image": "busybox"})
        record["status"]["ephemeralContainerStatuses"].append(
            {"name": CURRENT, "state": waiting("ErrImagePull")}
        )
    actions = plan(debugger(maxPods=40), pods, NOW)
    status = actions.status_patch
    assert status is not None
    listed = status["debuggedPods"]
    assert len(listed) == 2 * MAX_PODS_LIMIT
    assert sum(d["container"] == CURRENT for d in listed) == 40
    assert listed == sorted(listed, key=lambda d: (d["pod"], d["container"]))
    assert conditions(status)["Degraded"][:2] == ("True", CONTAINER_FAILED)
    assert "40 debug containers failed" in conditions(status)["Degraded"][2]


def test_a_status_that_did_not_change_is_not_written_again() -> None:
    pods = [
        reported("a", (CURRENT, waiting("CreateContainerConfigError", CONFIG_ERROR))),
        reported("b", (CURRENT, waiting("ContainerCreating"))),
        reported("c", (CURRENT, terminated(0, "Completed"))),
    ]
    first = plan(debugger(), pods, NOW).status_patch
    assert first is not None
    later = datetime(2026, 1, 1, 0, 5, tzinfo=UTC)
    assert plan({**debugger(), "status": first}, pods, later).status_patch is None
    # The kubelet's next word is written.
    pods[1]["status"]["ephemeralContainerStatuses"][0]["state"] = running()
    assert plan({**debugger(), "status": first}, pods, later).status_patch is not None


def test_each_injection_names_the_debugger_and_its_requester_for_its_events() -> None:
    recorded = debugger()
    recorded["metadata"]["annotations"] = {REQUESTED_BY: "alice"}
    (injection,) = plan(recorded, [pod("new")], NOW).injections
    assert injection.by == "PodDebugger ns/dbg (requested by alice)"
    (injection,) = plan(debugger(), [pod("new")], NOW).injections
    assert injection.by == "PodDebugger ns/dbg (requester not recorded)"


def _with_deadline(seconds: int, created: datetime = NOW) -> dict[str, Any]:
    made = debugger(activeDeadlineSeconds=seconds, command=["sleep", "3600"])
    made["metadata"]["creationTimestamp"] = created.strftime("%Y-%m-%dT%H:%M:%SZ")
    return made


def test_before_the_deadline_it_injects_and_asks_to_run_again_at_the_deadline() -> None:
    actions = plan(_with_deadline(60), [pod("new")], NOW + timedelta(seconds=15))
    assert [i.pod_name for i in actions.injections] == ["new"]
    assert actions.requeue_after == 45


def test_after_the_deadline_nothing_is_added_the_status_says_so_once_and_then_is_quiet() -> None:
    name = container_name("dbg", parse_spec(_with_deadline(60)))
    made = _with_deadline(60)
    pods = [pod("had-it", name), pod("late")]
    later = NOW + timedelta(seconds=60)
    actions = plan(made, pods, later, requester="would be asked otherwise")
    assert actions.injections == ()
    assert actions.requeue_after is None
    status = actions.status_patch
    assert status is not None
    assert status["observedGeneration"] == 2
    ready = conditions(status)["Ready"]
    assert ready[:2] == ("False", DEADLINE_EXCEEDED)
    assert ready[2].startswith(
        "activeDeadlineSeconds 60 passed (2026-01-01T00:01:00Z): no debug container is added"
    )
    assert ready[2].endswith("; 1 of 2 matching pods debugged")
    assert conditions(status)["Degraded"][:2] == ("False", "AsExpected")
    assert (status["matchedPods"], status["debuggedCount"]) == (2, 1)
    made["status"] = status
    again = plan(made, pods, later + timedelta(hours=1))
    assert (again.injections, again.status_patch, again.requeue_after) == ((), None, None)


def test_raising_the_deadline_reopens_the_window_counted_from_creation() -> None:
    actions = plan(_with_deadline(120), [pod("late")], NOW + timedelta(seconds=60))
    assert [i.pod_name for i in actions.injections] == ["late"]
    assert actions.requeue_after == 60


def test_past_the_deadline_a_refused_pod_stays_reported_and_is_not_tried_again() -> None:
    made = _with_deadline(60)
    name = container_name("dbg", parse_spec(made))
    made["status"] = {
        "failedPods": [
            {
                "pod": "web",
                "uid": "uid-web",
                "container": name,
                "reason": "Rejected",
                "message": "forbidden",
                "attempts": 1,
                "lastAttemptTime": "2026-01-01T00:00:30Z",
            }
        ]
    }
    actions = plan(made, [pod("web")], NOW + timedelta(hours=1))
    assert (actions.injections, actions.requeue_after) == ((), None)
    assert actions.status_patch is not None
    assert [f["pod"] for f in actions.status_patch["failedPods"]] == ["web"]
    assert conditions(actions.status_patch)["Ready"][1] == DEADLINE_EXCEEDED
    assert conditions(actions.status_patch)["Degraded"][:2] == ("True", INJECTION_FAILED)


def test_a_deadline_without_a_readable_creation_time_has_passed() -> None:
    made = _with_deadline(60)
    del made["metadata"]["creationTimestamp"]
    actions = plan(made, [pod("new")], NOW)
    assert actions.injections == ()
    assert actions.status_patch is not None
    assert "creation time is unknown" in conditions(actions.status_patch)["Ready"][2]


def _with_containers(record: dict[str, Any], *names: str, init: tuple[str, ...] = ()) -> Any:
    record["spec"]["containers"] = [{"name": n} for n in names]
    if init:
        record["spec"]["initContainers"] = [{"name": n} for n in init]
    return record


def test_a_target_container_is_set_only_in_pods_that_have_it() -> None:
    made = debugger(targetContainer="app", maxPods=2)
    pods = [
        _with_containers(pod("a"), "app", "sidecar"),
        _with_containers(pod("b"), "main"),  # lacks it: reported, takes no slot
        _with_containers(pod("c"), "main", init=("app",)),  # an init container is a target
    ]
    actions = plan(made, pods, NOW)
    assert [i.pod_name for i in actions.injections] == ["a", "c"]
    assert {i.container["targetContainerName"] for i in actions.injections} == {"app"}
    status = actions.status_patch
    assert status is not None
    (failed,) = status["failedPods"]
    name = container_name("dbg", parse_spec(made))
    assert failed == {
        "pod": "b",
        "uid": "uid-b",
        "container": name,
        "reason": "TargetContainerNotFound",
        "message": "the pod has no container app (spec.targetContainer)",
    }
    assert (status["matchedPods"], status["debuggedCount"], status["skippedPods"]) == (3, 2, 0)
    assert conditions(status)["Degraded"][:2] == ("True", INJECTION_FAILED)
    assert "b: the pod has no container app" in conditions(status)["Degraded"][2]
    assert [f.pod for f in actions.unfit] == ["b"]
    assert actions.by == "PodDebugger ns/dbg (requester not recorded)"


def test_a_pod_without_the_target_is_announced_once_and_never_tried() -> None:
    made = debugger(targetContainer="app")
    pods = [_with_containers(pod("b"), "main")]
    first = plan(made, pods, NOW)
    assert first.injections == ()
    made["status"] = first.status_patch
    later = plan(made, pods, NOW + timedelta(hours=2))
    assert (later.injections, later.unfit, later.status_patch) == ((), (), None)
    assert later.requeue_after is None
