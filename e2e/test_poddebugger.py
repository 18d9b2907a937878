"""PodDebugger behaviour on a real API server: injection, scope, idempotence, refusals, policy.

One operator process serves the run's namespaces for the whole module (see
poddebugger_support); each test uses its own namespace(s) of the pool and deletes its
PodDebuggers when it ends. Pods stay on kwok nodes on the local plane (a kwok Stage,
hack/kwok/, reports ephemeral containers there as running, though nothing runs), except those of
the test that claims the debug containers run: they go to a node that runs containers
(e2e.placement).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.charts import token_kubeconfig
from e2e.cluster import Cluster, condition, kubectl_binary, service_account_client, wait_until
from e2e.configmapsync_support import describe, metric_value, writes_by
from e2e.operators import OperatorHandle
from e2e.placement import BUSYBOX
from e2e.poddebugger_support import (
    ALLOWED_PREFIX,
    DEFAULT_IMAGE,
    GROUP,
    PLURAL,
    VERSION,
    Debuggers,
    Pool,
    debugger_manifest,
    ephemeral,
)
from e2e.resources import pool_fixture
from poddebugger_manifests import image_allowlist_policy
from poddebugger_operator.policy import admission_policy

pool = pool_fixture(Pool)


@pytest.fixture
def debuggers(api: client.ApiClient, operator: OperatorHandle) -> Iterator[Debuggers]:
    with Debuggers(api) as access:
        yield access


WEB = {"app": "web"}


def _containers_of(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {d["pod"]: d for d in status.get("debuggedPods", [])}


@pytest.mark.smoke
def test_matching_pods_get_one_container_through_the_subresource_only(
    cluster: Cluster, pool: Pool, debuggers: Debuggers, operator: OperatorHandle
) -> None:
    a, other = pool.name("a"), pool.name("other")
    for name in ("web-1", "web-2"):  # the debug containers really run in these two
        debuggers.run_pod(a, name, WEB, real=True)
    debuggers.run_pod(a, "db", {"app": "db"})
    debuggers.run_pod(a, "finished", WEB)
    debuggers.core.patch_namespaced_pod_status("finished", a, {"status": {"phase": "Succeeded"}})
    debuggers.run_pod(other, "web-elsewhere", WEB)
    before = {n: debuggers.pod(a, n).metadata for n in ("web-1", "web-2", "db")}
    started = time.time()

    debuggers.create(a, debugger_manifest("shell", WEB, image=BUSYBOX))
    obj = debuggers.wait_debugged(a, "shell", 2, timeout=120)
    status = obj["status"]
    assert status["matchedPods"] == 2
    assert status["skippedPods"] == 0
    assert condition(obj, "Degraded")["status"] == "False"
    names = {n: ephemeral(debuggers.pod(a, n)) for n in ("web-1", "web-2")}
    assert all(len(v) == 1 for v in names.values()), names
    container = names["web-1"][0]
    assert container == names["web-2"][0]
    assert container.startswith("pdbg-shell-")
    assert len(container) <= 63
    debug = debuggers.pod(a, "web-1").spec.ephemeral_containers[0]
    assert debug.image == BUSYBOX
    assert debug.command == ["sleep", "3600"]
    # The default profile is restricted, as kubectl debug --profile=restricted, with a non-root
    # user of its own, so that an image whose user is root (busybox) can start.
    assert debug.security_context.run_as_non_root is True
    assert debug.security_context.run_as_user == 65532
    assert debug.security_context.capabilities.drop == ["ALL"]
    assert debug.security_context.allow_privilege_escalation is False
    assert debug.security_context.seccomp_profile.type == "RuntimeDefault"
    # Non-matching, terminated and foreign pods are untouched.
    assert ephemeral(debuggers.pod(a, "db")) == []
    assert ephemeral(debuggers.pod(a, "finished")) == []
    assert ephemeral(debuggers.pod(other, "web-elsewhere")) == []
    # No labels, annotations or finalizers on the pods: the record is the pod spec.
    for name, meta in before.items():
        now = debuggers.pod(a, name).metadata
        assert (now.labels, now.annotations, now.finalizers) == (
            meta.labels,
            meta.annotations,
            meta.finalizers,
        )
    # The status follows the containers' state, as the kubelet reports it.
    obj = debuggers.wait(
        a,
        "shell",
        lambda o: {d["state"] for d in o["status"].get("debuggedPods", [])} == {"Running"},
        "debug containers Running",
        timeout=120,
    )
    pods = _containers_of(obj["status"])
    assert sorted(pods) == ["web-1", "web-2"]
    entry = {k: pods["web-1"].get(k) for k in ("pod", "container", "image", "state")}
    assert entry == {"pod": "web-1", "container": container, "image": BUSYBOX, "state": "Running"}
    for name in ("web-1", "web-2"):
        (running,) = debuggers.pod(a, name).status.ephemeral_container_statuses
        assert (running.name, bool(running.state.running)) == (container, True), running
    # Who debugged each pod: the Event on the pod and on the PodDebugger name the PodDebugger
    # and its requester (none recorded here: no requester policy in this module's namespaces).
    for name in ("web-1", "web-2"):
        said = (
            f"PodDebugger {a}/shell (requester not recorded) added ephemeral container "
            f"{container} (image {BUSYBOX}) to pod {name}"
        )
        for kind, involved in (("Pod", name), ("PodDebugger", "shell")):
            wait_until(
                lambda k=kind, i=involved: debuggers.events(a, k, i),
                lambda found, s=said: any(
                    e.reason == "DebugContainerAdded" and e.message == s for e in found
                ),
                timeout=20,
                what=f"the {kind} {involved} Event naming who debugged {name}",
            )
    table = cluster.kubectl("get", "pdbg", "shell", "-n", a).splitlines()
    header = ["NAME", "IMAGE", "MODE", "MATCHED", "DEBUGGED", "READY", "REASON", "AGE"]
    assert table[0].split() == header
    assert table[1].split()[:7] == ["shell", BUSYBOX, "Ephemeral", "2", "2", "True", "Debugged"]
    text = operator.metrics()
    assert metric_value(text, "opsuite_poddebugger_injections_total") >= 2
    assert metric_value(text, "opsuite_poddebugger_injection_latency_seconds_count") >= 2
    success = {"controller": "poddebugger", "result": "success"}
    assert metric_value(text, "controller_runtime_reconcile_total", success) > 0
    if cluster.audit_log is not None:
        time.sleep(2)  # the audit log is written in batches
        writes = writes_by(cluster.audit_log, pool.identity, started - 1, time.time())
        on_pods = [e for e in writes if e["objectRef"].get("resource") == "pods"]
        assert len(on_pods) >= 2, describe(writes)
        assert all(e["objectRef"].get("subresource") == "ephemeralcontainers" for e in on_pods), (
            describe(on_pods)
        )


def test_idempotent_across_restarts_and_a_new_image_adds_a_new_container(
    pool: Pool, debuggers: Debuggers, operator: OperatorHandle
) -> None:
    b = pool.name("b")
    debuggers.run_pod(b, "web-1", WEB)
    debuggers.create(b, debugger_manifest("shell", WEB))
    debuggers.wait_debugged(b, "shell", 1)
    first = ephemeral(debuggers.pod(b, "web-1"))
    assert len(first) == 1
    operator.restart()
    debuggers.patch(b, "shell", {"metadata": {"labels": {"touched": "yes"}}})  # an event
    time.sleep(3)
    assert ephemeral(debuggers.pod(b, "web-1")) == first

    debuggers.patch(b, "shell", {"spec": {"image": BUSYBOX}})
    obj = debuggers.wait_debugged(b, "shell", 1)
    names = ephemeral(debuggers.pod(b, "web-1"))
    assert len(names) == 2, names
    assert names[0] == first[0], "the new container comes after the existing one"
    assert names[1].startswith("pdbg-shell-")
    assert names[1] != first[0]
    containers = {d["container"]: d["image"] for d in obj["status"]["debuggedPods"]}
    assert containers == {first[0]: DEFAULT_IMAGE, names[1]: BUSYBOX}
    time.sleep(2)
    assert len(ephemeral(debuggers.pod(b, "web-1"))) == 2


def test_later_pods_get_theirs_and_pods_that_stop_matching_keep_it(
    pool: Pool, debuggers: Debuggers
) -> None:
    c = pool.name("c")
    debuggers.run_pod(c, "early", WEB)
    debuggers.create(c, debugger_manifest("shell", WEB))
    debuggers.wait_debugged(c, "shell", 1)
    debuggers.run_pod(c, "late", WEB)
    debuggers.wait_debugged(c, "shell", 2)
    assert len(ephemeral(debuggers.pod(c, "late"))) == 1
    debuggers.core.patch_namespaced_pod("early", c, {"metadata": {"labels": {"app": "gone"}}})
    obj = debuggers.wait_debugged(c, "shell", 1)
    assert obj["status"]["matchedPods"] == 1
    assert len(ephemeral(debuggers.pod(c, "early"))) == 1


def test_max_pods_is_enforced_and_reported(pool: Pool, debuggers: Debuggers) -> None:
    d = pool.name("d")
    for i in range(3):
        debuggers.run_pod(d, f"web-{i}", WEB)
    debuggers.create(d, debugger_manifest("shell", WEB, maxPods=2))
    obj = debuggers.wait_debugged(d, "shell", 2)
    assert (obj["status"]["matchedPods"], obj["status"]["skippedPods"]) == (3, 1)
    assert "1 more matching pods over maxPods" in condition(obj, "Ready")["message"]
    holders = [n for n in ("web-0", "web-1", "web-2") if ephemeral(debuggers.pod(d, n))]
    assert len(holders) == 2


def test_refused_pods_are_reported_with_the_api_servers_message(
    pool: Pool, debuggers: Debuggers, operator: OperatorHandle
) -> None:
    psa = pool.name("psa")
    debuggers.run_pod(psa, "web", WEB, restricted=True)
    failures = metric_value(operator.metrics(), "opsuite_poddebugger_injection_failures_total")
    # netadmin adds capabilities, which Pod Security "restricted" forbids.
    debuggers.create(psa, debugger_manifest("admin", WEB, profile="netadmin"))
    obj = debuggers.wait(
        psa,
        "admin",
        lambda o: condition(o, "Degraded").get("status") == "True",
        "Degraded",
    )
    assert condition(obj, "Degraded")["reason"] == "InjectionFailed"
    assert condition(obj, "Ready")["status"] == "False"
    (failed,) = obj["status"]["failedPods"]
    assert failed["pod"] == "web"
    assert failed["reason"] == "Rejected"
    assert "violates PodSecurity" in failed["message"], failed
    assert ephemeral(debuggers.pod(psa, "web")) == []
    said = (
        f"PodDebugger {psa}/admin (requester not recorded) could not add ephemeral container "
        f"{failed['container']} to pod web: "
    )
    for kind, involved, reason in (
        ("Pod", "web", "DebugContainerRefused"),
        ("PodDebugger", "admin", "InjectionFailed"),
    ):
        wait_until(
            lambda k=kind, i=involved: debuggers.events(psa, k, i),
            lambda found, r=reason: any(
                e.reason == r and (e.message or "").startswith(said) for e in found
            ),
            timeout=20,
            what=f"the refusal Event on the {kind}, naming who asked",
        )
    after = metric_value(operator.metrics(), "opsuite_poddebugger_injection_failures_total")
    assert after >= failures + 1
    # Not retried in a loop: one refusal, the operator keeps running.
    time.sleep(3)
    assert operator.alive()
    assert metric_value(operator.metrics(), "opsuite_poddebugger_injection_failures_total") == after
    # The restricted profile passes Pod Security: the debugger recovers.
    debuggers.patch(psa, "admin", {"spec": {"profile": "restricted"}})
    obj = debuggers.wait_debugged(psa, "admin", 1)
    assert condition(obj, "Degraded")["status"] == "False"
    assert obj["status"]["failedPods"] == []
    assert len(ephemeral(debuggers.pod(psa, "web"))) == 1


def test_a_refusal_ends_once_the_namespace_relaxes_pod_security(
    pool: Pool, debuggers: Debuggers, operator: OperatorHandle
) -> None:
    """Nothing about the debugger or the pod changes, only the namespace's Pod Security level:
    the refused pod is tried again when the refusal's backoff (a minute) is over, and given
    its container."""
    relax = pool.name("relax")
    debuggers.run_pod(relax, "web", WEB, restricted=True)
    debuggers.create(relax, debugger_manifest("net", WEB, profile="netadmin"))
    obj = debuggers.wait(
        relax, "net", lambda o: condition(o, "Degraded").get("status") == "True", "Degraded"
    )
    (failed,) = obj["status"]["failedPods"]
    assert failed["attempts"] == 1
    assert "violates PodSecurity" in failed["message"], failed
    refused_at = datetime.fromisoformat(failed["lastAttemptTime"])
    debuggers.core.patch_namespace(
        relax, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "privileged"}}}
    )
    obj = debuggers.wait_debugged(relax, "net", 1, timeout=150)
    assert datetime.now(UTC) - refused_at >= timedelta(seconds=55)  # not before the backoff
    assert obj["status"]["failedPods"] == []
    assert condition(obj, "Degraded")["status"] == "False"
    assert len(ephemeral(debuggers.pod(relax, "web"))) == 1


def test_deleting_the_debugger_stops_injection_and_keeps_containers(
    pool: Pool, debuggers: Debuggers
) -> None:
    e = pool.name("e")
    debuggers.run_pod(e, "web-1", WEB)
    debuggers.create(e, debugger_manifest("shell", WEB))
    debuggers.wait_debugged(e, "shell", 1)
    debuggers.delete(e, "shell")
    wait_until(
        lambda: debuggers.custom.list_namespaced_custom_object(GROUP, VERSION, e, PLURAL),
        lambda found: not found["items"],
        timeout=30,
        what="PodDebugger gone",
    )
    debuggers.run_pod(e, "web-2", WEB)
    time.sleep(3)
    assert ephemeral(debuggers.pod(e, "web-2")) == []
    assert len(ephemeral(debuggers.pod(e, "web-1"))) == 1


DEADLINE = 20
"""activeDeadlineSeconds of the test below (the example of docs/poddebugger.md, "An end")."""


def test_after_its_deadline_a_debugger_adds_nothing_and_says_so_once(
    pool: Pool, debuggers: Debuggers
) -> None:
    """Nothing changes after the first pod is debugged (its resourceVersion stays), yet the
    status turns DeadlineExceeded at the deadline: the operator ran the pass itself. Then a new
    matching pod gets nothing, the container already added stays, and the status, once it
    counts the new pod, is not written again."""
    end = pool.name("end")
    debuggers.run_pod(end, "early", WEB)
    made = debuggers.create(end, debugger_manifest("brief", WEB, activeDeadlineSeconds=DEADLINE))
    created = datetime.fromisoformat(made["metadata"]["creationTimestamp"])
    debuggers.wait_debugged(end, "brief", 1)
    (added,) = ephemeral(debuggers.pod(end, "early"))
    before = debuggers.pod(end, "early").metadata.resource_version
    obj = debuggers.wait(
        end,
        "brief",
        lambda o: condition(o, "Ready").get("reason") == "DeadlineExceeded",
        "Ready False, DeadlineExceeded",
        timeout=DEADLINE + 30,
    )
    ready = condition(obj, "Ready")
    assert ready["status"] == "False"
    turned = datetime.fromisoformat(ready["lastTransitionTime"])
    at = created + timedelta(seconds=DEADLINE)
    assert at <= turned <= at + timedelta(seconds=5), (created, turned)
    assert debuggers.pod(end, "early").metadata.resource_version == before, "no pod event"
    assert ready["message"].startswith(f"activeDeadlineSeconds {DEADLINE} passed (")
    assert "an ephemeral container cannot be removed" in ready["message"]
    assert condition(obj, "Degraded")["status"] == "False"
    assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"]

    debuggers.run_pod(end, "late", WEB)
    obj = debuggers.wait(
        end, "brief", lambda o: o["status"].get("matchedPods") == 2, "counting the late pod"
    )
    assert obj["status"]["debuggedCount"] == 1
    assert condition(obj, "Ready")["reason"] == "DeadlineExceeded"
    assert ephemeral(debuggers.pod(end, "late")) == []
    assert ephemeral(debuggers.pod(end, "early")) == [added]
    written = obj["metadata"]["resourceVersion"]
    time.sleep(5)  # the status pacer's interval, several times over
    assert debuggers.get(end, "brief")["metadata"]["resourceVersion"] == written, "quiet"
    assert ephemeral(debuggers.pod(end, "late")) == []


def _token_client(api: client.ApiClient, namespace: str, sa: str) -> client.ApiClient:
    """A new ServiceAccount, and an API client authenticating as it."""
    client.CoreV1Api(api).create_namespaced_service_account(namespace, {"metadata": {"name": sa}})
    return service_account_client(api, namespace, sa)


def _kubectl_debug(cluster: Cluster, api: client.ApiClient, ns: str, sa: str) -> tuple[int, str]:
    """`kubectl debug` of the pod ``target`` as ServiceAccount ``sa``: (exit code, stderr)."""
    kubeconfig = token_kubeconfig(cluster, api, ns, sa)
    done = subprocess.run(
        [kubectl_binary(), "--kubeconfig", str(kubeconfig), "-n", ns,
         "debug", "target", "--image", BUSYBOX, "--profile", "general", "-c", "probe",
         "--attach=false", "--", "true"],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    return done.returncode, done.stderr


def test_admission_policy_requires_what_kubectl_debug_requires(
    cluster: Cluster, api: client.ApiClient, pool: Pool, debuggers: Debuggers
) -> None:
    """The shipped ValidatingAdmissionPolicy, bound to this run's policy namespace only, admits
    a PodDebugger from whoever could run `kubectl debug` there, which PATCHes
    pods/ephemeralcontainers: `patch` is what counts, `update` alone is not enough (kubectl
    debug itself is refused with it)."""
    ns = pool.name("policy")
    rbac = client.RbacAuthorizationV1Api(api)
    adm = client.AdmissionregistrationV1Api(api)
    policy, binding = admission_policy()
    name = f"pdbg-e2e-{pool.run}"
    policy["metadata"]["name"] = binding["metadata"]["name"] = binding["spec"]["policyName"] = name
    binding["spec"]["matchResources"] = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}
    }
    creator = {"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["*"]}
    read_pods = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}

    def ephemeral_containers(verb: str) -> dict[str, Any]:
        return {"apiGroups": [""], "resources": ["pods/ephemeralcontainers"], "verbs": [verb]}

    roles = {
        "limited": [creator],
        "updater": [creator, read_pods, ephemeral_containers("update")],
        "patcher": [creator, read_pods, ephemeral_containers("patch")],
    }
    for role, rules in roles.items():
        rbac.create_cluster_role({"metadata": {"name": f"{name}-{role}"}, "rules": rules})
    adm.create_validating_admission_policy(policy)
    adm.create_validating_admission_policy_binding(binding)
    clients: list[client.ApiClient] = []
    try:
        for sa in roles:
            ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}
            subject = {"kind": "ServiceAccount", "name": sa, "namespace": ns}
            ref["name"] = f"{name}-{sa}"
            rbac.create_namespaced_role_binding(
                ns, {"metadata": {"name": sa}, "roleRef": ref, "subjects": [subject]}
            )
            clients.append(_token_client(api, ns, sa))
        limited, updater, patcher = (client.CustomObjectsApi(c) for c in clients)
        body = debugger_manifest("guarded", WEB)

        def try_create(as_: client.CustomObjectsApi) -> tuple[int, str]:
            try:
                as_.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)
            except ApiException as exc:
                return exc.status, exc.body or ""
            debuggers.delete(ns, "guarded")  # admitted (before the policy was loaded?)
            return 201, ""

        status, text = wait_until(
            lambda: try_create(limited), lambda r: r[0] != 201, timeout=30, what="denial"
        )
        assert status == 403, text
        assert json.loads(text)["reason"] == "Forbidden"
        assert f"you may not patch pods/ephemeralcontainers in namespace {ns}" in text
        status, text = try_create(updater)
        assert status == 403, "update alone (which kubectl debug does not use) was enough"
        accepted = patcher.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)
        debuggers.created.append((ns, accepted["metadata"]["name"]))
        # What kubectl debug itself needs, on a pod of that namespace: patch, not update.
        debuggers.run_pod(ns, "target", {"app": "target"})
        code, err = _kubectl_debug(cluster, api, ns, "patcher")
        assert code == 0, err
        code, err = _kubectl_debug(cluster, api, ns, "updater")
        assert code != 0
        assert "forbidden" in err.lower(), err
    finally:
        for c in clients:
            c.close()
        adm.delete_validating_admission_policy_binding(name)
        adm.delete_validating_admission_policy(name)
        for role in roles:
            rbac.delete_cluster_role(f"{name}-{role}")


def test_operator_injects_only_allowed_images(pool: Pool, debuggers: Debuggers) -> None:
    ns = pool.name("images")
    debuggers.run_pod(ns, "web", WEB)
    debuggers.create(ns, debugger_manifest("alpine", WEB, image="docker.io/library/alpine:3"))
    obj = debuggers.wait(
        ns,
        "alpine",
        lambda o: condition(o, "Degraded").get("status") == "True",
        "Degraded",
    )
    assert condition(obj, "Degraded")["reason"] == "ImageNotAllowed"
    assert f"under {ALLOWED_PREFIX}" in condition(obj, "Degraded")["message"]
    time.sleep(2)
    assert ephemeral(debuggers.pod(ns, "web")) == []
    debuggers.patch(ns, "alpine", {"spec": {"image": BUSYBOX}})
    debuggers.wait_debugged(ns, "alpine", 1)
    assert len(ephemeral(debuggers.pod(ns, "web"))) == 1


def test_image_allowlist_policy_takes_its_prefixes_from_a_debug_image_policy(
    api: client.ApiClient, pool: Pool, debuggers: Debuggers
) -> None:
    """The shipped allowlist policy and its parameter, a DebugImagePolicy: a change to the
    parameter applies at once."""
    ns = pool.name("policy")
    adm = client.AdmissionregistrationV1Api(api)
    custom = client.CustomObjectsApi(api)
    name = f"pdbg-e2e-images-{pool.run}"
    policy, binding, params = image_allowlist_policy(
        ("registry.example.com/debug/", "busybox"), param=name
    )
    policy["metadata"]["name"] = binding["metadata"]["name"] = binding["spec"]["policyName"] = name
    binding["spec"]["matchResources"] = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}
    }
    custom.create_cluster_custom_object(GROUP, VERSION, "debugimagepolicies", params)
    adm.create_validating_admission_policy(policy)
    adm.create_validating_admission_policy_binding(binding)
    body = debugger_manifest("images", WEB, image="docker.io/library/alpine:3")
    try:

        def try_create() -> tuple[int, str]:
            try:
                debuggers.create(ns, body)
            except ApiException as exc:
                return exc.status, exc.body or ""
            debuggers.delete(ns, "images")  # admitted before the policy was loaded
            return 201, ""

        status, text = wait_until(
            try_create, lambda r: "is not allowed" in r[1], timeout=60, what="denial"
        )
        assert status == 403, text
        assert json.loads(text)["reason"] == "Forbidden"
        assert "image docker.io/library/alpine:3 is not allowed" in text
        assert "must be under one of registry.example.com/debug/, busybox" in text
        body["spec"]["image"] = "registry.example.com/debug/tools:1"
        debuggers.create(ns, body)
        # An empty list allows every image.
        custom.patch_cluster_custom_object(
            GROUP, VERSION, "debugimagepolicies", name, {"spec": {"allowedPrefixes": []}}
        )
        body["metadata"]["name"] = "anything"
        body["spec"]["image"] = "alpine:3"

        def create_anything() -> int:
            try:
                debuggers.create(ns, body)
            except ApiException as exc:
                return int(exc.status)
            return 201

        wait_until(create_anything, lambda s: s == 201, timeout=30, what="empty allowlist")
    finally:
        adm.delete_validating_admission_policy_binding(name)
        adm.delete_validating_admission_policy(name)
        custom.delete_cluster_custom_object(GROUP, VERSION, "debugimagepolicies", name)


def test_a_pod_recreated_under_its_name_is_debugged_again_and_the_event_counts_twice(
    pool: Pool, debuggers: Debuggers, operator: OperatorHandle
) -> None:
    """A StatefulSet-style pod, deleted and recreated under the same name, gets the debug
    container again; the PodDebugger's identical Event is updated (count 2), not duplicated."""
    ns = pool.name("b")
    labels = {"app": "sts"}
    debuggers.run_pod(ns, "sts-0", labels)
    debuggers.create(ns, debugger_manifest("sts", labels))
    debuggers.wait_debugged(ns, "sts", 1)
    first = debuggers.pod(ns, "sts-0").metadata.uid
    debuggers.core.delete_namespaced_pod("sts-0", ns, grace_period_seconds=0)

    def gone() -> bool:
        try:
            return bool(debuggers.pod(ns, "sts-0").metadata.uid != first)
        except ApiException as exc:
            return bool(exc.status == 404)

    wait_until(gone, bool, timeout=60, what="the first sts-0 gone")
    debuggers.run_pod(ns, "sts-0", labels)
    wait_until(
        lambda: ephemeral(debuggers.pod(ns, "sts-0")), bool, timeout=60, what="debugged again"
    )
    added = wait_until(
        lambda: [
            e
            for e in debuggers.events(ns, "PodDebugger", "sts")
            if e.reason == "DebugContainerAdded"
        ],
        lambda events: len(events) == 1 and events[0].count == 2,
        timeout=30,
        what="one DebugContainerAdded Event with count 2",
    )
    assert "to pod sts-0" in added[0].message
