"""Who may change the PodDebugger image allowlist (#31, item 8), on a real API server.

Under OLM every edit role holds create, update and delete on DebugImagePolicies (OLM aggregates
the write rights of each CRD a bundle owns into the built-in roles; ``test_olm_roles`` checks
it on the OLM route). A ServiceAccount given exactly those rights cluster-wide, as a
cluster-wide ``edit`` binding gives them there, first changes the allowlist (RBAC alone lets
it); then, under the shipped ``debugimagepolicy-writers`` policy, it can neither create, widen
nor delete one, and says which verb it lacks; granted ``escalate``, it can again.

The policy is the shipped one, its binding limited to this run's objects by a label (other runs
share the cluster).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.access import in_force, renamed
from e2e.cluster import Cluster, service_account_client, wait_until
from e2e.poddebugger_support import GROUP, VERSION, install_crd
from poddebugger_manifests import (
    IMAGE_POLICY_WRITERS_VERB,
    image_policy_writers_policy,
)
from poddebugger_operator.models import IMAGE_POLICY_KIND, IMAGE_POLICY_PLURAL

RUN_LABEL = "opsuite.dev/e2e-run"
OLM_EDIT_VERBS = ["create", "update", "patch", "delete"]
"""What OLM's ``<crd>-<version>-edit`` ClusterRole grants (aggregated into ``edit``)."""


@dataclass
class Writers:
    run: str
    rbac: client.RbacAuthorizationV1Api
    custom: client.CustomObjectsApi
    namespace: str

    def name(self, what: str) -> str:
        return f"piw-{self.run}-{what}"

    def params(self, what: str, prefixes: list[str]) -> dict[str, Any]:
        return {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": IMAGE_POLICY_KIND,
            "metadata": {"name": self.name(what), "labels": {RUN_LABEL: self.run}},
            "spec": {"allowedPrefixes": prefixes},
        }

    def grant(self, role: str, verbs: list[str]) -> None:
        """A ClusterRole on debugimagepolicies, bound cluster-wide to the ServiceAccount."""
        self.rbac.create_cluster_role(
            {
                "metadata": {"name": role},
                "rules": [
                    {"apiGroups": [GROUP], "resources": [IMAGE_POLICY_PLURAL], "verbs": verbs}
                ],
            }
        )
        self.rbac.create_cluster_role_binding(
            {
                "metadata": {"name": role},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": role,
                },
                "subjects": [
                    {"kind": "ServiceAccount", "name": "writer", "namespace": self.namespace}
                ],
            }
        )


@pytest.fixture(scope="module")
def writers(cluster: Cluster, api: client.ApiClient) -> Iterator[Writers]:
    install_crd(cluster)
    run = uuid.uuid4().hex[:6]
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    custom = client.CustomObjectsApi(api)
    made = Writers(run, rbac, custom, f"piw-{run}")
    core.create_namespace({"metadata": {"name": made.namespace}})
    try:
        core.create_namespaced_service_account(made.namespace, {"metadata": {"name": "writer"}})
        made.grant(made.name("olm-edit"), [*OLM_EDIT_VERBS, "get", "list"])
        yield made
    finally:
        cleanups: list[Callable[[], Any]] = []
        for what in ("list", "new"):
            cleanups.append(
                lambda w=what: custom.delete_cluster_custom_object(
                    GROUP, VERSION, IMAGE_POLICY_PLURAL, made.name(w)
                )
            )
        for role in ("olm-edit", "escalate"):
            cleanups.append(lambda r=role: rbac.delete_cluster_role_binding(made.name(r)))
            cleanups.append(lambda r=role: rbac.delete_cluster_role(made.name(r)))
        cleanups.append(
            lambda: core.delete_namespace(made.namespace, propagation_policy="Background")
        )
        for cleanup in cleanups:
            try:
                cleanup()
            except ApiException as exc:
                if exc.status != 404:
                    raise


def _widen(custom: client.CustomObjectsApi, name: str, *, dry_run: bool = False) -> Any:
    return custom.patch_cluster_custom_object(
        GROUP,
        VERSION,
        IMAGE_POLICY_PLURAL,
        name,
        {"spec": {"allowedPrefixes": []}},
        **({"dry_run": "All"} if dry_run else {}),
    )


def _refused(call: Callable[[], Any]) -> ApiException | None:
    try:
        call()
    except ApiException as exc:
        if exc.status == 403:
            return exc
        raise
    return None


def test_only_those_who_may_escalate_change_the_image_allowlist(
    writers: Writers, api: client.ApiClient
) -> None:
    admin = writers.custom
    name = writers.name("list")
    tenant = client.CustomObjectsApi(service_account_client(api, writers.namespace, "writer"))
    # RBAC alone, as under OLM: the cluster-wide editor widens the list.
    admin.create_cluster_custom_object(
        GROUP, VERSION, IMAGE_POLICY_PLURAL, writers.params("list", ["docker.io/library/busybox"])
    )
    assert _widen(tenant, name)["spec"]["allowedPrefixes"] == []
    admin.patch_cluster_custom_object(
        GROUP,
        VERSION,
        IMAGE_POLICY_PLURAL,
        name,
        {"spec": {"allowedPrefixes": ["docker.io/library/busybox"]}},
    )

    only_ours = {"objectSelector": {"matchLabels": {RUN_LABEL: writers.run}}}
    with in_force(api, renamed(image_policy_writers_policy(), writers.name("policy"), only_ours)):
        # Polled without effect (admission runs on dry runs) until the policy is in force.
        wait_until(
            lambda: _refused(lambda: _widen(tenant, name, dry_run=True)),
            lambda exc: exc is not None,
            timeout=60,
            what="the writers policy refusing the cluster-wide editor",
        )
        refusal = _refused(lambda: _widen(tenant, name))
        assert refusal is not None
        assert IMAGE_POLICY_WRITERS_VERB in str(refusal.body), refusal.body
        held = admin.get_cluster_custom_object(GROUP, VERSION, IMAGE_POLICY_PLURAL, name)
        assert held["spec"]["allowedPrefixes"] == ["docker.io/library/busybox"]
        assert _refused(
            lambda: tenant.delete_cluster_custom_object(GROUP, VERSION, IMAGE_POLICY_PLURAL, name)
        )
        assert _refused(
            lambda: tenant.create_cluster_custom_object(
                GROUP, VERSION, IMAGE_POLICY_PLURAL, writers.params("new", [])
            )
        )
        # A cluster admin still may; and so may whoever is granted escalate.
        admin.patch_cluster_custom_object(
            GROUP, VERSION, IMAGE_POLICY_PLURAL, name, {"spec": {"allowedPrefixes": ["a.io/"]}}
        )
        writers.grant(writers.name("escalate"), [IMAGE_POLICY_WRITERS_VERB])
        wait_until(
            lambda: _refused(lambda: _widen(tenant, name, dry_run=True)),
            lambda exc: exc is None,
            timeout=60,
            what="the editor granted escalate widening the list",
        )
        _widen(tenant, name)
        held = admin.get_cluster_custom_object(GROUP, VERSION, IMAGE_POLICY_PLURAL, name)
        assert held["spec"]["allowedPrefixes"] == []
