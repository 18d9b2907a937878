"""A ConfigMapSync (and a SecretSync) writes only while its requester may still write there (#31,
item 3; #34), on a real API server, as a tenant ServiceAccount and with no authorization policy
(OLM, or the chart with its policies off).

The tenant owns the source in its namespace and may write ConfigMaps in a second namespace,
which accepts copies from the tenant's; the requester policy (the shipped
MutatingAdmissionPolicy, bound to the tenant's namespace only) records the tenant; the operator
copies. Once the tenant's right in the destination is revoked (and the operator's last allowing
answer expired), a change of the source is not copied there, and the ConfigMapSync says why
(``RequesterNotAllowed``).
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
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
    RESOURCE,
    SECRET_RESOURCE,
    VERSION,
    install_crd,
)
from e2e.operators import OperatorProcess, start_operator
from e2e.resources import CustomResource
from opsuite_common.requester import ALLOW_TTL, REQUESTER_NOT_ALLOWED, requested_by

pytestmark = pytest.mark.local_operators("runs its own operator over this test's namespaces")


@dataclass(frozen=True)
class Kind:
    """A kind of sync, what it copies, and the operator's flags that serve it."""

    sync: CustomResource
    resource: str
    name_field: str
    flags: tuple[str, ...] = ()

    @property
    def plural(self) -> str:
        return self.sync.plural

    def rights(self) -> list[dict[str, object]]:
        verbs = ["get", "list", "watch", "create", "update", "delete"]
        return [{"apiGroups": [""], "resources": [self.resource], "verbs": verbs}]

    def manifest(self, name: str, **spec: object) -> dict[str, object]:
        return self.sync.manifest(name, {self.name_field: name, **spec})


KINDS = [
    Kind(RESOURCE, "configmaps", "configMapName"),
    Kind(SECRET_RESOURCE, "secrets", "secretName", ("--secrets",)),
]


class Namespaces:
    """The tenant's namespace and a destination accepting copies from it."""

    def __init__(self, api: client.ApiClient, kind: Kind) -> None:
        self.api = api
        self.kind = kind
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
        syncs = {"apiGroups": [GROUP], "resources": [self.kind.plural], "verbs": ["*"]}
        rights = self.kind.rights()
        grant(self.api, self.tenant, "tenant", [*rights, syncs], "tenant", self.tenant)
        grant(self.api, self.dest, "tenant", rights, "tenant", self.tenant)
        return self

    def __exit__(self, *_exc: object) -> None:
        for ns in (self.tenant, self.dest):
            self.core.delete_namespace(ns, propagation_policy="Background")


@pytest.fixture(params=KINDS, ids=lambda k: k.plural)
def kind(request: pytest.FixtureRequest) -> Kind:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def spaces(api: client.ApiClient, cluster: Cluster, kind: Kind) -> Iterator[Namespaces]:
    """The namespaces, the tenant's rights there, and the requester policy (one for both kinds)
    in force for the tenant's namespace only."""
    install_crd(cluster)
    with (
        Namespaces(api, kind) as made,
        in_force(api, renamed(requester_policy(), made.policy, only_in(made.tenant))),
    ):
        yield made


@pytest.fixture
def operator(cluster: Cluster, spaces: Namespaces, tmp_path: Path) -> Iterator[OperatorProcess]:
    process = start_operator(
        cluster,
        "configmapsync-operator",
        (spaces.tenant, spaces.dest),
        tmp_path,
        *spaces.kind.flags,
    )
    yield process
    process.stop()


def _data(core: client.CoreV1Api, kind: Kind, namespace: str) -> dict[str, str] | None:
    """The copied values (a Secret's decoded), None while there is no copy."""
    try:
        if kind.resource == "secrets":
            data = core.read_namespaced_secret("settings", namespace).data or {}
            return {k: base64.b64decode(v).decode() for k, v in data.items()}
        return core.read_namespaced_config_map("settings", namespace).data
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def test_a_revoked_requester_stops_the_copies(
    api: client.ApiClient, spaces: Namespaces, kind: Kind, operator: OperatorProcess
) -> None:
    """``operator``: running over both namespaces (with the kind's flags)."""
    core = client.CoreV1Api(api)
    tenant = service_account_client(api, spaces.tenant, "tenant")
    source = {
        "metadata": {"name": "settings", "annotations": {ALLOWED: spaces.dest}},
        "stringData" if kind.resource == "secrets" else "data": {"level": "1"},
    }
    tenant_core = client.CoreV1Api(tenant)
    if kind.resource == "secrets":
        tenant_core.create_namespaced_secret(spaces.tenant, source)
    else:
        tenant_core.create_namespaced_config_map(spaces.tenant, source)
    body = kind.manifest("settings", destinationNamespaces=[spaces.dest])
    custom = client.CustomObjectsApi(tenant)
    key = requested_by(GROUP)
    wait_until(
        lambda: custom.create_namespaced_custom_object(
            GROUP, VERSION, spaces.tenant, kind.plural, body, dry_run="All"
        ),
        lambda obj: bool((obj["metadata"].get("annotations") or {}).get(key)),
        timeout=30,
        what="the requester policy recording the tenant",
    )
    made = custom.create_namespaced_custom_object(GROUP, VERSION, spaces.tenant, kind.plural, body)
    user = f"system:serviceaccount:{spaces.tenant}:tenant"
    assert made["metadata"]["annotations"][key] == user
    # A change that leaves the spec alone does not rewrite the record: the policy keeps it.
    forged = {"metadata": {"annotations": {key: "someone-else"}}}
    kept = custom.patch_namespaced_custom_object(
        GROUP, VERSION, spaces.tenant, kind.plural, "settings", forged
    )
    assert kept["metadata"]["annotations"][key] == user
    wait_until(
        lambda: _data(core, kind, spaces.dest),
        lambda data: data == {"level": "1"},
        timeout=60,
        what="the copy in the destination",
    )

    spaces.rbac.delete_namespaced_role_binding("tenant", spaces.dest)
    time.sleep(ALLOW_TTL + 1)  # the operator's last allowing answer expires
    change = {"stringData" if kind.resource == "secrets" else "data": {"level": "2"}}
    if kind.resource == "secrets":
        core.patch_namespaced_secret("settings", spaces.tenant, change)
    else:
        core.patch_namespaced_config_map("settings", spaces.tenant, change)
    sync = wait_until(
        lambda: client.CustomObjectsApi(api).get_namespaced_custom_object(
            GROUP, VERSION, spaces.tenant, kind.plural, "settings"
        ),
        lambda obj: condition(obj, "Ready").get("reason") == REQUESTER_NOT_ALLOWED,
        timeout=60,
        what=f"the {kind.plural} reporting RequesterNotAllowed",
    )
    message = condition(sync, "Ready")["message"]
    assert user in message
    assert f"in {spaces.dest}" in message
    time.sleep(2)  # what a pass that wrote anyway would have done by now
    assert _data(core, kind, spaces.dest) == {"level": "1"}
