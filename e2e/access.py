"""Who may do what in the e2e tests: Roles granted to a test's ServiceAccounts, and copies of
the shipped admission policies in force for one test (other runs share the cluster)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from opsuite_common.store import JSON


def grant(
    api: client.ApiClient,
    namespace: str,
    role: str,
    rules: Sequence[JSON],
    account: str,
    account_namespace: str,
) -> None:
    """The Role ``role`` holding ``rules`` in ``namespace``, bound (same name) to the
    ServiceAccount ``account_namespace/account``."""
    rbac = client.RbacAuthorizationV1Api(api)
    rbac.create_namespaced_role(namespace, {"metadata": {"name": role}, "rules": list(rules)})
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": role},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": [
                {"kind": "ServiceAccount", "name": account, "namespace": account_namespace}
            ],
        },
    )


def only_in(namespace: str) -> JSON:
    """A binding's matchResources: objects in ``namespace`` only."""
    return {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}


def renamed(documents: Sequence[JSON], name: str, match_resources: JSON) -> list[JSON]:
    """Copies of a shipped policy and its binding under ``name``, the binding limited to
    ``match_resources``."""
    policy, binding = (copy.deepcopy(d) for d in documents)
    policy["metadata"]["name"] = binding["metadata"]["name"] = name
    binding["spec"]["policyName"] = name
    binding["spec"]["matchResources"] = match_resources
    return [policy, binding]


@contextmanager
def in_force(api: client.ApiClient, documents: Sequence[JSON]) -> Iterator[None]:
    """``documents`` (admission policies and bindings) created for the block, then deleted."""
    adm = client.AdmissionregistrationV1Api(api)
    calls: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
        "ValidatingAdmissionPolicy": (
            adm.create_validating_admission_policy,
            adm.delete_validating_admission_policy,
        ),
        "ValidatingAdmissionPolicyBinding": (
            adm.create_validating_admission_policy_binding,
            adm.delete_validating_admission_policy_binding,
        ),
        "MutatingAdmissionPolicy": (
            adm.create_mutating_admission_policy,
            adm.delete_mutating_admission_policy,
        ),
        "MutatingAdmissionPolicyBinding": (
            adm.create_mutating_admission_policy_binding,
            adm.delete_mutating_admission_policy_binding,
        ),
    }
    made: list[JSON] = []
    try:
        for document in documents:
            calls[document["kind"]][0](document)
            made.append(document)
        yield
    finally:
        for document in reversed(made):
            try:
                calls[document["kind"]][1](document["metadata"]["name"])
            except ApiException as exc:
                if exc.status != 404:
                    raise
