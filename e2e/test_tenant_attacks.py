"""Attacks of a tenant on ConfigMapSync, run on the real plane as that tenant (#31, item 1).

The tenant is a ServiceAccount bound, in its own namespace only, to the built-in ``edit`` role
and to the right to write ConfigMapSyncs there (what the chart's ``<release>-edit`` role, or
OLM's aggregated one, gives every namespace editor). It owns its source ConfigMaps, so it can
consent for them (``allowed-namespaces: "*"``); what it must not reach is another team's
namespace, or ``kube-system``. The operator serves the tenant's namespace, another team's,
one that accepts the tenant's copies and ``kube-system``, as its chart's ServiceAccount.

Without any admission policy (OLM, or the chart with ``admissionPolicy.enabled=false``) the
operator's own check of the destination's consent is the only line: nothing is created,
changed or deleted in a namespace that does not accept copies from the tenant's namespace (read
from the audit log), and every refusal is in the status and a Warning Event. With the chart's
admission policy the tenant's ConfigMapSync is refused at admission already.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from configmapsync_manifests import admission_policy
from e2e.cluster import (
    Cluster,
    condition,
    flush_audit_log,
    service_account_client,
    wait_until,
)
from e2e.configmapsync_support import (
    ACCEPT,
    ALLOWED,
    GROUP,
    PLURAL,
    VERSION,
    Syncs,
    install_crd,
    sync_manifest,
    writes_by,
)
from e2e.operators import OperatorProcess, start_operator

pytestmark = pytest.mark.local_operators(
    "runs its own operator over kube-system and reads the audit log"
)

EDITOR_RULES = [
    {
        "apiGroups": [GROUP],
        "resources": [PLURAL],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    }
]
"""What the chart's ``<release>-edit`` role gives (aggregated into ``edit``)."""


class Tenancy:
    """The tenant's namespace, another team's, one that accepts the tenant's copies, and the
    tenant's API client."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)
        self.rbac = client.RbacAuthorizationV1Api(api)
        self.run = uuid.uuid4().hex[:6]
        self.tenant = f"atk-{self.run}-tenant"
        self.victim = f"atk-{self.run}-victim"
        self.open = f"atk-{self.run}-open"
        self.role = f"atk-{self.run}-cms-editor"
        self.victim_name = f"atk-{self.run}-settings"
        """The name of the ConfigMap the attacks aim at, in the victim's and kube-system."""
        self.new_name = f"atk-{self.run}-new"
        """A name no ConfigMap has anywhere: the attack that creates (EKS's aws-auth, say)."""

    def __enter__(self) -> Tenancy:
        for ns, consent in (
            (self.tenant, {}),
            (self.victim, {ACCEPT: "team-platform"}),
            (self.open, {ACCEPT: self.tenant}),
        ):
            self.core.create_namespace({"metadata": {"name": ns, "annotations": consent}})
        wait_until(
            lambda: self.core.read_namespaced_service_account("default", self.tenant),
            bool,
            timeout=60,
            what="the tenant namespace's default ServiceAccount",
        )
        self.rbac.create_cluster_role({"metadata": {"name": self.role}, "rules": EDITOR_RULES})
        self.core.create_namespaced_service_account(self.tenant, {"metadata": {"name": "tenant"}})
        for role in ("edit", self.role):
            self.rbac.create_namespaced_role_binding(
                self.tenant,
                {
                    "metadata": {"name": f"tenant-{role}"},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": role,
                    },
                    "subjects": [
                        {"kind": "ServiceAccount", "name": "tenant", "namespace": self.tenant}
                    ],
                },
            )
        return self

    def __exit__(self, *_exc: object) -> None:
        for ns in (self.tenant, self.victim, self.open):
            self.core.delete_namespace(ns, propagation_policy="Background")
        self.rbac.delete_cluster_role(self.role)
        for name in (self.victim_name, self.new_name):
            try:
                self.core.delete_namespaced_config_map(name, "kube-system")
            except ApiException as exc:
                if exc.status != 404:
                    raise

    def as_tenant(self) -> client.ApiClient:
        return service_account_client(self.api, self.tenant, "tenant")


@pytest.fixture(scope="module")
def tenancy(api: client.ApiClient, cluster: Cluster) -> Iterator[Tenancy]:
    install_crd(cluster)
    with Tenancy(api) as made:
        yield made


@pytest.fixture(scope="module")
def operator(
    cluster: Cluster, tenancy: Tenancy, tmp_path_factory: Any
) -> Iterator[OperatorProcess]:
    served = (tenancy.tenant, tenancy.victim, tenancy.open, "kube-system")
    process = start_operator(
        cluster,
        "configmapsync-operator",
        served,
        tmp_path_factory.mktemp("tenant-attacks"),
        POD_NAME=f"atk-e2e-{tenancy.run}",
    )
    yield process
    process.stop()


def _create_as_tenant(tenant: client.ApiClient, namespace: str, body: dict[str, Any]) -> None:
    """Create a ConfigMapSync as the tenant, once its fresh RoleBindings are in force."""
    custom = client.CustomObjectsApi(tenant)

    def attempt() -> bool:
        try:
            custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
        except ApiException as exc:
            if exc.status == 403 and "cannot create resource" in (exc.body or ""):
                return False  # the RoleBinding is not in force yet
            raise
        return True

    wait_until(attempt, bool, timeout=30, what="the tenant's create")


def test_a_tenant_writes_nothing_into_namespaces_that_do_not_accept_its_copies(
    cluster: Cluster, api: client.ApiClient, tenancy: Tenancy, operator: OperatorProcess
) -> None:
    """No admission policy in force: the tenant consents for its own ConfigMaps and asks for
    them over another team's ConfigMap (Overwrite), into kube-system, and into every namespace
    (an empty selector, which never selects kube-system). Only the namespace that accepts the
    tenant's copies gets any; the others are untouched, and the refusals are reported; deleting
    the syncs deletes only the operator's own copies."""
    if cluster.audit_log is None:
        pytest.skip(f"audit log not readable on a {cluster.kind} cluster")
    since = time.time()
    syncs = Syncs(api, cluster)
    tenant = tenancy.as_tenant()
    victim_cm = syncs.put_configmap(tenancy.victim, tenancy.victim_name, {"owner": "victim"})
    system_cm = syncs.put_configmap("kube-system", tenancy.victim_name, {"owner": "admin"})
    tenant_core = client.CoreV1Api(tenant)
    for source in (tenancy.victim_name, tenancy.new_name):
        body = {
            "metadata": {"name": source, "annotations": {ALLOWED: "*"}},
            "data": {"owner": "attacker"},
        }
        wait_until(
            lambda body=body: tenant_core.create_namespaced_config_map(tenancy.tenant, body),
            bool,
            timeout=30,
            what="the tenant's source ConfigMap",
        )
    attacks = {
        "overwrite": sync_manifest(
            "overwrite",
            tenancy.victim_name,
            destinationNamespaces=[tenancy.victim, "kube-system", tenancy.open],
            conflictPolicy="Overwrite",
        ),
        "everywhere": sync_manifest("everywhere", tenancy.new_name, namespaceSelector={}),
    }
    for body in attacks.values():
        _create_as_tenant(tenant, tenancy.tenant, body)
    for name in attacks:
        cms = syncs.wait(
            tenancy.tenant,
            name,
            lambda o: (
                condition(o, "Degraded").get("reason") == "NotAcceptedByNamespace"
                and (o.get("status") or {}).get("syncedNamespaces") == 1
            ),
            "the open namespace synced, the others refused",
        )
        refused = {t["namespace"]: t for t in cms["status"]["failedTargets"]}
        assert tenancy.victim in refused, refused
        assert all(t["reason"] == "NotAcceptedByNamespace" for t in refused.values())
        if name == "overwrite":
            assert "accepts no copies" in refused["kube-system"]["message"]
        else:  # a selector never reaches kube-system: not even a target to refuse
            assert "kube-system" not in refused, refused
        assert "does not accept copies from namespace" in refused[tenancy.victim]["message"]
    events = syncs.core.list_namespaced_event(
        tenancy.tenant, field_selector="involvedObject.kind=ConfigMapSync"
    ).items
    assert ("Warning", "NotAcceptedByNamespace") in {(e.type, e.reason) for e in events}
    for source in (tenancy.victim_name, tenancy.new_name):
        copy = syncs.configmap(tenancy.open, source)
        assert copy is not None
        assert copy.data == {"owner": "attacker"}
    time.sleep(2)  # a write the operator would still make has had time to land
    for ns, before in ((tenancy.victim, victim_cm), ("kube-system", system_cm)):
        now = syncs.configmap(ns, tenancy.victim_name)
        assert now.metadata.resource_version == before.metadata.resource_version, ns
        assert syncs.configmap(ns, tenancy.new_name) is None, ns

    # The tenant deletes its syncs: the operator deletes its own copy, nothing else.
    custom = client.CustomObjectsApi(tenant)
    for name in attacks:
        custom.delete_namespaced_custom_object(GROUP, VERSION, tenancy.tenant, PLURAL, name)
    syncs.wait_copies(
        [tenancy.open], tenancy.victim_name, lambda cm: cm is None, "own copy deleted", 30
    )
    syncs.wait_copies([tenancy.open], tenancy.new_name, lambda cm: cm is None, "deleted", 30)
    for ns, before in ((tenancy.victim, victim_cm), ("kube-system", system_cm)):
        now = syncs.configmap(ns, tenancy.victim_name)
        assert now is not None, f"{ns}/{tenancy.victim_name} was deleted"
        assert now.metadata.resource_version == before.metadata.resource_version, ns
    audit_log = flush_audit_log(cluster, api)
    writes = [
        w
        for w in writes_by(audit_log, f"atk-e2e-{tenancy.run}", since, time.time())
        if w["objectRef"].get("resource") == "configmaps"
    ]
    assert {w["verb"] for w in writes} >= {"create", "delete"}, writes
    outside = [w for w in writes if w["objectRef"].get("namespace") != tenancy.open]
    assert not outside, outside
    tenant.close()


def test_with_the_admission_policy_the_tenant_is_refused_at_admission(
    cluster: Cluster, api: client.ApiClient, tenancy: Tenancy
) -> None:
    """The chart's policy (bound to the tenant's namespace here) refuses the same attack
    before the operator sees it: the tenant could not write the destinations by hand."""
    adm = client.AdmissionregistrationV1Api(api)
    policy, binding = admission_policy()
    name = f"atk-e2e-{tenancy.run}"
    policy["metadata"]["name"] = binding["metadata"]["name"] = binding["spec"]["policyName"] = name
    binding["spec"]["matchResources"] = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": tenancy.tenant}}
    }
    adm.create_validating_admission_policy(policy)
    adm.create_validating_admission_policy_binding(binding)
    tenant = tenancy.as_tenant()
    custom = client.CustomObjectsApi(tenant)
    body = sync_manifest(
        "refused",
        tenancy.victim_name,
        destinationNamespaces=[tenancy.victim, "kube-system"],
        conflictPolicy="Overwrite",
    )

    def attempt() -> tuple[int, str]:
        try:
            custom.create_namespaced_custom_object(GROUP, VERSION, tenancy.tenant, PLURAL, body)
        except ApiException as exc:
            return exc.status, exc.body or ""
        custom.delete_namespaced_custom_object(GROUP, VERSION, tenancy.tenant, PLURAL, "refused")
        return 201, ""  # admitted before the API server loaded the policy: again

    try:
        status, text = wait_until(
            attempt, lambda r: "destination" in r[1], timeout=30, what="the policy's denial"
        )
        assert status == 403, text
        assert "may not create, update and delete ConfigMaps in every destination" in text
    finally:
        adm.delete_validating_admission_policy_binding(name)
        adm.delete_validating_admission_policy(name)
        tenant.close()


def test_a_destination_deleted_and_created_again_by_another_team_gets_no_copy(
    api: client.ApiClient, tenancy: Tenancy, operator: OperatorProcess
) -> None:
    """The namespace that accepted the tenant's copies is deleted, and another team creates one
    under its name that accepts copies only from its own: the consent is read from the
    Namespace on every pass, so the new namespace gets no copy and the sync reports why.
    (Runs last: it replaces the module's open namespace.)"""
    syncs = Syncs(api)
    tenant = tenancy.as_tenant()
    name = f"atk-{tenancy.run}-reused"
    wait_until(
        lambda: client.CoreV1Api(tenant).create_namespaced_config_map(
            tenancy.tenant,
            {"metadata": {"name": name, "annotations": {ALLOWED: "*"}}, "data": {"k": "v"}},
        ),
        bool,
        timeout=30,
        what="the tenant's source ConfigMap",
    )
    _create_as_tenant(
        tenant, tenancy.tenant, sync_manifest(name, name, destinationNamespaces=[tenancy.open])
    )
    syncs.wait_copies([tenancy.open], name, lambda cm: cm is not None, "the first copy", 60)
    tenancy.core.delete_namespace(tenancy.open)

    def recreate() -> bool:
        try:
            tenancy.core.create_namespace(
                {"metadata": {"name": tenancy.open, "annotations": {ACCEPT: "team-platform"}}}
            )
        except ApiException as exc:
            if exc.status == 409:
                return False  # the old namespace is still terminating
            raise
        return True

    wait_until(recreate, bool, timeout=120, interval=1, what="the namespace created again")
    cms = syncs.wait(
        tenancy.tenant,
        name,
        lambda o: any(
            t["namespace"] == tenancy.open and t["reason"] == "NotAcceptedByNamespace"
            for t in (o.get("status") or {}).get("failedTargets") or []
        ),
        "the new namespace refused",
    )
    assert condition(cms, "Ready").get("status") == "False", cms["status"]
    time.sleep(2)  # a copy the operator would still write has had time to land
    assert syncs.configmap(tenancy.open, name) is None
    tenant.close()
