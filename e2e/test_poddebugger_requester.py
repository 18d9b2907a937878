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
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

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
from poddebugger_manifests import requester_policy
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


def test_a_revoked_requester_stops_the_injections(
    api: client.ApiClient,
    namespace: str,
    recorded: None,
    operator: OperatorProcess,
) -> None:
    """``recorded`` and ``operator``: the policy in force and the operator running."""
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "debugger"}})
    grant(api, namespace, "debugger", RULES, "debugger", namespace)
    user = f"system:serviceaccount:{namespace}:debugger"
    debuggers = Debuggers(api)
    tenant = client.CustomObjectsApi(service_account_client(api, namespace, "debugger"))
    debuggers.run_pod(namespace, "web-1", WEB)
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
    assert annotations[REQUESTED_BY] == user, annotations
    assert "system:serviceaccounts" in annotations[REQUESTED_BY_GROUPS].split("\n"), annotations
    debuggers.wait_debugged(namespace, "shell", 1)

    # Someone else (here the admin) rewrites the record without touching the spec: kept.
    patched = client.CustomObjectsApi(api).patch_namespaced_custom_object(
        GROUP,
        "v1alpha1",
        namespace,
        PLURAL,
        "shell",
        {"metadata": {"annotations": {REQUESTED_BY: "system:admin"}}},
    )
    assert patched["metadata"]["annotations"][REQUESTED_BY] == user

    rbac.delete_namespaced_role_binding("debugger", namespace)
    time.sleep(ALLOW_TTL + 1)  # the operator's last allowing answer expires
    debuggers.run_pod(namespace, "web-2", WEB)
    found = wait_until(
        lambda: debuggers.get(namespace, "shell"),
        lambda obj: condition(obj, "Ready").get("reason") == "RequesterNotAllowed",
        timeout=90,
        what="the PodDebugger reporting RequesterNotAllowed",
    )
    assert user in condition(found, "Ready")["message"]
    assert ephemeral(debuggers.pod(namespace, "web-2")) == []
    assert len(ephemeral(debuggers.pod(namespace, "web-1"))) == 1
