"""PodDebugger fails closed (#17, items 2 and 4): the admission gate, sysadmin, image references."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from opsuite_common.kube_model import LabelSelector
from opsuite_testkit import offline_manager
from poddebugger_operator import images
from poddebugger_operator.__main__ import split_args
from poddebugger_operator.gate import (
    LOAD_GRACE,
    NAME_LABEL,
    admission_problem,
    surely_selects,
)
from poddebugger_operator.handlers import BINDINGS, POLICIES, setup
from poddebugger_operator.policy import POLICY_NAME, admission_policy
from poddebugger_operator.reconcile import POLICY_MISSING, PROFILE_NOT_ALLOWED, plan

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NOW = T0 + timedelta(hours=1)


def stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def shipped() -> tuple[dict[str, Any], dict[str, Any]]:
    """The chart's policy and binding, as the API server returns them (created at T0)."""
    policy, binding = copy.deepcopy(admission_policy())
    for obj in (policy, binding):
        obj["metadata"]["creationTimestamp"] = stamp(T0)
    return policy, binding


def debugger(created: datetime = T0 + timedelta(minutes=1), **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": "ns",
            "name": "dbg",
            "uid": "u",
            "generation": 1,
            "creationTimestamp": stamp(created),
        },
        "spec": {"selector": {"matchLabels": {"app": "a"}}, "image": "busybox", **spec},
    }


POD = {
    "metadata": {"namespace": "ns", "name": "p", "uid": "up", "labels": {"app": "a"}},
    "spec": {"containers": [{"name": "main", "image": "app"}]},
    "status": {"phase": "Running"},
}


def problem(
    obj: dict[str, Any], policy: dict[str, Any] | None, *bindings: dict[str, Any]
) -> str | None:
    policies = {} if policy is None else {POLICY_NAME: policy}
    return admission_problem(obj, policies, bindings, admission_policy()[0])


def test_the_shipped_policy_and_binding_guard_a_debugger_created_after_them() -> None:
    policy, binding = shipped()
    assert problem(debugger(), policy, binding) is None


def test_without_the_policy_or_a_deny_binding_nothing_is_guarded() -> None:
    policy, binding = shipped()
    assert "does not exist" in (problem(debugger(), None, binding) or "")
    assert "no ValidatingAdmissionPolicyBinding" in (problem(debugger(), policy) or "")
    audit = copy.deepcopy(binding)
    audit["spec"]["validationActions"] = ["Audit", "Warn"]
    assert problem(debugger(), policy, audit) is not None
    other = copy.deepcopy(binding)
    other["spec"]["policyName"] = "something-else"
    assert problem(debugger(), policy, other) is not None


@pytest.mark.parametrize(
    "weaken",
    [
        lambda s: s.update(failurePolicy="Ignore"),
        lambda s: s["validations"][0].update(expression="true"),
        lambda s: s["matchConditions"].append({"name": "x", "expression": "false"}),
        lambda s: s["matchConstraints"]["resourceRules"][0].update(operations=["CREATE"]),
        lambda s: s["matchConstraints"].update(excludeResourceRules=[{"resources": ["*"]}]),
        lambda s: s["matchConstraints"].update(namespaceSelector={"matchLabels": {"a": "b"}}),
        lambda s: s["matchConstraints"].update(objectSelector={"matchLabels": {"a": "b"}}),
        # #31, item 4: rules that name the resource yet miss every PodDebugger.
        lambda s: s["matchConstraints"]["resourceRules"][0].update(resourceNames=["x"]),
        lambda s: s["matchConstraints"]["resourceRules"][0].update(scope="Cluster"),
        lambda s: s["matchConstraints"]["resourceRules"][0].update(apiVersions=["v1beta1"]),
        lambda s: (
            s["matchConstraints"]["resourceRules"][0].update(apiVersions=["v1beta1"]),
            s["matchConstraints"].update(matchPolicy="Exact"),
        ),
        lambda s: s["matchConstraints"]["resourceRules"][0].update(apiVersions=[]),
    ],
)
def test_a_policy_weakened_in_a_way_that_lets_requests_through_does_not_count(weaken: Any) -> None:
    policy, binding = shipped()
    weaken(policy["spec"])
    assert problem(debugger(), policy, binding) is not None


def test_defaults_the_api_server_adds_change_nothing() -> None:
    policy, binding = shipped()
    policy["spec"]["matchConstraints"].update(
        matchPolicy="Equivalent", namespaceSelector={}, objectSelector={}
    )
    binding["spec"]["matchResources"] = {"namespaceSelector": {}, "objectSelector": {}}
    assert problem(debugger(), policy, binding) is None


@pytest.mark.parametrize(
    "rule",
    [
        {"scope": "*"},
        {"scope": "Namespaced"},
        {"apiVersions": ["v1alpha1"]},
        {"resourceNames": []},
    ],
)
def test_rules_that_still_match_every_debugger_count(rule: dict[str, Any]) -> None:
    policy, binding = shipped()
    policy["spec"]["matchConstraints"]["resourceRules"][0].update(rule)
    assert problem(debugger(), policy, binding) is None


def test_a_binding_guards_only_the_namespaces_it_surely_selects() -> None:
    policy, binding = shipped()
    binding["spec"]["matchResources"] = {
        "namespaceSelector": {
            "matchExpressions": [{"key": NAME_LABEL, "operator": "In", "values": ["ns"]}]
        }
    }
    assert problem(debugger(), policy, binding) is None
    elsewhere = debugger()
    elsewhere["metadata"]["namespace"] = "other"
    assert "in namespace other" in (problem(elsewhere, policy, binding) or "")
    binding["spec"]["matchResources"] = {"objectSelector": {"matchLabels": {"checked": "yes"}}}
    assert problem(debugger(), policy, binding) is not None


def test_a_debugger_created_before_the_policy_was_in_force_is_not_acted_upon() -> None:
    policy, binding = shipped()
    assert "re-create" in (problem(debugger(T0 - timedelta(days=1)), policy, binding) or "")
    assert problem(debugger(T0 + LOAD_GRACE / 2), policy, binding) is not None
    assert problem(debugger(T0 + LOAD_GRACE), policy, binding) is None
    late = copy.deepcopy(binding)
    late["metadata"]["creationTimestamp"] = stamp(T0 + timedelta(hours=2))
    assert problem(debugger(), policy, late) is not None
    # The earliest binding that covers the namespace counts.
    assert problem(debugger(), policy, late, binding) is None


selector_keys = st.sampled_from([NAME_LABEL, "team"])
selector_values = st.lists(st.sampled_from(["ns", "other"]), max_size=2)
requirements = st.fixed_dictionaries(
    {
        "key": selector_keys,
        "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
        "values": selector_values,
    }
)
label_selectors = st.fixed_dictionaries(
    {},
    optional={
        "matchLabels": st.dictionaries(selector_keys, st.sampled_from(["ns", "other"])),
        "matchExpressions": st.lists(requirements, max_size=2),
    },
)


@given(
    selector=label_selectors, others=st.dictionaries(st.just("team"), st.sampled_from(["ns", "x"]))
)
def test_a_namespace_surely_selected_is_selected_whatever_its_other_labels(
    selector: dict[str, Any], others: dict[str, str]
) -> None:
    for requirement in selector.get("matchExpressions", []):
        if requirement["operator"] in ("Exists", "DoesNotExist"):
            requirement["values"] = []
        elif not requirement["values"]:
            requirement["values"] = ["ns"]
    if surely_selects(selector, "ns"):
        model = LabelSelector.model_validate(selector)
        assert model.matches({NAME_LABEL: "ns", **others})


def test_policy_missing_and_sysadmin_inject_nothing_and_say_how_to_fix_it() -> None:
    missing = plan(debugger(), [POD], NOW, admission="the policy does not exist")
    assert missing.injections == ()
    assert missing.status_patch is not None
    ready = next(c for c in missing.status_patch["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", POLICY_MISSING)
    assert "does not exist" in ready["message"]
    assert "--allow-without-admission-policy" in ready["message"]
    sysadmin = debugger(profile="sysadmin")
    refused = plan(sysadmin, [POD], NOW)
    assert refused.injections == ()
    assert refused.status_patch is not None
    ready = next(c for c in refused.status_patch["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", PROFILE_NOT_ALLOWED)
    assert "--allow-sysadmin-profile" in ready["message"]
    allowed = plan(sysadmin, [POD], NOW, allow_sysadmin=True)
    assert allowed.injections[0].container["securityContext"] == {"privileged": True}
    assert plan(debugger(), [POD], NOW).injections != ()


def test_the_switches_are_off_unless_given_as_flags_or_environment() -> None:
    settings, _ = split_args([], {})
    assert not settings.allow_without_admission_policy
    assert not settings.allow_sysadmin_profile
    assert settings.admission_policy_name == POLICY_NAME
    assert not settings.require_requester
    settings, rest = split_args(
        ["--allow-without-admission-policy", "--admission-policy-name=mine", "--log-level=info"],
        {"OPSUITE_ALLOW_SYSADMIN_PROFILE": "true", "OPSUITE_REQUIRE_REQUESTER": "true"},
    )
    assert settings.require_requester
    assert settings.allow_without_admission_policy
    assert settings.allow_sysadmin_profile
    assert settings.admission_policy_name == "mine"
    assert rest == ["--log-level=info"]
    settings, _ = split_args(
        ["--allow-sysadmin-profile=false"], {"OPSUITE_ALLOW_SYSADMIN_PROFILE": "true"}
    )
    assert not settings.allow_sysadmin_profile


def test_a_change_to_the_policy_or_its_binding_wakes_every_debugger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opsuite_testkit import WiredOperator

    manager = offline_manager("pod-debugger-operator", ("ns",), tmp_path, monkeypatch)
    setup(manager)
    wired = WiredOperator(manager)
    wired.event("debug.opsuite.dev", "poddebuggers", None, debugger())
    wired.enqueued.clear()
    policy, binding = shipped()
    group = "admissionregistration.k8s.io"
    wired.event(group, POLICIES, "ADDED", policy)
    assert wired.enqueued == [("ns", "dbg")]
    wired.event(group, BINDINGS, "ADDED", binding)
    assert wired.enqueued == [("ns", "dbg")] * 2
    unrelated = copy.deepcopy(binding)
    unrelated["metadata"]["name"] = unrelated["spec"]["policyName"] = "other"
    wired.event(group, BINDINGS, "ADDED", unrelated)
    assert wired.enqueued == [("ns", "dbg")] * 2


@pytest.mark.parametrize(("image", "prefix", "admitted"), images.EXAMPLES)
def test_image_references_are_compared_as_docker_reads_them(
    image: str, prefix: str, admitted: bool
) -> None:
    assert images.allowed(image, [prefix]) is admitted


components = st.from_regex(r"[a-z0-9]{1,6}([._-][a-z0-9]{1,4})?", fullmatch=True)
repositories = st.lists(st.from_regex(r"[a-z0-9]{1,6}", fullmatch=True), min_size=1, max_size=3)
registries = st.sampled_from(["", "docker.io/", "index.docker.io/", "reg.example.com/",
                              "localhost/", "localhost:5000/", "r:443/"])  # fmt: skip
tails = st.sampled_from(["", ":1", ":1.37", "@sha256:" + "a" * 64])


@given(registry=registries, path=repositories, tail=tails)
def test_normalising_is_idempotent_and_every_reference_admits_itself(
    registry: str, path: list[str], tail: str
) -> None:
    reference = registry + "/".join(path) + tail
    qualified = images.normalise(reference)
    assert images.normalise(qualified) == qualified
    assert images.names_registry(qualified)
    assert images.allowed(qualified, [reference])
    assert images.allowed(qualified, [qualified])
    # A short name is admitted by no allowlist, not even its own (#31, item 7).
    assert images.allowed(reference, [reference]) is images.names_registry(reference)


@given(name=st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True), tail=tails)
def test_the_spellings_of_a_docker_hub_image_are_one(name: str, tail: str) -> None:
    spellings = [f"{hub}{ns}{name}{tail}" for hub in ("", "docker.io/", "index.docker.io/")
                 for ns in ("", "library/")]  # fmt: skip
    assert len({images.normalise(s) for s in spellings}) == 1
    for spelling in spellings:
        admitted = images.names_registry(spelling)
        for other in (name, f"docker.io/{name}"):
            assert images.allowed(spelling, [other]) is admitted


@given(
    prefix=st.builds("/".join, repositories),
    more=components,
    rest=st.sampled_from(["", "/x", ":1"]),
)
def test_a_prefix_admits_nothing_that_merely_extends_its_last_component(
    prefix: str, more: str, rest: str
) -> None:
    """``busybox`` admits neither ``busyboxes`` nor ``busybox.attacker.io/x``."""
    for glue in ("", ".", "-", "_"):
        image = prefix + glue + more + rest
        if images.normalise(image).startswith(images.normalise(prefix) + "/"):
            continue  # a registry host followed by its repository, or the prefix's own path
        assert not images.allowed(image, [prefix]), image


def test_a_pod_appearing_or_vanishing_wakes_the_copy_mode_debuggers_of_its_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its name may be the one a copy needs (CopyNameTaken until it is free), whatever its
    labels; a debugger of mode Ephemeral only wakes for pods its selector matches."""
    from opsuite_testkit import WiredOperator

    manager = offline_manager("pod-debugger-operator", ("ns",), tmp_path, monkeypatch)
    setup(manager)
    wired = WiredOperator(manager)
    copying = debugger()
    copying["spec"]["mode"] = "Copy"
    copying["metadata"] = {**copying["metadata"], "name": "copying", "uid": "copying-uid"}
    wired.event("debug.opsuite.dev", "poddebuggers", None, debugger())
    wired.event("debug.opsuite.dev", "poddebuggers", None, copying)
    wired.enqueued.clear()
    squatter = {"metadata": {"namespace": "ns", "name": "web-1-debug-0", "uid": "s"}}
    wired.event("", "pods", "ADDED", squatter)
    assert wired.enqueued == [("ns", "copying")]
    wired.event("", "pods", "MODIFIED", {**squatter, "status": {"phase": "Running"}})
    assert wired.enqueued == [("ns", "copying")]
    wired.event("", "pods", "DELETED", squatter)
    assert wired.enqueued == [("ns", "copying")] * 2
