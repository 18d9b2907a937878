"""SecretSync on a real API server (#34 item 1): Secrets copied with their type, kept in line,
consent in both directions, service-account tokens refused, values never in a log, Event,
status or metric, and the operator's rights on Secrets used only on sources and copies.

One operator process, run with ``--secrets`` (the chart's ``secrets.enabled``) as the chart's
ServiceAccount installed with that value (e2e.charts), serves the module's namespaces;
e2e/test_secretsync_disabled.py runs it without the flag.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from configmapsync_manifests import admission_policy
from configmapsync_operator.kinds import SECRETS
from e2e.access import in_force, only_in, renamed
from e2e.cluster import Cluster, condition, flush_audit_log, service_account_client, wait_until
from e2e.configmapsync_support import ACCEPT, OWNER_LABEL, metric_value
from e2e.operators import LocalOperator, OperatorHandle
from e2e.resources import pool_fixture
from e2e.secretsync_support import (
    SecretPool,
    SecretSyncs,
    encoded,
    secret_requests,
    secret_sync_manifest,
)
from opsuite_common.admission import match_constraints, policy_binding

pytestmark = pytest.mark.local_operators(
    "runs the operator with --secrets, reads its whole log and its requests in the audit log"
)

pool = pool_fixture(SecretPool)
TLS = {"tls.crt": "-----BEGIN CERTIFICATE-----\nMIIB\n", "tls.key": "-----BEGIN KEY-----\n"}
NAMES = {"tls", "token", "consent", "planted", "guarded"}
"""Every source (and so every copy) name the module's tests use ("guarded" is copied when a
SecretSync is admitted before the API server loaded the policy, and its copy deleted with it)."""


@pytest.fixture
def syncs(api: client.ApiClient, operator: OperatorHandle) -> Iterator[SecretSyncs]:
    with SecretSyncs(api) as access:
        yield access


def test_a_tls_secret_is_copied_with_its_type_and_kept_in_line(
    cluster: Cluster, pool: SecretPool, syncs: SecretSyncs, operator: OperatorHandle
) -> None:
    src, a, b, c = (pool.name(s) for s in ("src", "a", "b", "c"))
    syncs.put_secret(src, "tls", TLS, "kubernetes.io/tls")
    uid = syncs.create(src, secret_sync_manifest("tls", "tls", destinationNamespaces=[a, b]))[
        "metadata"
    ]["uid"]
    synced = syncs.wait_ready(src, "tls", 2)
    assert synced["status"]["source"] == f"{src}/tls"
    for ns in (a, b):
        copy = syncs.secret(ns, "tls")
        assert copy is not None
        assert copy.type == "kubernetes.io/tls"
        assert copy.data == encoded(TLS)
        assert (copy.metadata.labels or {})[OWNER_LABEL] == uid
    table = cluster.kubectl("get", "secsync", "tls", "-n", src).splitlines()
    assert table[0].split() == ["NAME", "SOURCE", "TARGETS", "SYNCED", "READY", "AGE"]
    assert table[1].split()[:5] == ["tls", f"{src}/tls", "2", "2", "True"]

    # Drift is undone: an edited copy is restored, a deleted one comes back.
    syncs.core.patch_namespaced_secret("tls", a, {"data": encoded({"tls.key": "edited"})})
    syncs.core.delete_namespaced_secret("tls", b)
    wait_until(
        lambda: [syncs.secret(ns, "tls") for ns in (a, b)],
        lambda copies: all(s is not None and s.data == encoded(TLS) for s in copies),
        timeout=30,
        what="copies restored",
    )
    # A change of the source reaches every copy.
    renewed = {**TLS, "tls.crt": "-----BEGIN CERTIFICATE-----\nMIIC\n"}
    syncs.put_secret(src, "tls", renewed, "kubernetes.io/tls")
    wait_until(
        lambda: [syncs.secret(ns, "tls") for ns in (a, b)],
        lambda copies: all(s is not None and s.data == encoded(renewed) for s in copies),
        timeout=30,
        what="renewed certificate copied",
    )

    # An unmarked Secret of another type is never taken over, even with Overwrite...
    syncs.put_secret(c, "tls", {"k": "theirs"}, allowed=None)
    syncs.patch(
        src, "tls", {"spec": {"destinationNamespaces": [a, c], "conflictPolicy": "Overwrite"}}
    )
    blocked = syncs.wait(
        src,
        "tls",
        lambda o: any(t["namespace"] == c for t in o["status"].get("failedTargets") or ()),
        "conflict in c",
    )
    (failure,) = blocked["status"]["failedTargets"]
    assert failure["reason"] == "Conflict"
    assert "is of type Opaque" in failure["message"]
    mine = syncs.secret(c, "tls")
    assert mine is not None
    assert mine.data == encoded({"k": "theirs"})
    # ...one of the same type is (Overwrite), and b, no longer a destination, loses its copy.
    syncs.core.delete_namespaced_secret("tls", c)
    syncs.put_secret(c, "tls", {"tls.crt": "x", "tls.key": "y"}, "kubernetes.io/tls", allowed=None)
    syncs.wait_ready(src, "tls", 2)
    wait_until(
        lambda: (syncs.secret(b, "tls"), syncs.secret(c, "tls")),
        lambda found: (
            found[0] is None and found[1] is not None and found[1].data == encoded(renewed)
        ),
        timeout=30,
        what="b's copy deleted, c's Secret taken over",
    )
    wait_until(
        lambda: metric_value(
            operator.metrics(), "opsuite_secretsync_synced_targets", {"secretsync": "tls"}
        ),
        lambda synced: synced == 2,
        timeout=10,
        what="the synced-targets gauge",
    )


def test_a_service_account_token_is_never_copied(pool: SecretPool, syncs: SecretSyncs) -> None:
    src, a = pool.name("src"), pool.name("a")
    token = client.V1Secret(
        metadata=client.V1ObjectMeta(
            name="token",
            annotations={
                "kubernetes.io/service-account.name": "default",
                "sync.opsuite.dev/allowed-namespaces": "*",
            },
        ),
        type="kubernetes.io/service-account-token",
    )
    syncs.core.create_namespaced_secret(src, token)
    wait_until(  # the token controller fills it in
        lambda: syncs.secret(src, "token"),
        lambda s: s is not None and bool((s.data or {}).get("token")),
        timeout=30,
        what="token issued",
    )
    syncs.create(src, secret_sync_manifest("token", "token", destinationNamespaces=[a]))
    refused = syncs.wait(
        src, "token", lambda o: condition(o, "Degraded").get("status") == "True", "Degraded"
    )
    degraded = condition(refused, "Degraded")
    assert degraded["reason"] == "SecretTypeNotCopied"
    assert "kubernetes.io/service-account-token" in degraded["message"]
    assert condition(refused, "Ready")["status"] == "False"
    assert syncs.secret(a, "token") is None


def test_consent_is_needed_from_the_source_and_from_each_destination(
    pool: SecretPool, syncs: SecretSyncs
) -> None:
    """Without the admission policy (the module's operator has none): the operator's own check."""
    src, a, b = pool.name("src"), pool.name("a"), pool.name("b")
    syncs.put_secret(src, "consent", {"k": "v"}, allowed=None)  # no consent to copies
    syncs.core.patch_namespace(b, {"metadata": {"annotations": {ACCEPT: "somewhere-else"}}})
    try:
        syncs.create(src, secret_sync_manifest("consent", "consent", destinationNamespaces=[a, b]))
        refused = syncs.wait(
            src,
            "consent",
            lambda o: o["status"].get("failedNamespaces") == 2,
            "both destinations refused",
        )
        reasons = {t["namespace"]: t["reason"] for t in refused["status"]["failedTargets"]}
        assert reasons[a] == "NotAllowedBySource"
        assert syncs.secret(a, "consent") is None
        # The source consents: a gets its copy, b still does not accept copies from src.
        syncs.put_secret(src, "consent", {"k": "v"}, allowed="*")
        partly = syncs.wait(
            src,
            "consent",
            lambda o: o["status"].get("syncedNamespaces") == 1,
            "a synced",
        )
        (failed,) = partly["status"]["failedTargets"]
        assert (failed["namespace"], failed["reason"]) == (b, "NotAcceptedByNamespace")
        assert syncs.secret(a, "consent") is not None
        assert syncs.secret(b, "consent") is None
    finally:
        syncs.core.patch_namespace(b, {"metadata": {"annotations": pool.annotations()}})


def _bind(rbac: client.RbacAuthorizationV1Api, namespace: str, tenant: str, role: str) -> None:
    """Grant the ClusterRole ``role`` in ``namespace`` to the ServiceAccount ``tenant``
    (namespace/name)."""
    sa_namespace, sa = tenant.split("/")
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": f"{sa}-{role}"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": sa_namespace}],
        },
    )


def test_a_tenant_with_edit_in_one_namespace_copies_no_secret_it_could_not_copy_by_hand(
    api: client.ApiClient, pool: SecretPool, syncs: SecretSyncs
) -> None:
    """The shipped secretsync-authorization policy, bound to the tenant's namespace only, and
    RBAC: ConfigMapSync rights grant nothing on SecretSyncs."""
    src, a, b = pool.name("src"), pool.name("a"), pool.name("b")
    syncs.put_secret(src, "guarded", {"password": "hunter2"})
    rbac = client.RbacAuthorizationV1Api(api)
    name = f"secsync-e2e-{pool.run}"
    role = f"{name}-syncs"
    rbac.create_cluster_role(
        {
            "metadata": {"name": role},
            "rules": [
                {"apiGroups": ["sync.opsuite.dev"], "resources": ["secretsyncs"], "verbs": ["*"]}
            ],
        }
    )
    client.CoreV1Api(api).create_namespaced_service_account(a, {"metadata": {"name": "tenant"}})
    _bind(rbac, a, f"{a}/tenant", "edit")  # edit in a: its Secrets
    tenant = service_account_client(api, a, "tenant")
    try:
        with in_force(api, renamed(admission_policy(SECRETS), name, only_in(a))):
            body = secret_sync_manifest(
                "guarded", "guarded", sourceNamespace=src, destinationNamespaces=[b]
            )

            def try_create() -> tuple[int, str]:
                return syncs.try_create_as(tenant, a, body)

            # edit, as the charts aggregate it only with secrets.enabled: here no SecretSync right.
            status, text = try_create()
            assert status == 403, text
            assert "secretsyncs" in text
            _bind(rbac, a, f"{a}/tenant", role)
            status, text = wait_until(  # once the binding and the policy are in force
                try_create, lambda r: "you may not" in r[1], timeout=30, what="the policy's denial"
            )
            assert status == 403, text
            assert f"you may not get Secret {src}/guarded" in text
            # It may read the source now, but not write Secrets in b.
            _bind(rbac, src, f"{a}/tenant", "edit")
            status, text = wait_until(
                try_create, lambda r: "destination" in r[1], timeout=30, what="destination denial"
            )
            assert status == 403, text
            assert "may not create, update and delete Secrets in every destination" in text
            assert syncs.secret(b, "guarded") is None
    finally:
        tenant.close()
        rbac.delete_cluster_role(role)


def _echo_policy(name: str, namespace: str) -> list[dict[str, Any]]:
    """A policy refusing every Secret written in ``namespace`` with a message quoting its data,
    as a careless admission webhook would, and its binding."""
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": match_constraints("", ("secrets",), ("CREATE", "UPDATE")),
            "validations": [
                {
                    "expression": "false",
                    "messageExpression": "'refused, it holds ' + "
                    "object.data.map(k, k + '=' + string(object.data[k])).join(', ')",
                }
            ],
        },
    }
    return renamed([policy, policy_binding(name)], name, only_in(namespace))


def test_no_value_leaves_the_secret(
    api: client.ApiClient,
    pool: SecretPool,
    syncs: SecretSyncs,
    operator: OperatorHandle,
) -> None:
    """A planted value, plain and base64, appears in no operator log line (debug level), Event,
    status or metric, through copies, a conflict, a refused write whose refusal quotes the
    Secret, a missing key and a source change."""
    assert isinstance(operator, LocalOperator)
    src, a, b, c = (pool.name(s) for s in ("src", "a", "b", "c"))
    planted = [f"planted-{uuid.uuid4().hex}" for _ in range(2)]
    forms = [*planted, *(base64.b64encode(p.encode()).decode() for p in planted)]
    with in_force(api, _echo_policy(f"secsync-echo-{pool.run}", c)):
        # The policy echoes a Secret's value (retried until the API server has loaded it).
        def echo() -> str:
            try:
                syncs.put_secret(c, "probe", {"password": planted[0]}, allowed=None)
            except ApiException as exc:
                return exc.body or ""
            syncs.core.delete_namespaced_secret("probe", c)
            return ""

        echoed = wait_until(echo, bool, timeout=30, what="the echoing policy")
        assert forms[2] in echoed, echoed  # base64, as the API server hands data to CEL
        syncs.put_secret(src, "planted", {"password": planted[0], "user": "app"})
        syncs.put_secret(b, "planted", {"other": "x"}, "example.com/theirs", allowed=None)
        syncs.create(
            src,
            secret_sync_manifest(
                "planted",
                "planted",
                destinationNamespaces=[a, b, c],
                includeKeys=["password", "user", "absent"],
            ),
        )
        reported = syncs.wait(
            src,
            "planted",
            lambda o: (
                {t["namespace"]: t["reason"] for t in o["status"].get("failedTargets") or ()}
                == {b: "Conflict", c: "WriteFailed"}
            ),
            "b in conflict, c refused",
        )
        refusal = next(t for t in reported["status"]["failedTargets"] if t["namespace"] == c)
        assert "403" in refusal["message"] or "422" in refusal["message"], refusal
        syncs.put_secret(src, "planted", {"password": planted[1], "user": "app"})
        wait_until(
            lambda: syncs.secret(a, "planted"),
            lambda s: (
                s is not None and (s.data or {}).get("password") == encoded({"p": planted[1]})["p"]
            ),
            timeout=30,
            what="the changed value copied",
        )
        events = client.CoreV1Api(api).list_event_for_all_namespaces(
            field_selector="involvedObject.name=planted"
        )
        texts = {
            "log": operator.process.log_path.read_text(errors="replace"),
            "events": json.dumps(api.sanitize_for_serialization(events)),
            "status": json.dumps(syncs.get(src, "planted")),
            "metrics": operator.metrics(),
        }
        assert "planted" in texts["log"]
        assert "WriteFailed" in texts["events"], texts["events"]
        leaks = {where: [f for f in forms if f in text] for where, text in texts.items()}
        assert not any(leaks.values()), leaks


def test_the_operator_touched_secrets_only_in_its_namespaces_and_by_the_names_it_copies(
    cluster: Cluster, api: client.ApiClient, pool: SecretPool, operator: OperatorHandle
) -> None:
    """Least privilege with ``secrets.enabled``, from the audit log: every request on Secrets
    is a list or watch of a served namespace, or a request on a source or a copy; RBAC refused
    none. (e2e/test_secretsync_disabled.py: none at all without the flag.)"""
    if cluster.audit_log is None:
        pytest.skip(f"needs the local plane's audit log; the cluster is {cluster.kind}")
    if not cluster.operator_kubeconfigs:
        pytest.skip("the operators ran as admin (E2E_OPERATOR_IDENTITY=admin)")
    flush_audit_log(cluster, api)
    requests = secret_requests(cluster, pool)
    served = set(pool.all())
    assert {r.verb for r in requests} >= {
        "watch",  # the list: streamed as the watch's initial events
        "get",
        "create",
        "update",
        "patch",
        "delete",
    }
    strays = [
        r
        for r in requests
        if r.namespace not in served or (r.name and r.name not in NAMES) or r.code == 403
    ]
    assert not strays, strays
