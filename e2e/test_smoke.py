"""The cluster under test is a real one: scheduling, GC, ephemeral containers, admission, audit."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.cluster import Cluster, audit_events, service_account_client, wait_until

POD_TEMPLATE = {
    "metadata": {"labels": {"app": "smoke"}},
    "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["sleep", "3600"]}]},
}


def _running_pods(core: client.CoreV1Api, namespace: str) -> list[str]:
    pods = core.list_namespaced_pod(namespace, label_selector="app=smoke").items
    return sorted(p.metadata.name for p in pods if p.status.phase == "Running")


def test_replicaset_pods_run_and_are_garbage_collected(
    api: client.ApiClient, namespace: str
) -> None:
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "smoke"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "smoke"}},
            "template": POD_TEMPLATE,
        },
    }
    apps.create_namespaced_replica_set(namespace, rs)
    wait_until(
        lambda: _running_pods(core, namespace),
        lambda names: len(names) == 3,
        timeout=90,
        what="3 Running pods of the ReplicaSet",
    )
    pods = core.list_namespaced_pod(namespace, label_selector="app=smoke").items
    assert all(
        p.spec.node_name and p.spec.node_name.startswith(("kwok-", "pytest-kind")) for p in pods
    )
    apps.delete_namespaced_replica_set("smoke", namespace, propagation_policy="Background")
    wait_until(
        lambda: core.list_namespaced_pod(namespace, label_selector="app=smoke").items,
        lambda items: not items,
        timeout=90,
        what="garbage collection of the ReplicaSet's pods",
    )


def test_ephemeral_container_through_subresource(api: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(api)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "target", "labels": POD_TEMPLATE["metadata"]["labels"]},
        "spec": POD_TEMPLATE["spec"],
    }
    core.create_namespaced_pod(namespace, pod)
    wait_until(
        lambda: core.read_namespaced_pod("target", namespace).status.phase,
        lambda phase: phase == "Running",
        timeout=60,
        what="pod target Running",
    )
    debug = {
        "name": "debugger",
        "image": "busybox",
        "command": ["sh"],
        "stdin": True,
        "tty": True,
        "targetContainerName": "main",
    }
    core.patch_namespaced_pod_ephemeralcontainers(
        "target", namespace, {"spec": {"ephemeralContainers": [debug]}}
    )
    pod = core.read_namespaced_pod("target", namespace)
    names = [c.name for c in pod.spec.ephemeral_containers or []]
    assert names == ["debugger"]
    assert pod.spec.ephemeral_containers[0].target_container_name == "main"
    # Ephemeral containers cannot be changed once added: the API server refuses.
    changed = {**debug, "image": "alpine"}
    with pytest.raises(ApiException) as refused:
        core.patch_namespaced_pod_ephemeralcontainers(
            "target", namespace, {"spec": {"ephemeralContainers": [changed]}}
        )
    assert refused.value.status == 422


def test_admission_policy_with_authorizer_and_audit_log(
    cluster: Cluster, api: client.ApiClient, namespace: str
) -> None:
    """A ValidatingAdmissionPolicy asks the authorizer; the audit log records the request."""
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    adm = client.AdmissionregistrationV1Api(api)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "writer"}})
    rbac.create_namespaced_role(
        namespace,
        {
            "metadata": {"name": "configmap-writer"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "get"]}],
        },
    )
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": "writer"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "configmap-writer",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "writer", "namespace": namespace}],
        },
    )
    policy = f"smoke-needs-secret-read-{namespace}"
    adm.create_validating_admission_policy(
        {
            "metadata": {"name": policy},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["configmaps"],
                        }
                    ]
                },
                "validations": [
                    {
                        "expression": "authorizer.group('').resource('secrets')"
                        ".namespace(object.metadata.namespace).check('get').allowed()",
                        "message": "creator may not read Secrets in this namespace",
                        "reason": "Forbidden",
                    }
                ],
            },
        }
    )
    adm.create_validating_admission_policy_binding(
        {
            "metadata": {"name": policy},
            "spec": {
                "policyName": policy,
                "validationActions": ["Deny"],
                "matchResources": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
                },
            },
        }
    )
    try:
        sa_api = service_account_client(
            api, namespace, "writer", user_agent=f"opsuite-e2e-smoke/{uuid.uuid4().hex[:8]}"
        )
        sa_core = client.CoreV1Api(sa_api)
        cm = {"metadata": {"name": "from-writer"}, "data": {"k": "v"}}

        def try_create() -> tuple[int, str]:
            try:
                sa_core.create_namespaced_config_map(namespace, cm)
            except ApiException as exc:
                return exc.status, exc.body or ""
            # Admitted before the API server loaded the policy: undo, and try again.
            core.delete_namespaced_config_map("from-writer", namespace)
            return 201, ""

        # The policy takes effect once the API server has loaded it (typically ~1 s).
        _, body = wait_until(try_create, lambda r: r[0] == 403, timeout=30, what="a denial")
        assert "creator may not read Secrets in this namespace" in body
        # The admin can read Secrets, so the same request passes the policy.
        core.create_namespaced_config_map(namespace, cm)
        sa_api.close()
    finally:
        adm.delete_validating_admission_policy_binding(policy)
        adm.delete_validating_admission_policy(policy)

    if cluster.audit_log is None:
        pytest.skip(f"audit log not readable on a {cluster.kind} cluster")
    user = f"system:serviceaccount:{namespace}:writer"
    audit_log = cluster.audit_log

    def denied_creates() -> list[dict[str, Any]]:
        return [
            e
            for e in audit_events(audit_log)
            if e.get("user", {}).get("username") == user
            and e.get("verb") == "create"
            and e.get("objectRef", {}).get("resource") == "configmaps"
            and e.get("objectRef", {}).get("namespace") == namespace
            and e.get("responseStatus", {}).get("code") == 403
        ]

    events = wait_until(denied_creates, bool, timeout=15, what=f"an audit event for {user}")
    assert events[0]["userAgent"].startswith("opsuite-e2e-smoke/")
    assert events[0]["level"] == "Metadata"
    assert "requestObject" not in events[0]
