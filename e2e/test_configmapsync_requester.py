"""A ConfigMapSync writes only while its requester may still write there (#31, item 3), on a real
API server, as a tenant ServiceAccount and with no authorization policy (OLM, or the chart with
its policies off).

The tenant owns the source in its namespace and may write ConfigMaps in a second namespace,
which accepts copies from the tenant's; the requester policy (the shipped
MutatingAdmissionPolicy, bound to the tenant's namespace only) records the tenant; the operator
copies. Once the tenant's right in the destination is revoked (and the operator's last allowing
answer expired), a change of the source is not copied there, and the ConfigMapSync says why
(``RequesterNotAllowed``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from configmapsync_manifests import requester_policy
from e2e.access import grant, in_force, only_in, renamed
from e2e.cluster import Cluster, condition, service_account_client, wait_until
from e2e.configmapsync_support import (
    ACCEPT,
    ALLOWED,
    GROUP,
    PLURAL,
    VERSION,
    install_crd,
    sync_manifest,
)
from e2e.operators import OperatorProcess, start_operator
from opsuite_common.requester import ALLOW_TTL, REQUESTER_NOT_ALLOWED, requested_by

pytestmark = pytest.mark.local_operators("runs its own operator over this test's namespaces")

CONFIG_MAPS = {
    "apiGroups": [""],
    "resources": ["configmaps"],
    "verbs": ["get", "list", "watch", "create", "update", "delete"],
}
SYNCS = {"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["*"]}


class Namespaces:
    """The tenant's namespace and a destination accepting copies from it."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)
        self.rbac = client.RbacAuthorizationV1Api(api)
        run = uuid.uuid4().hex[:6]
        self.tenant, self.dest, self.policy = f"req-{run}-tenant", f"req-{run}-dest", f"req-{run}"

    def __enter__(self) -> Namespaces:
        self.core.create_namespace({"metadata": {"name": self.tenant}})
        self.core.create_namespace(
            {"metadata": {"name": self.dest, "annotations": {ACCEPT: self.tenant}}}
        )
        self.core.create_namespaced_service_account(self.tenant, {"metadata": {"name": "tenant"}})
        grant(self.api, self.tenant, "tenant", [CONFIG_MAPS, SYNCS], "tenant", self.tenant)
        grant(self.api, self.dest, "tenant", [CONFIG_MAPS], "tenant", self.tenant)
        return self

    def __exit__(self, *_exc: object) -> None:
        for ns in (self.tenant, self.dest):
            self.core.delete_namespace(ns, propagation_policy="Background")


@pytest.fixture
def spaces(api: client.ApiClient, cluster: Cluster) -> Iterator[Namespaces]:
    """The namespaces, the tenant's rights there, and the requester policy in force for the
    tenant's namespace only."""
    install_crd(cluster)
    with (
        Namespaces(api) as made,
        in_force(api, renamed(requester_policy(), made.policy, only_in(made.tenant))),
    ):
        yield made


@pytest.fixture
def operator(cluster: Cluster, spaces: Namespaces, tmp_path: Path) -> Iterator[OperatorProcess]:
    process = start_operator(
        cluster, "configmapsync-operator", (spaces.tenant, spaces.dest), tmp_path
    )
    yield process
    process.stop()


def _data(core: client.CoreV1Api, namespace: str) -> dict[str, str] | None:
    try:
        return core.read_namespaced_config_map("settings", namespace).data
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def test_a_revoked_requester_stops_the_copies(
    api: client.ApiClient, spaces: Namespaces, operator: OperatorProcess
) -> None:
    """``operator``: running over both namespaces."""
    core = client.CoreV1Api(api)
    tenant = service_account_client(api, spaces.tenant, "tenant")
    client.CoreV1Api(tenant).create_namespaced_config_map(
        spaces.tenant,
        {
            "metadata": {"name": "settings", "annotations": {ALLOWED: spaces.dest}},
            "data": {"level": "1"},
        },
    )
    body = sync_manifest("settings", "settings", destinationNamespaces=[spaces.dest])
    custom = client.CustomObjectsApi(tenant)
    key = requested_by(GROUP)
    wait_until(
        lambda: custom.create_namespaced_custom_object(
            GROUP, VERSION, spaces.tenant, PLURAL, body, dry_run="All"
        ),
        lambda obj: bool((obj["metadata"].get("annotations") or {}).get(key)),
        timeout=30,
        what="the requester policy recording the tenant",
    )
    made = custom.create_namespaced_custom_object(GROUP, VERSION, spaces.tenant, PLURAL, body)
    user = f"system:serviceaccount:{spaces.tenant}:tenant"
    assert made["metadata"]["annotations"][key] == user
    wait_until(
        lambda: _data(core, spaces.dest),
        lambda data: data == {"level": "1"},
        timeout=60,
        what="the copy in the destination",
    )

    spaces.rbac.delete_namespaced_role_binding("tenant", spaces.dest)
    time.sleep(ALLOW_TTL + 1)  # the operator's last allowing answer expires
    core.patch_namespaced_config_map("settings", spaces.tenant, {"data": {"level": "2"}})
    sync = wait_until(
        lambda: client.CustomObjectsApi(api).get_namespaced_custom_object(
            GROUP, VERSION, spaces.tenant, PLURAL, "settings"
        ),
        lambda obj: condition(obj, "Ready").get("reason") == REQUESTER_NOT_ALLOWED,
        timeout=60,
        what="the ConfigMapSync reporting RequesterNotAllowed",
    )
    message = condition(sync, "Ready")["message"]
    assert user in message
    assert f"in {spaces.dest}" in message
    time.sleep(2)  # what a pass that wrote anyway would have done by now
    assert _data(core, spaces.dest) == {"level": "1"}
