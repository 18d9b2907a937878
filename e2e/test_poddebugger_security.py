"""PodDebugger fails closed (#17, items 2 and 4), on a real API server.

An unprivileged ServiceAccount, ``editor``, may edit PodDebuggers in its namespace (and read
pods), nothing more: in particular not patch pods/ephemeralcontainers, so it could not run
`kubectl debug` there. It attempts the escalation (a privileged ``sysadmin`` container, an image
outside the allowlist, a PodDebugger created while no policy guards the namespace) on each path:

* (a) policies on: the admission policies refuse it, ``sysadmin`` even from someone the
  authorization policy admits;
* (b) policies off (the chart's ``admissionPolicy.enabled=false``): the operator injects
  nothing (PolicyMissing); once the policy appears it acts, without a restart, on PodDebuggers
  created from then on, not on those admitted before;
* (c) the opt-out (``--allow-without-admission-policy``): the operator injects, and still
  refuses ``sysadmin`` without ``--allow-sysadmin-profile``.

Pods stay on kwok nodes (a kwok Stage reports ephemeral containers as running): what is checked
is what the API server holds. The policies are copies of the shipped ones under names of this
run, bound to this run's namespaces only (other runs share the cluster), and the gated
operators are told those names (``--admission-policy-name``).
"""

from __future__ import annotations

import copy
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.charts import KUBE_VERSION, chart_dir, helm
from e2e.cluster import Cluster, condition, service_account_client, wait_until
from e2e.operators import LocalOperator, OperatorProcess, operator_env
from e2e.poddebugger_support import (
    GROUP,
    OPT_OUT,
    PLURAL,
    VERSION,
    Debuggers,
    debugger_manifest,
    ephemeral,
    install_crd,
)
from poddebugger_manifests import (
    CHART_SPEC,
    PRIVILEGED_POLICY_NAME,
    image_allowlist_policy,
    privileged_policy,
)
from poddebugger_operator import images
from poddebugger_operator.gate import LOAD_GRACE, NAME_LABEL
from poddebugger_operator.policy import POLICY_NAME, admission_policy

pytestmark = pytest.mark.local_operators("runs operators with flags of their own")

WEB = {"app": "web"}
ALLOWED = "busybox"
IMAGE = "docker.io/library/busybox"
"""Under the allowlist ALLOWED, and naming its registry (a short name is refused)."""
SUFFIXES = ("on", "off", "optout", "cel")
EDITOR_RULES = [
    {"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["*"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
]


def _bound_to(obj: dict[str, Any], name: str, namespaces: list[str]) -> dict[str, Any]:
    """A copy of a shipped policy or binding renamed ``name``; a binding bound to
    ``namespaces`` only."""
    obj = copy.deepcopy(obj)
    obj["metadata"]["name"] = name
    if obj["kind"] == "ValidatingAdmissionPolicyBinding":
        obj["spec"]["policyName"] = name
        obj["spec"]["matchResources"] = {
            "namespaceSelector": {
                "matchExpressions": [{"key": NAME_LABEL, "operator": "In", "values": namespaces}]
            }
        }
    return obj


@dataclass
class Policies:
    """Cluster-scoped objects this module created, deleted at the end."""

    adm: client.AdmissionregistrationV1Api
    custom: client.CustomObjectsApi
    made: list[tuple[str, str]] = field(default_factory=list)

    def authorization(self, name: str, namespaces: list[str]) -> None:
        policy = admission_policy()[0]
        self.adm.create_validating_admission_policy(_bound_to(policy, name, namespaces))
        self.made.append(("policy", name))
        self.bind(name, name, namespaces)

    def privileged(self, name: str, namespaces: list[str]) -> None:
        for obj in privileged_policy():
            obj = _bound_to(obj, name, namespaces)
            if obj["kind"] == "ValidatingAdmissionPolicy":
                self.adm.create_validating_admission_policy(obj)
                self.made.append(("policy", name))
            else:
                self.adm.create_validating_admission_policy_binding(obj)
                self.made.append(("binding", name))

    def bind(self, policy: str, name: str, namespaces: list[str]) -> None:
        binding = _bound_to(admission_policy()[1], name, namespaces)
        binding["spec"]["policyName"] = policy
        self.adm.create_validating_admission_policy_binding(binding)
        self.made.append(("binding", name))

    def images(self, name: str, namespaces: list[str], prefixes: tuple[str, ...]) -> None:
        policy, binding, params = image_allowlist_policy(prefixes, param=name)
        self.custom.create_cluster_custom_object(GROUP, VERSION, "debugimagepolicies", params)
        self.made.append(("params", name))
        self.adm.create_validating_admission_policy(_bound_to(policy, name, namespaces))
        self.made.append(("policy", name))
        binding = _bound_to(binding, name, namespaces)
        self.adm.create_validating_admission_policy_binding(binding)
        self.made.append(("binding", name))

    def cleanup(self) -> None:
        delete: dict[str, Callable[[str], Any]] = {
            "binding": self.adm.delete_validating_admission_policy_binding,
            "policy": self.adm.delete_validating_admission_policy,
            "params": lambda n: self.custom.delete_cluster_custom_object(
                GROUP, VERSION, "debugimagepolicies", n
            ),
        }
        for kind, name in reversed(self.made):
            try:
                delete[kind](name)
            except ApiException as exc:
                if exc.status != 404:
                    raise


@dataclass
class World:
    run: str
    api: client.ApiClient
    debuggers: Debuggers
    policies: Policies
    editors: dict[str, client.CustomObjectsApi]
    log_dir: Path

    def ns(self, suffix: str) -> str:
        return f"pdsec-{self.run}-{suffix}"

    @property
    def policy(self) -> str:
        return f"pdsec-{self.run}"

    def operator(self, cluster: Cluster, suffix: str, *args: str) -> LocalOperator:
        log = self.log_dir / f"pod-debugger-operator-{suffix}.log"
        env = operator_env(cluster, "pod-debugger-operator", POD_NAME=f"pdsec-{self.run}")
        return LocalOperator(
            lambda: OperatorProcess(
                "pod-debugger-operator",
                [f"--namespace={self.ns(suffix)}", f"--allowed-image-prefix={ALLOWED}", *args],
                log,
                env,
            ).start()
        )


@pytest.fixture(scope="module")
def world(
    cluster: Cluster, api: client.ApiClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    install_crd(cluster)
    run = uuid.uuid4().hex[:6]
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    policies = Policies(client.AdmissionregistrationV1Api(api), client.CustomObjectsApi(api))
    names = [f"pdsec-{run}-{s}" for s in SUFFIXES]
    clients: list[client.ApiClient] = []
    debuggers = Debuggers(api)
    try:
        editors = {}
        for ns in names:
            core.create_namespace({"metadata": {"name": ns}})
            wait_until(
                lambda n=ns: core.read_namespaced_service_account("default", n),
                lambda sa: sa is not None,
                timeout=60,
                what="default ServiceAccount",
            )
            core.create_namespaced_service_account(ns, {"metadata": {"name": "editor"}})
            rbac.create_namespaced_role(ns, {"metadata": {"name": "editor"}, "rules": EDITOR_RULES})
            rbac.create_namespaced_role_binding(
                ns,
                {
                    "metadata": {"name": "editor"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                "name": "editor"},
                    "subjects": [{"kind": "ServiceAccount", "name": "editor", "namespace": ns}],
                },
            )  # fmt: skip
            clients.append(service_account_client(api, ns, "editor"))
            editors[ns] = client.CustomObjectsApi(clients[-1])
        yield World(run, api, debuggers, policies, editors, tmp_path_factory.mktemp("pdsec"))
    finally:
        debuggers.cleanup()
        policies.cleanup()
        for c in clients:
            c.close()
        for ns in names:
            core.delete_namespace(ns, propagation_policy="Background")


def _create(as_: client.CustomObjectsApi, ns: str, body: dict[str, Any]) -> tuple[int, str]:
    """(201, "") when admitted, else the API server's (status, body)."""
    try:
        as_.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)
    except ApiException as exc:
        return int(exc.status), str(exc.body or "")
    return 201, ""


def _refusal(as_: client.CustomObjectsApi, ns: str, body: dict[str, Any], what: str) -> str:
    """The message of the API server's 403 for ``body``, once a policy just created is loaded
    (what it admitted meanwhile is deleted at once)."""

    def attempt() -> tuple[int, str]:
        status, text = _create(as_, ns, body)
        if status == 201:
            as_.delete_namespaced_custom_object(
                GROUP, VERSION, ns, PLURAL, body["metadata"]["name"]
            )
        return status, text

    status, text = wait_until(attempt, lambda r: r[0] != 201, timeout=60, what=what)
    assert status == 403, text
    assert json.loads(text)["reason"] == "Forbidden", text
    return str(json.loads(text)["message"])


def _wait_reason(world: World, ns: str, name: str, reason: str) -> dict[str, Any]:
    return world.debuggers.wait(
        ns, name, lambda o: condition(o, "Ready").get("reason") == reason, f"Ready {reason}"
    )


def _after_grace(world: World, name: str) -> None:
    """Sleep until the policy ``name`` and its binding have existed for :data:`LOAD_GRACE` (and
    a little more: creation times are whole seconds)."""
    adm = world.policies.adm
    created = max(
        adm.read_validating_admission_policy(name).metadata.creation_timestamp,
        adm.read_validating_admission_policy_binding(name).metadata.creation_timestamp,
    ).timestamp()
    time.sleep(max(0.0, created + LOAD_GRACE.total_seconds() + 1.5 - time.time()))


def _nothing_privileged(world: World, ns: str) -> None:
    pod = world.debuggers.pod(ns, "web")
    for container in pod.spec.ephemeral_containers or []:
        context = container.security_context
        assert not (context and context.privileged), container.name
        assert images.allowed(container.image, [ALLOWED]), container.image


SYSADMIN = debugger_manifest("root", WEB, image=IMAGE, profile="sysadmin")
FOREIGN = debugger_manifest("foreign", WEB, image="busybox.attacker.io/x")
PLAIN = debugger_manifest("plain", WEB, image=IMAGE)


def _rendered(cluster: Cluster, values: dict[str, Any]) -> list[dict[str, Any]]:
    out = helm(
        cluster, "template", "e2e", str(chart_dir(CHART_SPEC)), "--namespace", "x",
        "--kube-version", KUBE_VERSION, values=values,
    )  # fmt: skip
    return [o for o in yaml.safe_load_all(out) if o]


def test_the_chart_without_policies_runs_an_operator_that_fails_closed(cluster: Cluster) -> None:
    """``admissionPolicy.enabled=false`` renders no authorization policy, and the operator it
    deploys does not opt out (as in test_b); it may watch the policies in both RBAC modes.
    The two settings reach the operator only when given."""

    def args(objects: list[dict[str, Any]]) -> list[str]:
        (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
        return list(deployment["spec"]["template"]["spec"]["containers"][0]["args"])

    for values in ({"admissionPolicy": {"enabled": False}}, {"watchNamespaces": ["a", "b"]}):
        objects = _rendered(cluster, values)
        policies = [o["metadata"]["name"] for o in objects if "AdmissionPolicy" in o["kind"]]
        assert (POLICY_NAME in policies) is ("admissionPolicy" not in values)
        assert (PRIVILEGED_POLICY_NAME in policies) is ("admissionPolicy" not in values)
        assert not [a for a in args(objects) if a.startswith("--allow-")]
        watch = {
            "apiGroups": ["admissionregistration.k8s.io"],
            "resources": ["validatingadmissionpolicies", "validatingadmissionpolicybindings"],
            "verbs": ["list", "watch"],
        }
        assert any(watch in o["rules"] for o in objects if o["kind"] == "ClusterRole")
    opted = _rendered(cluster, {"allowWithoutAdmissionPolicy": True, "allowSysadminProfile": True})
    assert {"--allow-without-admission-policy", "--allow-sysadmin-profile"} <= set(args(opted))
    policies = [o["metadata"]["name"] for o in opted if "AdmissionPolicy" in o["kind"]]
    assert POLICY_NAME in policies
    assert PRIVILEGED_POLICY_NAME not in policies


def test_a_policies_on_refuse_the_escalation_and_nothing_reaches_the_pod(
    cluster: Cluster, world: World
) -> None:
    ns = world.ns("on")
    world.debuggers.run_pod(ns, "web", WEB)
    world.policies.authorization(world.policy, [ns])
    world.policies.images(f"{world.policy}-images", [ns], (ALLOWED,))
    world.policies.privileged(f"{world.policy}-privileged", [ns])
    operator = world.operator(cluster, "on", f"--admission-policy-name={world.policy}")
    try:
        editor = world.editors[ns]
        message = _refusal(editor, ns, PLAIN, "the authorization policy's denial")
        assert "you may not patch pods/ephemeralcontainers" in message, message
        for body in (SYSADMIN, FOREIGN):  # refused by the first policy that looks at it
            assert _create(editor, ns, body)[0] == 403
        # An admin passes the authorization policy; the allowlist still refuses the image.
        message = _refusal(world.debuggers.custom, ns, FOREIGN, "the allowlist's denial")
        assert "image busybox.attacker.io/x is not allowed" in message, message
        # Those the policy admits may not use sysadmin either: the privileged policy refuses
        # it (and the operator would, as test_c shows).
        message = _refusal(world.debuggers.custom, ns, SYSADMIN, "the privileged denial")
        assert "profile sysadmin (a privileged container) is not allowed" in message, message
        _after_grace(world, world.policy)
        # The gate is open: a plain PodDebugger of an admin is acted upon.
        world.debuggers.create(ns, PLAIN)
        world.debuggers.wait_debugged(ns, "plain", 1)
        assert len(ephemeral(world.debuggers.pod(ns, "web"))) == 1
        _nothing_privileged(world, ns)
    finally:
        operator.stop()


def test_b_without_policies_nothing_is_injected_until_they_are_in_force(
    cluster: Cluster, world: World
) -> None:
    ns = world.ns("off")
    name = f"{world.policy}-late"
    world.debuggers.run_pod(ns, "web", WEB)
    operator = world.operator(cluster, "off", f"--admission-policy-name={name}")
    try:
        editor = world.editors[ns]
        for body in (SYSADMIN, PLAIN):
            assert _create(editor, ns, body) == (201, "")
            world.debuggers.created.append((ns, body["metadata"]["name"]))
        for debugger in ("root", "plain"):
            obj = _wait_reason(world, ns, debugger, "PolicyMissing")
            message = condition(obj, "Ready")["message"]
            assert f"ValidatingAdmissionPolicy {name} does not exist" in message, message
            assert "--allow-without-admission-policy" in message
            assert condition(obj, "Degraded")["status"] == "True"
        time.sleep(3)
        assert ephemeral(world.debuggers.pod(ns, "web")) == []
        # The policy appears: no restart. The PodDebuggers admitted without it stay refused.
        world.policies.authorization(name, [ns])
        for debugger in ("root", "plain"):
            world.debuggers.wait(
                ns,
                debugger,
                lambda o: "re-create" in condition(o, "Ready").get("message", ""),
                "created before the policy",
            )
        _refusal(editor, ns, debugger_manifest("again", WEB, image=IMAGE), "the denial")
        # PodDebuggers admitted under the policy are acted upon.
        _after_grace(world, name)
        world.debuggers.create(ns, debugger_manifest("admitted", WEB, image=IMAGE))
        world.debuggers.wait_debugged(ns, "admitted", 1)
        assert len(ephemeral(world.debuggers.pod(ns, "web"))) == 1
        assert condition(world.debuggers.get(ns, "plain"), "Ready")["reason"] == "PolicyMissing"
        _nothing_privileged(world, ns)
    finally:
        operator.stop()


def test_c_the_opt_out_injects_but_still_refuses_sysadmin(cluster: Cluster, world: World) -> None:
    ns = world.ns("optout")
    world.debuggers.run_pod(ns, "web", WEB)
    operator = world.operator(cluster, "optout", OPT_OUT)
    try:
        editor = world.editors[ns]
        for body in (SYSADMIN, PLAIN):
            assert _create(editor, ns, body) == (201, "")
            world.debuggers.created.append((ns, body["metadata"]["name"]))
        world.debuggers.wait_debugged(ns, "plain", 1)
        _wait_reason(world, ns, "root", "ProfileNotAllowed")
        assert _create(editor, ns, FOREIGN) == (201, "")  # no allowlist policy here
        world.debuggers.created.append((ns, "foreign"))
        _wait_reason(world, ns, "foreign", "ImageNotAllowed")
        time.sleep(2)
        assert len(ephemeral(world.debuggers.pod(ns, "web"))) == 1
        _nothing_privileged(world, ns)
    finally:
        operator.stop()


def test_the_allowlist_policy_compares_references_as_the_operator_does(world: World) -> None:
    """Every case of images.EXAMPLES, on the API server's CEL (dry-run creations) and in
    Python: the same verdict, the expected one."""
    ns = world.ns("cel")
    name = f"{world.policy}-cel"
    custom = world.debuggers.custom
    by_prefix: dict[str, list[tuple[str, bool]]] = {}
    for image, prefix, admitted in images.EXAMPLES:
        by_prefix.setdefault(prefix, []).append((image, admitted))
    first = next(iter(by_prefix))
    world.policies.images(name, [ns], (first,))
    probe = debugger_manifest("probe", WEB, image="never.invalid/x")

    def dry_run(image: str) -> tuple[int, str]:
        body = {**probe, "spec": {**probe["spec"], "image": image}}
        try:
            custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body, dry_run="All")
        except ApiException as exc:
            return int(exc.status), str(exc.body or "")
        return 201, ""

    verdicts = []
    for prefix, cases in by_prefix.items():
        custom.patch_cluster_custom_object(
            GROUP, VERSION, "debugimagepolicies", name, {"spec": {"allowedPrefixes": [prefix]}}
        )
        wait_until(
            lambda: json.loads(dry_run("never.invalid/x")[1])["message"],
            lambda text, p=prefix: text.endswith(f"under one of {p}"),
            timeout=60,
            what=f"the policy to read prefix {prefix}",
        )
        for image, admitted in cases:
            status, text = dry_run(image)
            assert status in (201, 403), text
            verdicts.append(
                (image, prefix, status == 201, admitted, images.allowed(image, [prefix]))
            )
    assert len(verdicts) == len(images.EXAMPLES)
    wrong = [v for v in verdicts if not v[2] == v[3] == v[4]]
    assert not wrong, wrong
