"""Mode Copy: the copy a pod gets (pure), the planner in mode Copy, what it requires of the
requester and at admission."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opsuite_common.requester import Access
from poddebugger_operator.actions import slim_pod
from poddebugger_operator.copies import (
    COPY_LABEL,
    COPY_NAME_TAKEN,
    COPY_OF,
    copy_meta,
    copy_name,
    copy_pod,
    placeholder,
)
from poddebugger_operator.models import TARGET_IN_COPY
from poddebugger_operator.names import container_name, ephemeral_container
from poddebugger_operator.policy import admission_policy
from poddebugger_operator.reconcile import plan
from poddebugger_operator.requester import needs
from poddebugger_operator.spec import InvalidSpecError, parse_spec, security_context
from poddebugger_operator.status import DEBUGGED, STARTING

NOW = datetime(2026, 1, 1, tzinfo=UTC)
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def debugger(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "dbg", "namespace": "ns", "uid": "dbg-uid", "generation": 1},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "image": "busybox",
            "mode": "Copy",
            **spec,
        },
    }


def full_pod(name: str = "web-1", **spec: Any) -> dict[str, Any]:
    """A pod as the API server returns it."""
    probe = {"httpGet": {"port": 80}}
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "labels": {"app": "web", "pod-template-hash": "abc"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "x"},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs"}
            ],
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {
            "nodeName": "node-1",
            "containers": [
                {
                    "name": "app",
                    "image": "app:1",
                    "livenessProbe": probe,
                    "readinessProbe": probe,
                    "startupProbe": probe,
                    "securityContext": {"privileged": True},
                }
            ],
            "ephemeralContainers": [{"name": "old", "image": "busybox"}],
            "volumes": [{"name": "data", "emptyDir": {}}],
            **spec,
        },
        "status": {"phase": "Running", "containerStatuses": [{"name": "app"}]},
    }


def test_copy_is_the_pods_spec_with_the_debug_container_and_the_operators_metadata() -> None:
    deb = debugger(command=["sh"])
    spec = parse_spec(deb)
    container = ephemeral_container("dbg", spec)
    meta = copy_meta(deb, full_pod())
    copy = copy_pod(meta, full_pod(), container)
    assert copy["metadata"] == {
        "name": copy_name("dbg", "web-1"),
        "namespace": "ns",
        "labels": {COPY_LABEL: "dbg-uid"},
        "annotations": {COPY_OF: "web-1"},
        "ownerReferences": [
            {
                "apiVersion": "debug.opsuite.dev/v1alpha1",
                "kind": "PodDebugger",
                "name": "dbg",
                "uid": "dbg-uid",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    assert copy["spec"] == {
        "containers": [
            {"name": "app", "image": "app:1", "securityContext": {"privileged": True}},
            container,
        ],
        "volumes": [{"name": "data", "emptyDir": {}}],
        "shareProcessNamespace": True,
    }
    assert container["securityContext"] == security_context("restricted")
    assert "status" not in copy


def test_copy_name_is_a_dns_label_per_debugger_and_pod() -> None:
    assert copy_name("dbg", "web-1").startswith("web-1-debug-")
    assert copy_name("dbg", "web-1") == copy_name("dbg", "web-1")
    assert copy_name("dbg", "web-1") != copy_name("dbg2", "web-1")
    long = copy_name("dbg", "a" * 253)
    assert len(long) == 63
    assert DNS_LABEL.fullmatch(long)


def test_target_container_is_refused_in_copy_mode() -> None:
    with pytest.raises(InvalidSpecError, match="targetContainer is for mode Ephemeral"):
        parse_spec(debugger(targetContainer="app"))
    assert TARGET_IN_COPY.startswith("targetContainer")


def _copy_record(deb: dict[str, Any], pod: dict[str, Any], state: dict[str, Any]) -> Any:
    spec = parse_spec(deb)
    full = copy_pod(copy_meta(deb, pod), pod, ephemeral_container("dbg", spec))
    full["metadata"]["uid"] = "copy-uid"
    name = container_name("dbg", spec)
    full["status"] = {"phase": "Running", "containerStatuses": [{"name": name, "state": state}]}
    return slim_pod(full)


def test_plan_creates_one_copy_per_pod_then_reports_it_and_stays_quiet() -> None:
    deb = debugger(maxPods=1)
    pods = [slim_pod(full_pod("web-1")), slim_pod(full_pod("web-2"))]
    first = plan(deb, pods, NOW)
    (injection,) = first.injections
    assert injection.pod_name == "web-1"
    assert injection.copy == copy_meta(deb, full_pod("web-1"))
    assert first.outcome.skipped == 1
    assert first.status_patch is not None
    assert first.status_patch["debuggedPods"][0]["copyPod"] == copy_name("dbg", "web-1")

    # In flight: the placeholder stands for the copy, so nothing is sent again.
    held = placeholder(injection.copy, injection.container)
    assert plan(deb, [*pods, slim_pod(held)], NOW).injections == ()

    # Created and running: reported from the copy's containerStatuses, Ready.
    copy = _copy_record(deb, full_pod("web-1"), {"running": {}})
    deb["status"] = first.status_patch
    done = plan(deb, [*pods, copy], NOW)
    assert done.injections == ()
    assert done.status_patch is not None
    (entry,) = done.status_patch["debuggedPods"]
    assert (entry["pod"], entry["copyPod"], entry["state"]) == (
        "web-1",
        copy_name("dbg", "web-1"),
        "Running",
    )
    ready = next(c for c in done.status_patch["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("True", DEBUGGED)
    deb["status"] = done.status_patch
    assert plan(deb, [*pods, copy], NOW).status_patch is None  # quiet

    # A new spec does not rewrite the existing copy.
    deb["spec"]["image"] = "busybox:1.37"
    assert plan(deb, [*pods, copy], NOW).injections == ()


def test_a_waiting_copy_is_starting_and_copies_are_never_copied() -> None:
    deb = debugger(selector={"matchExpressions": [{"key": COPY_LABEL, "operator": "Exists"}]})
    copy = _copy_record(debugger(), full_pod(), {"waiting": {"reason": "ContainerCreating"}})
    assert plan(deb, [copy], NOW).injections == ()  # a copy matches no debugger
    deb = debugger()
    result = plan(deb, [slim_pod(full_pod()), copy], NOW)
    assert result.status_patch is not None
    ready = next(c for c in result.status_patch["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", STARTING)


def test_a_copy_name_another_pod_holds_is_reported_and_nothing_is_created() -> None:
    """Another debugger's copy of that name (one of the same name, deleted and re-created, whose
    copy the garbage collector has not removed yet) or any other pod: the POST would fail (409)
    at every retry. The pod is reported (CopyNameTaken, no maxPods slot); once the name is free
    the copy is made."""
    other = debugger()
    other["metadata"]["uid"] = "other-uid"
    squatter = slim_pod(full_pod(copy_name("dbg", "web-1")))
    squatter["metadata"]["labels"] = {}
    for holder in (_copy_record(other, full_pod(), {"running": {}}), squatter):
        result = plan(debugger(maxPods=1), [slim_pod(full_pod()), holder], NOW)
        assert result.injections == ()
        (failure,) = result.unfit
        assert (failure.pod, failure.reason) == ("web-1", COPY_NAME_TAKEN)
        assert copy_name("dbg", "web-1") in failure.message
        assert result.status_patch is not None
        assert result.status_patch["failedPods"][0]["reason"] == COPY_NAME_TAKEN
    (injection,) = plan(debugger(), [slim_pod(full_pod())], NOW).injections
    assert injection.copy is not None


def test_copy_mode_requires_create_pods_of_the_requester_and_at_admission() -> None:
    assert Access("ns", "create", "pods") in needs(debugger())
    assert Access("ns", "create", "pods") not in needs(debugger(mode="Ephemeral"))
    expressions = [v["expression"] for v in admission_policy()[0]["spec"]["validations"]]
    (rule,) = [e for e in expressions if "'Copy'" in e]
    assert ".check('create')" in rule
    assert "resource('pods')" in rule


# --- properties --------------------------------------------------------------------------------

names = st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,250}[a-z0-9])?", fullmatch=True)
label_maps = st.dictionaries(
    st.from_regex(r"[a-z]{1,10}", fullmatch=True), st.from_regex(r"[a-z0-9]{0,10}", fullmatch=True)
)
contexts = st.dictionaries(
    st.sampled_from(["privileged", "runAsUser", "runAsNonRoot"]), st.booleans() | st.integers(0, 9)
)


@settings(max_examples=200, deadline=None)
@given(
    debugger_name=names,
    pod_name=names,
    labels=label_maps,
    context=contexts,
    profile=st.sampled_from(["general", "baseline", "restricted", "netadmin", "sysadmin"]),
    owners=st.booleans(),
)
def test_the_copy_never_carries_the_originals_labels_or_owners_and_the_profile_wins(
    debugger_name: str,
    pod_name: str,
    labels: dict[str, str],
    context: dict[str, Any],
    profile: str,
    owners: bool,
) -> None:
    deb = debugger(profile=profile)
    deb["metadata"]["name"] = debugger_name
    pod = full_pod(pod_name)
    pod["metadata"]["labels"] = labels
    if not owners:
        del pod["metadata"]["ownerReferences"]
    spec = parse_spec(deb)
    container = ephemeral_container(debugger_name, spec)
    # The original's containers may even be named as the debug container: replaced, not kept.
    pod["spec"]["containers"].append({"name": container["name"], "securityContext": context})
    copy = copy_pod(copy_meta(deb, pod), pod, container)
    meta = copy["metadata"]
    assert meta["labels"] == {COPY_LABEL: "dbg-uid"}
    assert [o["uid"] for o in meta["ownerReferences"]] == ["dbg-uid"]
    assert DNS_LABEL.fullmatch(meta["name"])
    assert len(meta["name"]) <= 63
    debug = [c for c in copy["spec"]["containers"] if c["name"] == container["name"]]
    assert debug == [container]
    assert debug[0].get("securityContext") == security_context(spec.profile, spec.run_as_user)
    assert "nodeName" not in copy["spec"]
    assert "ephemeralContainers" not in copy["spec"]
    assert copy["spec"]["shareProcessNamespace"] is True
    assert pod["metadata"]["labels"] == labels  # the original is not changed
