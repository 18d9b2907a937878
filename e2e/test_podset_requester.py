"""A PodSet makes pods only for someone who could make them by hand (#31, item 6), on a real
API server, as a tenant ServiceAccount.

* With the authorization policy (the shipped ValidatingAdmissionPolicy, bound to this test's
  namespace only), a ServiceAccount that may write PodSets but not pods is refused at admission.
* Without it (OLM, or the chart with its policies off), the requester policy (the shipped
  MutatingAdmissionPolicy, likewise bound) records the tenant that may create and delete pods;
  the operator makes its pod. Once that right is revoked (and the operator's last allowing
  answer expired), a scale-up through the scale subresource (which keeps the record) makes no
  pod, an orphan pod matching the selector is not adopted, and the PodSet says why
  (``Degraded``, ``RequesterNotAllowed``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.access import grant, in_force, only_in, renamed
from e2e.cluster import condition, service_account_client, wait_until
from e2e.operators import OperatorHandle
from e2e.podset_support import GROUP, PLURAL, VERSION, PodSets, podset
from opsuite_common.requester import ALLOW_TTL, REQUESTER_NOT_ALLOWED, requested_by
from podset_manifests import admission_policy, requester_policy

PODSET_RULE = {"apiGroups": [GROUP], "resources": [PLURAL, f"{PLURAL}/scale"], "verbs": ["*"]}
POD_RULE = {
    "apiGroups": [""],
    "resources": ["pods"],
    "verbs": ["get", "list", "watch", "create", "delete"],
}


@pytest.fixture
def policies(api: client.ApiClient, namespace: str) -> Iterator[None]:
    """The authorization and requester policies in force for ``namespace`` only."""
    name = f"psreq-{uuid.uuid4().hex[:6]}"
    with in_force(
        api,
        [
            *renamed(admission_policy(), name, only_in(namespace)),
            *renamed(requester_policy(), name, only_in(namespace)),
        ],
    ):
        yield


def _account(api: client.ApiClient, namespace: str, name: str, *rules: dict[str, Any]) -> None:
    """A ServiceAccount ``name`` holding ``rules`` in ``namespace``, one Role and binding per
    rule (``<name>-<index>``)."""
    client.CoreV1Api(api).create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    for index, rule in enumerate(rules):
        grant(api, namespace, f"{name}-{index}", [rule], name, namespace)


def _create(custom: client.CustomObjectsApi, namespace: str, body: dict[str, Any]) -> Any:
    return custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)


def _dry_run(custom: client.CustomObjectsApi, namespace: str, body: dict[str, Any]) -> Any:
    """A dry-run create (admission runs on it): the object, or the refusal."""
    try:
        return custom.create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, body, dry_run="All"
        )
    except ApiException as exc:
        return exc


def test_a_podset_makes_pods_only_for_someone_who_could(
    api: client.ApiClient,
    namespace: str,
    podset_op: OperatorHandle,
    podsets: PodSets,
    policies: None,
) -> None:
    """``podset_op``, ``policies``: the operator and the policies in force."""
    _account(api, namespace, "podsets-only", PODSET_RULE)
    _account(api, namespace, "tenant", PODSET_RULE, POD_RULE)
    body = podset("web", 1)

    writer = client.CustomObjectsApi(service_account_client(api, namespace, "podsets-only"))
    refusal = wait_until(
        lambda: _dry_run(writer, namespace, body),
        lambda answer: isinstance(answer, ApiException),
        timeout=30,
        what="the authorization policy refusing a PodSet from someone who may not make pods",
    )
    assert refusal.status == 403, refusal
    assert "create and delete pods" in str(refusal.body), refusal.body
    with pytest.raises(ApiException) as raised:
        _create(writer, namespace, body)
    assert raised.value.status == 403

    tenant = client.CustomObjectsApi(service_account_client(api, namespace, "tenant"))
    user = f"system:serviceaccount:{namespace}:tenant"
    key = requested_by(GROUP)
    wait_until(
        lambda: _dry_run(tenant, namespace, body),
        lambda answer: isinstance(answer, dict) and answer["metadata"]["annotations"].get(key),
        timeout=30,
        what="the requester policy recording the tenant",
    )
    made = _create(tenant, namespace, body)
    assert made["metadata"]["annotations"][key] == user
    (first,) = podsets.wait_running("app=web", 1)

    client.RbacAuthorizationV1Api(api).delete_namespaced_role_binding("tenant-1", namespace)
    time.sleep(ALLOW_TTL + 1)  # the operator's last allowing answer expires
    client.CustomObjectsApi(api).patch_namespaced_custom_object_scale(
        GROUP, VERSION, namespace, PLURAL, "web", {"spec": {"replicas": 2}}
    )
    client.CoreV1Api(api).create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "orphan", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "main", "image": "nginx"}]},
        },
    )
    refused = wait_until(
        lambda: podsets.get("web"),
        lambda obj: condition(obj, "Degraded").get("reason") == REQUESTER_NOT_ALLOWED,
        timeout=60,
        what="the PodSet reporting RequesterNotAllowed",
    )
    assert user in condition(refused, "Degraded")["message"]
    assert refused["metadata"]["annotations"][key] == user  # the scale kept the record
    time.sleep(2)  # what a pass that acted anyway would have done by now
    pods = {p.metadata.name: p for p in podsets.pods("app=web")}
    assert set(pods) == {first.metadata.name, "orphan"}, sorted(pods)
    assert not pods["orphan"].metadata.owner_references
