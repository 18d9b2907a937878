"""A PodDebugger acts only while its requester may still debug (#31, item 3), on a real API
server.

A ServiceAccount that may run `kubectl debug` in its namespace (patch
``pods/ephemeralcontainers``) and edit PodDebuggers there declares one; the requester policy
(the shipped MutatingAdmissionPolicy, its binding limited to this test's namespace) records it;
the operator injects. Then its right is revoked: a new matching pod gets nothing, and the
PodDebugger says why (``RequesterNotAllowed``), once the operator's last answer allowing it
(cached :data:`~poddebugger_operator.requester.ALLOW_TTL` seconds) has expired. Someone else
rewriting the record by a metadata-only update changes nothing. Pods stay on kwok nodes (what
is checked is what the API server holds).

Before 1.36 no MutatingAdmissionPolicy can write the record: requesters write it themselves,
and the requester check (the shipped ValidatingAdmissionPolicy) admits only the truth.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.access import grant, in_force, only_in, renamed
from e2e.cluster import Cluster, condition, service_account_client, wait_until
from e2e.operators import OperatorProcess, start_operator
from e2e.poddebugger_support import (
    GROUP,
    OPT_OUT,
    PLURAL,
    Debuggers,
    debugger_manifest,
    ephemeral,
    install_crd,
)
from opsuite_common.requester import ALLOW_TTL
from opsuite_common.store import JSON
from poddebugger_manifests import requester_check, requester_policy
from poddebugger_operator.policy import admission_policy
from poddebugger_operator.requester import REQUESTED_BY, REQUESTED_BY_GROUPS

pytestmark = pytest.mark.local_operators("runs its own operator with --require-requester")

WEB = {"app": "web"}
RULES = [
    {"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["*"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods/ephemeralcontainers"], "verbs": ["patch"]},
]
"""What `kubectl debug` and writing PodDebuggers need."""


@pytest.fixture
def recorded(api: client.ApiClient, namespace: str) -> Iterator[None]:
    """The requester policy in force for ``namespace`` only."""
    with in_force(
        api, renamed(requester_policy(), f"pdreq-{uuid.uuid4().hex[:6]}", only_in(namespace))
    ):
        yield


@pytest.fixture
def operator(cluster: Cluster, namespace: str, tmp_path: Path) -> Iterator[OperatorProcess]:
    install_crd(cluster)
    process = start_operator(
        cluster, "pod-debugger-operator", [namespace], tmp_path, OPT_OUT, "--require-requester"
    )
    yield process
    process.stop()


@dataclass(frozen=True)
class Debugging:
    """A ServiceAccount of ``namespace`` that may run `kubectl debug` there and write
    PodDebuggers (:data:`RULES`), and a pod ``web-1`` for its PodDebuggers."""

    api: client.ApiClient
    namespace: str
    debuggers: Debuggers
    tenant: client.CustomObjectsApi
    """The ServiceAccount's own client."""

    @property
    def user(self) -> str:
        """The ServiceAccount as the API server names it."""
        return f"system:serviceaccount:{self.namespace}:debugger"

    def rewrite_record(self, name: str) -> JSON:
        """The admin's metadata-only change of PodDebugger ``name``'s record (a name that is
        not the requester's)."""
        patched: JSON = client.CustomObjectsApi(self.api).patch_namespaced_custom_object(
            GROUP,
            "v1alpha1",
            self.namespace,
            PLURAL,
            name,
            {"metadata": {"annotations": {REQUESTED_BY: "system:admin"}}},
        )
        return patched

    def revoke(self, name: str) -> None:
        """Take the ServiceAccount's rights away; then a new matching pod (``web-2``) gets no
        debug container and PodDebugger ``name`` says why, naming the requester."""
        client.RbacAuthorizationV1Api(self.api).delete_namespaced_role_binding(
            "debugger", self.namespace
        )
        time.sleep(ALLOW_TTL + 1)  # the operator's last allowing answer expires
        self.debuggers.run_pod(self.namespace, "web-2", WEB)
        found = wait_until(
            lambda: self.debuggers.get(self.namespace, name),
            lambda obj: condition(obj, "Ready").get("reason") == "RequesterNotAllowed",
            timeout=90,
            what="the PodDebugger reporting RequesterNotAllowed",
        )
        assert self.user in condition(found, "Ready")["message"]
        assert ephemeral(self.debuggers.pod(self.namespace, "web-2")) == []


@pytest.fixture
def debugging(api: client.ApiClient, namespace: str) -> Debugging:
    client.CoreV1Api(api).create_namespaced_service_account(
        namespace, {"metadata": {"name": "debugger"}}
    )
    grant(api, namespace, "debugger", RULES, "debugger", namespace)
    made = Debugging(
        api,
        namespace,
        Debuggers(api),
        client.CustomObjectsApi(service_account_client(api, namespace, "debugger")),
    )
    made.debuggers.run_pod(namespace, "web-1", WEB)
    return made


def test_a_revoked_requester_stops_the_injections(
    debugging: Debugging, recorded: None, operator: OperatorProcess
) -> None:
    """``recorded`` and ``operator``: the policy in force and the operator running."""
    namespace, tenant = debugging.namespace, debugging.tenant
    body = debugger_manifest("shell", WEB)
    # Dry runs (admission runs on them) until the policy is in force.
    wait_until(
        lambda: tenant.create_namespaced_custom_object(
            GROUP, "v1alpha1", namespace, PLURAL, body, dry_run="All"
        ),
        lambda obj: bool((obj["metadata"].get("annotations") or {}).get(REQUESTED_BY)),
        timeout=30,
        what="the requester policy recording the requester",
    )
    made = tenant.create_namespaced_custom_object(GROUP, "v1alpha1", namespace, PLURAL, body)
    annotations = made["metadata"]["annotations"]
    assert annotations[REQUESTED_BY] == debugging.user, annotations
    assert "system:serviceaccounts" in annotations[REQUESTED_BY_GROUPS].split("\n"), annotations
    debugging.debuggers.wait_debugged(namespace, "shell", 1)
    # Who debugged the pod: its Events and the PodDebugger's name the PodDebugger and the
    # requester the policy recorded (not the operator, which made the PATCH).
    (container,) = ephemeral(debugging.debuggers.pod(namespace, "web-1"))
    said = (
        f"PodDebugger {namespace}/shell (requested by {debugging.user}) added ephemeral "
        f"container {container} (image {body['spec']['image']}) to pod web-1"
    )
    for kind, involved in (("Pod", "web-1"), ("PodDebugger", "shell")):
        wait_until(
            lambda k=kind, i=involved: debugging.debuggers.events(namespace, k, i),
            lambda found: any(
                e.reason == "DebugContainerAdded" and e.message == said for e in found
            ),
            timeout=20,
            what=f"the {kind}'s Event naming the PodDebugger and its requester",
        )

    # Someone else (here the admin) rewrites the record without touching the spec: kept.
    patched = debugging.rewrite_record("shell")
    assert patched["metadata"]["annotations"][REQUESTED_BY] == debugging.user

    debugging.revoke("shell")
    assert len(ephemeral(debugging.debuggers.pod(namespace, "web-1"))) == 1


def _refusal(call: Callable[[], object]) -> str:
    """The body of the 403 ``call`` gets (it must get one)."""
    with pytest.raises(ApiException) as caught:
        call()
    assert caught.value.status == 403, caught.value.body
    return str(caught.value.body)


def _status(call: Callable[[], object]) -> int:
    """The HTTP status ``call`` gets."""
    try:
        call()
    except ApiException as exc:
        return int(exc.status)
    return 201


def test_before_mutating_policies_requesters_record_themselves_truthfully(
    debugging: Debugging, operator: OperatorProcess
) -> None:
    """The requester check alone (no mutating policy, as before 1.36): a PodDebugger naming
    someone else is refused, one naming nobody is not acted upon (``--require-requester``),
    one naming its requester is, until that requester's right is revoked; nobody changes the
    record without the spec."""
    namespace, debuggers = debugging.namespace, debugging.debuggers

    def create(name: str, recorded: str | None, dry_run: str | None = None) -> object:
        body = debugger_manifest(name, WEB)
        if recorded is not None:
            body["metadata"]["annotations"] = {REQUESTED_BY: recorded}
        return debugging.tenant.create_namespaced_custom_object(
            GROUP, "v1alpha1", namespace, PLURAL, body, dry_run=dry_run
        )

    name = f"pdchk-{uuid.uuid4().hex[:6]}"
    with in_force(debugging.api, renamed(requester_check(), name, only_in(namespace))):
        # Dry runs (admission runs on them) until the policy is in force.
        wait_until(
            lambda: _status(lambda: create("spoof", "system:admin", "All")),
            lambda status: status == 403,
            timeout=30,
            what="the requester check in force",
        )
        refused = _refusal(lambda: create("spoof", "system:admin"))
        assert f"{REQUESTED_BY} may only name you" in refused, refused
        create("anonymous", None)
        create("shell", debugging.user)
        debuggers.wait_debugged(namespace, "shell", 1)
        anonymous = wait_until(
            lambda: debuggers.get(namespace, "anonymous"),
            lambda obj: condition(obj, "Ready").get("reason") == "RequesterNotAllowed",
            timeout=60,
            what="the unrecorded PodDebugger reporting RequesterNotAllowed",
        )
        assert "no requester recorded" in condition(anonymous, "Ready")["message"]

        refused = _refusal(lambda: debugging.rewrite_record("shell"))
        assert "change only with the spec" in refused, refused

        debugging.revoke("shell")


SECRET_ENV = {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}
SECRET_READER = [
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["db"]}
]


def test_a_secret_reaches_a_debug_container_only_while_its_requester_may_get_it(
    api: client.ApiClient, debugging: Debugging, recorded: None, operator: OperatorProcess
) -> None:
    """env valueFrom secretKeyRef: the kubelet reads the Secret for the container, so the
    authorization policy admits it only from someone who may get that Secret, and the operator
    injects only while its recorded requester still may (SubjectAccessReview)."""
    namespace, tenant = debugging.namespace, debugging.tenant
    client.CoreV1Api(api).create_namespaced_secret(
        namespace, {"metadata": {"name": "db"}, "stringData": {"password": "p"}}
    )
    body = debugger_manifest("secret", WEB, env=[SECRET_ENV])

    def create(dry_run: str | None = None) -> object:
        return tenant.create_namespaced_custom_object(
            GROUP, "v1alpha1", namespace, PLURAL, body, dry_run=dry_run
        )

    authorization = renamed(
        admission_policy(), f"pdauth-{uuid.uuid4().hex[:6]}", only_in(namespace)
    )
    with in_force(api, authorization):
        refused = wait_until(
            lambda: (
                _refusal(lambda: create("All")) if _status(lambda: create("All")) == 403 else ""
            ),
            lambda said: "you may not get every Secret and ConfigMap" in said,
            timeout=30,
            what="the authorization policy refusing a Secret its author may not get",
        )
        assert f"valueFrom names in namespace {namespace}" in refused, refused
        grant(api, namespace, "secret-reader", SECRET_READER, "debugger", namespace)
        wait_until(
            lambda: _status(lambda: create("All")),
            lambda status: status == 201,
            timeout=30,
            what="the policy admitting it once the author may get the Secret",
        )
        create()
    debugging.debuggers.wait_debugged(namespace, "secret", 1)

    # The requester loses the Secret (not the right to debug): nothing more is injected.
    client.RbacAuthorizationV1Api(api).delete_namespaced_role_binding("secret-reader", namespace)
    time.sleep(ALLOW_TTL + 1)  # the operator's last allowing answer expires
    debugging.debuggers.run_pod(namespace, "web-2", WEB)
    found = wait_until(
        lambda: debugging.debuggers.get(namespace, "secret"),
        lambda obj: condition(obj, "Ready").get("reason") == "RequesterNotAllowed",
        timeout=90,
        what="the PodDebugger reporting RequesterNotAllowed",
    )
    said = condition(found, "Ready")["message"]
    assert f"{debugging.user} may no longer get secrets db in {namespace}" in said, said
    assert ephemeral(debugging.debuggers.pod(namespace, "web-2")) == []
