"""ConfigMapSync behaviour on a real API server: copies, drift, namespaces, ownership, policy.

One operator process serves the run's namespaces for the whole module (see
configmapsync_support); each test uses its own ConfigMap names, and deletes its ConfigMapSyncs
(waiting for the finalizer) when it ends.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client
from kubernetes.client.rest import ApiException

from configmapsync_manifests import admission_policy
from configmapsync_operator.models import ConfigMapSyncSpec
from e2e.cluster import Cluster, condition, service_account_client, wait_until
from e2e.configmapsync_support import (
    ALLOWED,
    FINALIZER,
    GROUP,
    OWNER_ANNOTATION,
    OWNER_LABEL,
    PLURAL,
    SOURCE_ANNOTATION,
    VERSION,
    Pool,
    Syncs,
    describe,
    has_data,
    install_crd,
    metric_value,
    owned_by,
    sync_manifest,
    writes_by,
)
from e2e.operators import OperatorHandle
from e2e.resources import pool_fixture
from opsuite_common.kube_model import LabelSelector, LabelSelectorRequirement
from opsuite_testkit import DNS_SUBDOMAIN

pool = pool_fixture(Pool)


@pytest.fixture
def syncs(api: client.ApiClient, cluster: Cluster, operator: OperatorHandle) -> Iterator[Syncs]:
    # On a shared cluster another checkout's run may have applied its own (older) CRD, which
    # prunes newer fields even from stored objects: this tree's goes back before each test.
    install_crd(cluster)
    with Syncs(api, cluster) as access:
        yield access


def uid_of(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["uid"])


# --- copying ---------------------------------------------------------------------------------


@pytest.mark.smoke
def test_copies_data_and_the_allowlisted_labels_and_annotations_but_no_bookkeeping(
    cluster: Cluster, pool: Pool, syncs: Syncs, operator: OperatorHandle
) -> None:
    """Data and binaryData always; labels and annotations only those copyLabels and
    copyAnnotations name, so Helm's and Argo CD's ownership marks stay on the source (#16,
    item 5); the consent annotation, kubectl's and the operator's own never."""
    src, a, b = pool.name("src"), pool.name("a"), pool.name("b")
    source = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "basic",
            "labels": {
                "app": "basic",
                "tier": "config",
                "app.kubernetes.io/managed-by": "Helm",
                "app.kubernetes.io/instance": "platform",
            },
            "annotations": {
                "note": "hello",
                "meta.helm.sh/release-name": "platform",
                ALLOWED: f"{a},{b}",
            },
        },
        "data": {"settings.ini": "[main]\nkey = value\n", "empty": ""},
        "binaryData": {"blob.bin": "AAECAwQ="},
    }
    # kubectl apply leaves its last-applied annotation on the source: it is not copied.
    cluster.kubectl("apply", "-n", src, "-f", "-", stdin=json.dumps(source))
    before = syncs.configmap(src, "basic")
    assert before is not None
    created = syncs.create(
        src,
        sync_manifest(
            "basic",
            "basic",
            destinationNamespaces=[a, b],
            copyLabels=["app", "tier"],
            copyAnnotations=["note"],
        ),
    )
    uid = uid_of(created)
    cms = syncs.wait_ready(src, "basic", 2)

    for ns in (a, b):
        copy = syncs.configmap(ns, "basic")
        assert copy is not None
        assert copy.data == source["data"]
        assert copy.binary_data == source["binaryData"]
        assert copy.metadata.labels == {"app": "basic", "tier": "config", OWNER_LABEL: uid}
        assert copy.metadata.annotations == {
            "note": "hello",
            OWNER_ANNOTATION: f"{src}/basic/{uid}",
            SOURCE_ANNOTATION: f"{src}/basic",
            "sync.opsuite.dev/deletion-policy": "Delete",
        }
        assert not copy.metadata.owner_references
        assert not copy.immutable
    status = cms["status"]
    assert status["source"] == f"{src}/basic"
    assert (status["targetNamespaces"], status["syncedNamespaces"]) == (2, 2)
    assert (status["failedNamespaces"], status["failedTargets"]) == (0, [])
    assert status["lastSyncTime"]
    assert condition(cms, "Degraded")["status"] == "False"
    assert condition(cms, "Ready")["reason"] == "Synced"
    assert not cms["metadata"].get("finalizers")  # nothing to hang on once uninstalled

    table = cluster.kubectl("get", "cms", "basic", "-n", src).splitlines()
    assert table[0].split() == ["NAME", "SOURCE", "TARGETS", "SYNCED", "READY", "AGE"]
    assert table[1].split()[:5] == ["basic", f"{src}/basic", "2", "2", "True"]
    assert "configmapsync.sync.opsuite.dev/basic" in cluster.kubectl(
        "get", "opsuite", "-n", src, "-o", "name"
    )
    after = syncs.configmap(src, "basic")
    assert after is not None
    assert after.metadata.resource_version == before.metadata.resource_version
    text = operator.metrics()
    labels = {"namespace": src, "configmapsync": "basic"}
    assert metric_value(text, "opsuite_configmapsync_synced_targets", labels) == 2
    assert metric_value(text, "opsuite_configmapsync_failed_targets", labels) == 0
    success = {"controller": "configmapsync", "result": "success"}
    assert metric_value(text, "controller_runtime_reconcile_total", success) > 0


def test_source_changes_reach_every_copy_and_edited_or_deleted_copies_are_restored(
    cluster: Cluster, pool: Pool, syncs: Syncs, operator: OperatorHandle
) -> None:
    src = pool.name("src")
    targets = [pool.name(s) for s in ("a", "b", "c")]
    syncs.put_source(src, "drift", {"k": "v1"})
    syncs.create(
        src,
        sync_manifest("drift", "drift", destinationNamespaces=targets, copyLabels=["v", "extra"]),
    )
    syncs.wait_ready(src, "drift", 3)
    propagated = metric_value(operator.metrics(), "opsuite_configmapsync_propagation_seconds_count")

    started = time.time()
    syncs.core.patch_namespaced_config_map(
        "drift", src, {"data": {"k": "v2", "new": "x"}, "metadata": {"labels": {"v": "2"}}}
    )
    copies = syncs.wait_copies(targets, "drift", has_data({"k": "v2", "new": "x"}), "v2", 30)
    assert all(c is not None and c.metadata.labels.get("v") == "2" for c in copies.values())
    seconds = time.time() - started
    # The operator observes a propagation once its write returns, which may be just after the
    # test sees the copy.
    wait_until(
        lambda: (
            metric_value(operator.metrics(), "opsuite_configmapsync_propagation_seconds_count")
            - propagated
        ),
        lambda observed: observed == 3,
        timeout=10,
        what="one propagation observed per copy written",
    )
    source_version = syncs.configmap(src, "drift").metadata.resource_version

    a, b, c = targets
    syncs.core.patch_namespaced_config_map("drift", a, {"data": {"k": "edited"}})
    syncs.core.patch_namespaced_config_map(
        "drift", c, {"metadata": {"labels": {"extra": "label"}, "annotations": {"x": "y"}}}
    )
    old_uid = syncs.configmap(b, "drift").metadata.uid
    syncs.core.delete_namespaced_config_map("drift", b)

    def restored(cm: client.V1ConfigMap | None) -> bool:
        return has_data({"k": "v2", "new": "x"})(cm) and "extra" not in (cm.metadata.labels or {})

    copies = syncs.wait_copies(targets, "drift", restored, "restored", 30)
    assert copies[b].metadata.uid != old_uid
    # "extra" is a label the sync copies (copyLabels), so the operator owns it on the copies;
    # the annotation "x" is someone else's: left alone.
    assert copies[c].metadata.annotations["x"] == "y"
    # No polling: the 3 copies followed the source through the watches.
    assert seconds < 15
    assert syncs.configmap(src, "drift").metadata.resource_version == source_version
    if cluster.audit_log is not None:
        time.sleep(2)
        writes = writes_by(cluster.audit_log, pool.identity, started - 1, time.time())
        on_source = [e for e in writes if f"/namespaces/{src}/configmaps/drift" in e["requestURI"]]
        assert not on_source, describe(on_source)
        namespaces = [e for e in writes if e["objectRef"].get("resource") == "namespaces"]
        assert not namespaces, describe(namespaces)


def test_namespace_selector_follows_namespaces_and_skips_the_source_namespace(
    api: client.ApiClient, pool: Pool, syncs: Syncs
) -> None:
    core = client.CoreV1Api(api)
    src, sel1, sel2, sel3 = (pool.name(s) for s in ("src", "sel-1", "sel-2", "sel-3"))
    selected = {pool.label: "selected"}
    for ns in (src, sel1):
        core.patch_namespace(ns, {"metadata": {"labels": selected}})
    syncs.put_source(src, "selected", {"k": "v"})
    cms = syncs.create(
        src, sync_manifest("selected", "selected", namespaceSelector={"matchLabels": selected})
    )
    uid = uid_of(cms)
    status = syncs.wait_ready(src, "selected", 1)["status"]
    assert status["targetNamespaces"] == 1
    assert owned_by(uid)(syncs.configmap(sel1, "selected"))
    assert syncs.configmap(sel2, "selected") is None
    source = syncs.configmap(src, "selected")
    assert OWNER_LABEL not in (source.metadata.labels or {})

    # A namespace created later with a matching label gets its copy.
    core.create_namespace(pool.namespace("sel-3", selected))
    syncs.wait_copies([sel3], "selected", owned_by(uid), "copy in the new namespace", 30)
    # A namespace that stops matching loses the copy; one that starts matching gets one.
    core.patch_namespace(sel1, {"metadata": {"labels": {pool.label: None}}})
    core.patch_namespace(sel2, {"metadata": {"labels": selected}})
    syncs.wait_copies([sel1], "selected", lambda c: c is None, "copy removed", 30)
    syncs.wait_copies([sel2, sel3], "selected", owned_by(uid), "copies", 30)
    status = syncs.wait_ready(src, "selected", 2)["status"]
    assert status["targetNamespaces"] == 2
    core.patch_namespace(src, {"metadata": {"labels": {pool.label: None}}})


def test_missing_namespace_is_reported_then_filled_when_it_appears(
    api: client.ApiClient, pool: Pool, syncs: Syncs
) -> None:
    src, a, late = pool.name("src"), pool.name("a"), pool.name("late")
    syncs.put_source(src, "later", {"k": "v"})
    syncs.create(src, sync_manifest("later", "later", destinationNamespaces=[a, late]))
    cms = syncs.wait(
        src,
        "later",
        lambda o: condition(o, "Ready").get("reason") == "NamespaceMissing",
        "NamespaceMissing",
    )
    status = cms["status"]
    assert (status["syncedNamespaces"], status["targetNamespaces"]) == (1, 2)
    assert [(t["namespace"], t["reason"]) for t in status["failedTargets"]] == [
        (late, "NamespaceMissing")
    ]
    assert late in condition(cms, "Ready")["message"]
    client.CoreV1Api(api).create_namespace(pool.namespace("late"))
    syncs.wait_copies([late], "later", has_data({"k": "v"}), "copy in the late namespace", 30)
    assert syncs.wait_ready(src, "later", 2)["status"]["failedTargets"] == []


def test_source_deleted_keeps_copies_and_syncing_resumes_when_it_returns(
    pool: Pool, syncs: Syncs
) -> None:
    src, a, b = pool.name("src"), pool.name("a"), pool.name("b")
    syncs.put_source(src, "phoenix", {"k": "v1"})
    syncs.create(src, sync_manifest("phoenix", "phoenix", destinationNamespaces=[a, b]))
    syncs.wait_ready(src, "phoenix", 2)
    syncs.core.delete_namespaced_config_map("phoenix", src)
    cms = syncs.wait(
        src,
        "phoenix",
        lambda o: condition(o, "Ready").get("reason") == "SourceNotFound",
        "SourceNotFound",
    )
    assert condition(cms, "Degraded")["reason"] == "SourceNotFound"
    time.sleep(2)
    syncs.wait_copies([a, b], "phoenix", has_data({"k": "v1"}), "copies kept", 5)
    syncs.put_source(src, "phoenix", {"k": "v2"})
    syncs.wait_copies([a, b], "phoenix", has_data({"k": "v2"}), "copies of the new source", 30)
    syncs.wait_ready(src, "phoenix", 2)


def test_source_namespace_listed_as_destination_is_reported_and_left_alone(
    pool: Pool, syncs: Syncs
) -> None:
    src, a = pool.name("src"), pool.name("a")
    syncs.put_source(src, "itself", {"k": "v"})
    before = syncs.configmap(src, "itself").metadata.resource_version
    # The CRD rejects an explicit sourceNamespace among the destinations; the default (the
    # sync's own namespace) is caught by the operator (and by the admission policy).
    syncs.create(src, sync_manifest("itself", "itself", destinationNamespaces=[src, a]))
    cms = syncs.wait(
        src,
        "itself",
        lambda o: bool(o["status"].get("failedTargets")) and o["status"]["syncedNamespaces"] == 1,
        "the source namespace reported",
    )
    assert [(t["namespace"], t["reason"]) for t in cms["status"]["failedTargets"]] == [
        (src, "SourceNamespace")
    ]
    assert syncs.configmap(src, "itself").metadata.resource_version == before


# --- ownership ----------------------------------------------------------------------------


def test_unmanaged_destination_is_skipped_as_conflict_then_taken_over_with_overwrite(
    pool: Pool, syncs: Syncs
) -> None:
    src, a, b = pool.name("src"), pool.name("a"), pool.name("b")
    syncs.put_source(src, "theirs", {"k": "from-source"})
    theirs = syncs.put_configmap(a, "theirs", {"owner": "team-a"}, labels={"team": "a"})
    cms = syncs.create(src, sync_manifest("theirs", "theirs", destinationNamespaces=[a, b]))
    cms = syncs.wait(
        src, "theirs", lambda o: condition(o, "Ready").get("reason") == "Conflict", "Conflict"
    )
    assert condition(cms, "Degraded")["reason"] == "Conflict"
    assert cms["status"]["syncedNamespaces"] == 1
    ((target,),) = [[(t["namespace"], t["reason"]) for t in cms["status"]["failedTargets"]]]
    assert target == (a, "Conflict")
    time.sleep(2)
    events = syncs.core.list_namespaced_event(
        src, field_selector="involvedObject.kind=ConfigMapSync,involvedObject.name=theirs"
    ).items
    warnings = [e for e in events if e.type == "Warning"]
    assert [e.reason for e in warnings] == ["Conflict"], events
    assert a in warnings[0].message
    untouched = syncs.configmap(a, "theirs")
    assert untouched.metadata.resource_version == theirs.metadata.resource_version

    syncs.patch(src, "theirs", {"spec": {"conflictPolicy": "Overwrite"}})
    syncs.wait_copies([a], "theirs", owned_by(uid_of(cms)), "taken over", 30)
    taken = syncs.configmap(a, "theirs")
    assert taken.data == {"k": "from-source"}
    assert taken.metadata.uid == theirs.metadata.uid
    syncs.wait_ready(src, "theirs", 2)
    events = syncs.core.list_namespaced_event(
        src, field_selector="involvedObject.kind=ConfigMapSync,involvedObject.name=theirs"
    ).items
    assert ("Normal", "Synced") in {(e.type, e.reason) for e in events}


def test_the_source_consents_where_its_copies_go_even_without_admission_policy(
    api: client.ApiClient, pool: Pool, syncs: Syncs
) -> None:
    """#17, item 1, with no admission policy in force: a namespace editor asks for copies of a
    ConfigMap into their namespace, and with Overwrite over an unmanaged ConfigMap; only the
    namespaces the source's annotation allows get anything written, the others are reported."""
    src, a, b, c = (pool.name(s) for s in ("src", "a", "b", "c"))
    rbac = client.RbacAuthorizationV1Api(api)
    syncs.put_source(src, "consent", {"k": "v"}, allowed=f"{a}, cms-{pool.run}-sel-*")
    secret = syncs.put_configmap(src, "no-consent", {"password": "hunter2"})
    theirs = syncs.put_configmap(b, "consent", {"owner": "team-b"})
    role = f"cms-e2e-{pool.run}-cms-editor"
    rbac.create_cluster_role(
        {
            "metadata": {"name": role},
            "rules": [
                {
                    "apiGroups": ["sync.opsuite.dev"],
                    "resources": ["configmapsyncs"],
                    "verbs": ["create", "get", "delete"],
                }
            ],
        }
    )
    try:
        editor = _token_client(api, b, "editor")
        _bind(rbac, b, "editor", b, role)
        as_editor = client.CustomObjectsApi(editor)

        def create_as_editor(body: dict[str, Any]) -> None:
            as_editor.create_namespaced_custom_object(GROUP, VERSION, b, PLURAL, body)
            syncs.created.append((b, body["metadata"]["name"]))

        body = sync_manifest("steal", "no-consent", sourceNamespace=src, destinationNamespaces=[b])
        wait_until(
            lambda: _created(lambda: create_as_editor(body)), bool, timeout=30, what="create"
        )
        overwrite = sync_manifest(
            "overwrite",
            "consent",
            sourceNamespace=src,
            destinationNamespaces=[a, b, c],
            conflictPolicy="Overwrite",
        )
        create_as_editor(overwrite)
        stolen = syncs.wait(
            b,
            "steal",
            lambda o: condition(o, "Degraded").get("reason") == "NotAllowedBySource",
            "NotAllowedBySource",
        )
        assert condition(stolen, "Ready")["status"] == "False"
        assert (
            f"ConfigMap {src}/no-consent does not allow copies"
            in stolen["status"]["failedTargets"][0]["message"]
        )
        cms = syncs.wait(
            b,
            "overwrite",
            lambda o: (
                o["status"].get("syncedNamespaces") == 1
                and condition(o, "Degraded").get("reason") == "NotAllowedBySource"
            ),
            "one copy, two destinations refused",
        )
        refused = {t["namespace"]: t for t in cms["status"]["failedTargets"]}
        assert set(refused) == {b, c}
        assert all(t["reason"] == "NotAllowedBySource" for t in refused.values())
        assert f"does not allow copies in namespace {c}" in refused[c]["message"]
        assert b in condition(cms, "Degraded")["message"]
        time.sleep(2)
        assert syncs.configmap(b, "no-consent") is None
        assert syncs.configmap(c, "consent") is None
        assert syncs.configmap(b, "consent").metadata.resource_version == (
            theirs.metadata.resource_version
        )
        assert syncs.configmap(src, "no-consent").metadata.resource_version == (
            secret.metadata.resource_version
        )
        uid = uid_of(cms)
        assert owned_by(uid)(syncs.configmap(a, "consent"))

        # Consent widened: the copies follow (and Overwrite now applies in b).
        syncs.core.patch_namespaced_config_map(
            "consent", src, {"metadata": {"annotations": {ALLOWED: "*"}}}
        )
        syncs.wait_copies([a, b, c], "consent", owned_by(uid), "copies everywhere", 30)
        syncs.wait_ready(b, "overwrite", 3)
        # Narrowed: the copy in a namespace no longer allowed goes.
        syncs.core.patch_namespaced_config_map(
            "consent", src, {"metadata": {"annotations": {ALLOWED: f"{a},{b}"}}}
        )
        syncs.wait_copies([c], "consent", lambda cm: cm is None, "copy withdrawn", 30)
        # Removed altogether (a source from before the upgrade): the copies stay as they are.
        syncs.core.patch_namespaced_config_map(
            "consent", src, {"metadata": {"annotations": {ALLOWED: None}}, "data": {"k": "v2"}}
        )
        cms = syncs.wait(
            b,
            "overwrite",
            lambda o: o["status"].get("failedNamespaces") == 3,
            "all three refused",
        )
        assert "has no sync.opsuite.dev/allowed-namespaces annotation" in (
            condition(cms, "Degraded")["message"] + cms["status"]["failedTargets"][0]["message"]
        )
        time.sleep(2)
        for ns in (a, b):
            kept = syncs.configmap(ns, "consent")
            assert owned_by(uid)(kept)
            assert kept.data == {"k": "v"}
        editor.close()
    finally:
        rbac.delete_cluster_role(role)


def _created(create: Any) -> bool:
    """Run ``create``; False while the new RoleBinding is not yet in force (403)."""
    try:
        create()
    except ApiException as exc:
        if exc.status == 403:
            return False
        raise
    return True


@pytest.mark.local_operators("stops the operator to create a copy of a gone owner meanwhile")
def test_a_copy_whose_owner_is_gone_is_taken_over(
    pool: Pool, syncs: Syncs, operator: OperatorHandle
) -> None:
    """#16 minor: a copy left by a ConfigMapSync deleted while the operator was away carries
    an owner uid that no ConfigMapSync has; a ConfigMapSync that wants the place (created
    meanwhile) takes it over instead of reporting a Conflict forever."""
    src, a = pool.name("src"), pool.name("a")
    gone = "00000000-0000-4000-8000-000000000000"
    syncs.put_source(src, "stale", {"k": "v"})
    operator.stop()
    try:
        stale = syncs.put_configmap(
            a,
            "stale",
            {"k": "old"},
            labels={OWNER_LABEL: gone},
            annotations={
                OWNER_ANNOTATION: f"{src}/departed/{gone}",
                SOURCE_ANNOTATION: f"{src}/stale",
                "sync.opsuite.dev/deletion-policy": "Orphan",
            },
        )
        cms = syncs.create(src, sync_manifest("stale", "stale", destinationNamespaces=[a]))
    finally:
        operator.restart()
    syncs.wait_ready(src, "stale", 1)
    copy = syncs.configmap(a, "stale")
    assert owned_by(uid_of(cms))(copy)
    assert copy.data == {"k": "v"}
    assert copy.metadata.uid == stale.metadata.uid
    assert copy.metadata.annotations[OWNER_ANNOTATION] == f"{src}/stale/{uid_of(cms)}"


INJECTED = "policy.opsuite.dev/injected"
WRITES = ("POST", "PUT", "PATCH", "DELETE")


def _operator_writes(operator: OperatorHandle) -> float:
    text = operator.metrics()
    return sum(metric_value(text, "rest_client_requests_total", {"method": m}) for m in WRITES)


def test_a_mutating_admission_policy_labelling_copies_causes_no_write_loop(
    api: client.ApiClient, pool: Pool, syncs: Syncs, operator: OperatorHandle
) -> None:
    """#16, item 3: a real MutatingAdmissionPolicy adds a label to every copy on each write
    (as Kyverno or Gatekeeper do). The operator owns only its keys: it leaves the label alone,
    and writes nothing at all over a quiet window (its own request counter)."""
    src, a, b = pool.name("src"), pool.name("a"), pool.name("b")
    name = f"cms-e2e-{pool.run}-inject"
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["configmaps"],
                    }
                ]
            },
            "matchConditions": [
                {
                    "name": "copies-only",
                    "expression": "has(object.metadata.labels) && "
                    f"'{OWNER_LABEL}' in object.metadata.labels",
                }
            ],
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
            "mutations": [
                {
                    "patchType": "ApplyConfiguration",
                    "applyConfiguration": {
                        "expression": "Object{metadata: Object.metadata{labels: "
                        f'{{"{INJECTED}": "yes"}}}}}}'
                    },
                }
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "matchResources": {
                "namespaceSelector": {
                    "matchExpressions": [
                        {
                            "key": "kubernetes.io/metadata.name",
                            "operator": "In",
                            "values": [a, b],
                        }
                    ]
                }
            },
        },
    }
    custom = client.CustomObjectsApi(api)
    adm = ("admissionregistration.k8s.io", "v1")
    custom.create_cluster_custom_object(*adm, "mutatingadmissionpolicies", policy)
    custom.create_cluster_custom_object(*adm, "mutatingadmissionpolicybindings", binding)
    try:
        # The policy is in force once a labelled ConfigMap comes back with the label.
        def probe() -> bool:
            cm = syncs.put_configmap(a, "probe", {"k": "v"}, labels={OWNER_LABEL: "probe"})
            return (cm.metadata.labels or {}).get(INJECTED) == "yes"

        wait_until(probe, bool, timeout=30, what="the MutatingAdmissionPolicy in force")
        syncs.core.delete_namespaced_config_map("probe", a)

        syncs.put_source(src, "cowritten", {"k": "v1"}, labels={"team": "x"})
        syncs.create(
            src,
            sync_manifest(
                "cowritten", "cowritten", destinationNamespaces=[a, b], copyLabels=["team"]
            ),
        )
        syncs.wait_ready(src, "cowritten", 2)
        copies = syncs.wait_copies(
            [a, b],
            "cowritten",
            lambda cm: cm is not None and (cm.metadata.labels or {}).get(INJECTED) == "yes",
            "labelled by the policy",
            30,
        )
        time.sleep(2)  # let the passes the copies' own events trigger run
        versions = {ns: cm.metadata.resource_version for ns, cm in copies.items()}
        before = _operator_writes(operator)
        time.sleep(QUIET_WINDOW)
        writes = _operator_writes(operator) - before
        after = {ns: syncs.configmap(ns, "cowritten").metadata.resource_version for ns in versions}
        assert writes == 0, f"{writes} writes in {QUIET_WINDOW} s with a co-writer"
        assert after == versions

        # A source change still reaches the copies, in one write each, and keeps the label.
        before = _operator_writes(operator)
        syncs.put_source(src, "cowritten", {"k": "v2"}, labels={"team": "y"})
        copies = syncs.wait_copies([a, b], "cowritten", has_data({"k": "v2"}), "v2", 30)
        for cm in copies.values():
            assert cm.metadata.labels[INJECTED] == "yes"
            assert cm.metadata.labels["team"] == "y"
        time.sleep(QUIET_WINDOW)
        writes = _operator_writes(operator) - before
        # 2 copies, the status and the Synced Event (the code before the fix made 7: each copy
        # was written again to remove the policy's label, which the policy put back).
        assert writes <= 4, f"{writes} writes for one source change"
    finally:
        custom.delete_cluster_custom_object(*adm, "mutatingadmissionpolicybindings", name)
        custom.delete_cluster_custom_object(*adm, "mutatingadmissionpolicies", name)


QUIET_WINDOW = 10


def test_two_syncs_on_one_destination_the_first_owner_keeps_it(pool: Pool, syncs: Syncs) -> None:
    src, a, c = pool.name("src"), pool.name("a"), pool.name("c")
    syncs.put_source(src, "contested", {"from": "src"})
    syncs.put_source(c, "contested", {"from": "c"})
    first = syncs.create(src, sync_manifest("first", "contested", destinationNamespaces=[a]))
    syncs.wait_ready(src, "first", 1)
    second = syncs.create(
        c,
        sync_manifest("second", "contested", destinationNamespaces=[a], conflictPolicy="Overwrite"),
    )
    cms = syncs.wait(
        c, "second", lambda o: condition(o, "Ready").get("reason") == "Conflict", "Conflict"
    )
    assert f"{src}/first" in cms["status"]["failedTargets"][0]["message"]
    copy = syncs.configmap(a, "contested")
    assert owned_by(uid_of(first))(copy)
    assert copy.data == {"from": "src"}
    time.sleep(5)  # no flip-flop: the copy does not change hands or content
    assert syncs.configmap(a, "contested").metadata.resource_version == (
        copy.metadata.resource_version
    )
    assert condition(syncs.get(src, "first"), "Ready")["status"] == "True"
    # Once the first owner is gone (and its copy with it), the second one fills the place.
    syncs.delete(src, "first", wait=True)
    syncs.wait_copies([a], "contested", owned_by(uid_of(second)), "second owner", 30)
    assert syncs.configmap(a, "contested").data == {"from": "c"}
    syncs.wait_ready(c, "second", 1)


def test_immutable_source_is_copied_immutable_and_replaced_copies_are_recreated(
    pool: Pool, syncs: Syncs
) -> None:
    src, a = pool.name("src"), pool.name("a")
    syncs.put_source(src, "frozen", {"v": "1"}, immutable=True)
    syncs.create(src, sync_manifest("frozen", "frozen", destinationNamespaces=[a]))
    syncs.wait_ready(src, "frozen", 1)
    first = syncs.configmap(a, "frozen")
    assert first.immutable is True
    syncs.core.delete_namespaced_config_map("frozen", src)
    syncs.put_source(src, "frozen", {"v": "2"}, immutable=True)
    copies = syncs.wait_copies([a], "frozen", has_data({"v": "2"}), "replaced copy", 30)
    assert copies[a].immutable is True
    assert copies[a].metadata.uid != first.metadata.uid
    syncs.wait_ready(src, "frozen", 1)


def test_deleting_a_sync_removes_exactly_its_copies(
    cluster: Cluster, pool: Pool, syncs: Syncs
) -> None:
    """Only the copies it wrote go: not a ConfigMap it never took over, not a neighbour, and
    not a copy someone saved under another name (`kubectl get -o yaml`, renamed, applied),
    which still carries the ownership label and annotations."""
    src, a, b, c = (pool.name(s) for s in ("src", "a", "b", "c"))
    syncs.put_source(src, "doomed", {"k": "v"})
    syncs.put_configmap(c, "doomed", {"k": "not a copy"})
    syncs.put_configmap(b, "doomed-neighbour", {"k": "unrelated"})
    syncs.create(src, sync_manifest("doomed", "doomed", destinationNamespaces=[a, b, c]))
    syncs.wait(src, "doomed", lambda o: o["status"].get("syncedNamespaces") == 2, "2 synced")
    saved = json.loads(cluster.kubectl("get", "configmap", "doomed", "-n", a, "-o", "json"))
    for field in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
        saved["metadata"].pop(field, None)
    saved["metadata"]["name"] = "doomed-saved"
    cluster.kubectl("create", "-n", a, "-f", "-", stdin=json.dumps(saved))
    time.sleep(3)  # passes triggered by the new ConfigMap run in well under a second
    assert syncs.configmap(a, "doomed-saved") is not None
    syncs.delete(src, "doomed", wait=True)
    # No finalizer: the copies go right after the ConfigMapSync (as dependents after their
    # owner in Kubernetes' garbage collection).
    syncs.wait_copies([a, b], "doomed", lambda cm: cm is None, "copies deleted", 30)
    time.sleep(2)
    assert syncs.configmap(a, "doomed-saved") is not None
    assert syncs.configmap(c, "doomed").data == {"k": "not a copy"}
    assert syncs.configmap(b, "doomed-neighbour") is not None
    assert syncs.configmap(src, "doomed") is not None


@pytest.mark.local_operators("stops the operator, as an uninstall does, and starts it again")
def test_with_the_operator_gone_a_namespace_of_syncs_is_deleted_and_copies_follow_later(
    api: client.ApiClient, pool: Pool, syncs: Syncs, operator: OperatorHandle
) -> None:
    """#16 minor: ConfigMapSyncs carry no finalizer, so with the operator uninstalled (stopped
    here; `helm uninstall` keeps the CRD and the ConfigMapSyncs) deleting a namespace holding
    ConfigMapSyncs completes instead of hanging in Terminating. Back, the operator finds the
    copies of the ConfigMapSyncs that went by their owner mark and ends them as their
    deletionPolicy said: Delete removes, Orphan releases. The finalizer earlier versions put
    on ConfigMapSyncs is removed."""
    core = client.CoreV1Api(api)
    gone, a, b = pool.name("gone"), pool.name("a"), pool.name("b")
    core.create_namespace(pool.namespace("gone"))
    syncs.put_source(gone, "leaving", {"k": "v"})
    syncs.put_source(gone, "staying", {"k": "kept"})
    legacy = sync_manifest("leaving", "leaving", destinationNamespaces=[a, b])
    legacy["metadata"]["finalizers"] = [FINALIZER]  # as an earlier version left it
    syncs.create(gone, legacy)
    syncs.create(
        gone,
        sync_manifest("staying", "staying", destinationNamespaces=[a], deletionPolicy="Orphan"),
    )
    syncs.wait_ready(gone, "leaving", 2)
    syncs.wait_ready(gone, "staying", 1)
    leaving = syncs.wait(
        gone, "leaving", lambda o: not o["metadata"].get("finalizers"), "unfinalized"
    )
    assert owned_by(uid_of(leaving))(syncs.configmap(a, "leaving"))

    operator.stop()
    try:
        core.delete_namespace(gone)
        wait_until(
            lambda: [n.metadata.name for n in core.list_namespace().items],
            lambda names: gone not in names,
            timeout=60,
            what=f"namespace {gone} deleted with the operator gone",
        )
        assert owned_by(uid_of(leaving))(syncs.configmap(a, "leaving"))  # nobody cleaned up
    finally:
        operator.restart()
    syncs.wait_copies([a, b], "leaving", lambda cm: cm is None, "copies deleted", 30)
    kept = syncs.wait_copies(
        [a], "staying", lambda cm: cm is not None and not cm.metadata.labels, "released", 30
    )[a]
    assert kept.data == {"k": "kept"}
    assert not kept.metadata.annotations


@pytest.mark.local_operators("stops the operator while a ConfigMapSync is re-created")
def test_a_sync_re_created_while_the_operator_was_away_takes_over_or_ends_the_old_copies(
    pool: Pool, syncs: Syncs, operator: OperatorHandle
) -> None:
    """The old incarnation's copies carry the same owner key but a uid that is gone: the new
    one takes over the copy it wants and the one it no longer wants is deleted (its policy)."""
    src, a, b = pool.name("src"), pool.name("a"), pool.name("b")
    syncs.put_source(src, "reborn", {"k": "v1"})
    old = syncs.create(src, sync_manifest("reborn", "reborn", destinationNamespaces=[a, b]))
    syncs.wait_ready(src, "reborn", 2)
    kept_uid = syncs.configmap(a, "reborn").metadata.uid
    operator.stop()
    try:
        syncs.delete(src, "reborn", wait=True)
        syncs.put_source(src, "reborn", {"k": "v2"})
        new = syncs.create(src, sync_manifest("reborn", "reborn", destinationNamespaces=[a]))
    finally:
        operator.restart()
    assert uid_of(new) != uid_of(old)
    syncs.wait_copies([b], "reborn", lambda cm: cm is None, "old copy deleted", 30)
    copy = syncs.wait_copies([a], "reborn", owned_by(uid_of(new)), "taken over", 30)[a]
    syncs.wait_ready(src, "reborn", 1)
    copy = syncs.configmap(a, "reborn")
    assert copy.metadata.uid == kept_uid
    assert copy.data == {"k": "v2"}


def test_orphan_policy_leaves_unmarked_copies(pool: Pool, syncs: Syncs) -> None:
    src, a = pool.name("src"), pool.name("a")
    syncs.put_source(src, "orphaned", {"k": "v"}, labels={"app": "x"})
    syncs.create(
        src,
        sync_manifest(
            "orphaned",
            "orphaned",
            destinationNamespaces=[a],
            deletionPolicy="Orphan",
            copyLabels=["app"],
        ),
    )
    syncs.wait_ready(src, "orphaned", 1)
    syncs.delete(src, "orphaned", wait=True)
    kept = syncs.wait_copies(
        [a],
        "orphaned",
        lambda cm: cm is not None and OWNER_LABEL not in cm.metadata.labels,
        "released",
        30,
    )[a]
    assert kept is not None
    assert kept.data == {"k": "v"}
    assert kept.metadata.labels == {"app": "x"}
    assert not kept.metadata.annotations


def test_configmap_near_the_size_limit_syncs(pool: Pool, syncs: Syncs) -> None:
    src, a, big = pool.name("src"), pool.name("a"), pool.name("big")
    size = 1024 * 1024 - 4096  # the API server's limit is 1 MiB of data
    syncs.put_source(src, "large", {"blob": "x" * size})
    syncs.create(src, sync_manifest("large", "large", destinationNamespaces=[a, big]))
    syncs.wait_ready(src, "large", 2, timeout=90)
    syncs.put_source(src, "large", {"blob": "y" * size})
    syncs.wait_copies(
        [a, big],
        "large",
        lambda cm: cm is not None and (cm.data or {}).get("blob", "")[:1] == "y",
        "large copies updated",
        60,
    )


# --- validation and admission -------------------------------------------------------------

INVALID_SPECS = [
    ("no destinations", {}, "set destinationNamespaces, namespaceSelector or both"),
    ("empty destination list", {"destinationNamespaces": []}, "set destinationNamespaces"),
    (
        "source namespace among destinations",
        {"sourceNamespace": "here", "destinationNamespaces": ["here", "there"]},
        "the source namespace cannot be a destination",
    ),
    (
        "unknown conflict policy",
        {"destinationNamespaces": ["a"], "conflictPolicy": "Merge"},
        "Unsupported value",
    ),
    (
        "invalid namespace name",
        {"destinationNamespaces": ["Not_A_Namespace"]},
        "spec.destinationNamespaces[0]",
    ),
    ("duplicate destinations", {"destinationNamespaces": ["a", "a"]}, "Duplicate value"),
]


@pytest.mark.parametrize(
    ("case", "spec", "message"), INVALID_SPECS, ids=[c[0] for c in INVALID_SPECS]
)
def test_invalid_specs_are_rejected_by_the_api_server(
    api: client.ApiClient, pool: Pool, case: str, spec: dict[str, Any], message: str
) -> None:
    body = sync_manifest("invalid", "cfg", **spec)
    with pytest.raises(ApiException) as rejected:
        Syncs(api).create(pool.name("src"), body)
    assert rejected.value.status == 422, case
    assert message in (rejected.value.body or ""), rejected.value.body


_dns = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
_patterns = st.from_regex(r"[a-z0-9*]([-a-z0-9*]{0,8}[a-z0-9*])?", fullmatch=True)
_key_lists = st.lists(
    st.from_regex(r"[-._a-zA-Z0-9*]{1,12}", fullmatch=True), min_size=1, max_size=3, unique=True
)
_label_values = st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9_.-]{0,6}[A-Za-z0-9])?", fullmatch=True)


@st.composite
def sync_specs(draw: st.DrawFn) -> ConfigMapSyncSpec:
    """Valid ConfigMapSync specs, CEL rules included."""
    source_namespace = draw(st.none() | _dns)
    listed = draw(st.lists(_dns.filter(lambda n: n != source_namespace), max_size=5, unique=True))
    selector = draw(
        st.none()
        | st.builds(
            LabelSelector,
            match_labels=st.none() | st.dictionaries(_dns, _label_values, max_size=3),
            match_expressions=st.none()
            | st.lists(
                st.builds(
                    LabelSelectorRequirement,
                    key=_dns,
                    operator=st.just("Exists") | st.just("DoesNotExist"),
                ),
                max_size=2,
            ),
        )
    )
    if not listed and selector is None:
        listed = [draw(_dns.filter(lambda n: n != source_namespace))]
    which = draw(st.sampled_from([None, "include_keys", "exclude_keys"]))
    keys = {which: draw(_key_lists)} if which else {}
    return ConfigMapSyncSpec(
        source_namespace=source_namespace,
        config_map_name=draw(
            st.from_regex(DNS_SUBDOMAIN, fullmatch=True).filter(lambda n: len(n) <= 40)
        ),
        destination_namespaces=listed or None,
        namespace_selector=selector,
        conflict_policy=draw(st.sampled_from(["Skip", "Overwrite"])),
        deletion_policy=draw(st.sampled_from(["Delete", "Orphan"])),
        exclude_namespaces=draw(
            st.none()
            | st.lists(
                _patterns.filter(lambda p: p not in listed), min_size=1, max_size=3, unique=True
            )
        ),
        **keys,
    )


def test_valid_specs_are_accepted_unchanged(api: client.ApiClient, pool: Pool) -> None:
    """Model and CRD agree: every valid spec is stored as sent (server-side dry run)."""
    custom = client.CustomObjectsApi(api)

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(sync_specs())
    def check(spec: ConfigMapSyncSpec) -> None:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ConfigMapSync",
            "metadata": {"name": "roundtrip"},
            "spec": spec.to_kube(),
        }
        stored = custom.create_namespaced_custom_object(
            GROUP, VERSION, pool.name("src"), PLURAL, body, dry_run="All"
        )
        assert stored["spec"] == spec.to_kube()
        assert ConfigMapSyncSpec.model_validate(stored["spec"], strict=True) == spec

    check()


def _token_client(api: client.ApiClient, namespace: str, sa: str) -> client.ApiClient:
    """A new ServiceAccount, and an API client authenticating as it."""
    client.CoreV1Api(api).create_namespaced_service_account(namespace, {"metadata": {"name": sa}})
    return service_account_client(api, namespace, sa)


def _bind(
    rbac: client.RbacAuthorizationV1Api, namespace: str | None, name: str, sa_ns: str, role: str
) -> None:
    subject = {"kind": "ServiceAccount", "name": name, "namespace": sa_ns}
    ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}
    body = {"metadata": {"name": f"{name}-{role}"}, "roleRef": ref, "subjects": [subject]}
    if namespace is None:
        rbac.create_cluster_role_binding(body)
    else:
        rbac.create_namespaced_role_binding(namespace, body)


def test_admission_policy_requires_the_rights_a_copy_by_hand_would_need(
    api: client.ApiClient, pool: Pool, syncs: Syncs
) -> None:
    """The shipped ValidatingAdmissionPolicy, bound to this run's namespaces only."""
    src, a, b = pool.name("src"), pool.name("a"), pool.name("b")
    rbac = client.RbacAuthorizationV1Api(api)
    adm = client.AdmissionregistrationV1Api(api)
    syncs.put_source(src, "guarded", {"secret-ish": "v"})
    policy, binding = admission_policy()
    name = f"cms-e2e-{pool.run}"
    policy["metadata"]["name"] = binding["metadata"]["name"] = binding["spec"]["policyName"] = name
    binding["spec"]["matchResources"] = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": a}}
    }
    roles = {
        f"{name}-cms-creator": [
            {"apiGroups": ["sync.opsuite.dev"], "resources": ["configmapsyncs"], "verbs": ["*"]}
        ],
        f"{name}-cm-reader": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
        f"{name}-cm-writer": [
            {
                "apiGroups": [""],
                "resources": ["configmaps"],
                "verbs": ["get", "create", "update", "delete"],
            }
        ],
    }
    for role, rules in roles.items():
        rbac.create_cluster_role({"metadata": {"name": role}, "rules": rules})
    adm.create_validating_admission_policy(policy)
    adm.create_validating_admission_policy_binding(binding)
    try:
        # limited: may create ConfigMapSyncs in a, may not read the source namespace.
        limited = _token_client(api, a, "limited")
        _bind(rbac, a, "limited", a, f"{name}-cms-creator")
        # privileged: ConfigMaps everywhere.
        privileged = _token_client(api, a, "privileged")
        _bind(rbac, a, "privileged", a, f"{name}-cms-creator")
        _bind(rbac, None, "privileged", a, f"{name}-cm-writer")
        body = sync_manifest("guarded", "guarded", sourceNamespace=src, destinationNamespaces=[b])

        def try_create() -> tuple[int, str]:
            return syncs.try_create_as(limited, a, body)

        status, text = wait_until(try_create, lambda r: r[0] != 201, timeout=30, what="denial")
        assert status == 403, text
        assert json.loads(text)["reason"] == "Forbidden"
        assert f"you may not get ConfigMap {src}/guarded" in text

        # Allowed to read the source but not to write in the destination: still denied.
        _bind(rbac, src, "limited", a, f"{name}-cm-reader")
        status, text = wait_until(
            try_create, lambda r: "destination" in r[1], timeout=30, what="destination denial"
        )
        assert status == 403, text
        assert "may not create, update and delete ConfigMaps in every destination" in text
        # A selector can reach any namespace: it needs cluster-wide rights.
        body["spec"] = {"configMapName": "guarded", "sourceNamespace": src}
        body["spec"]["namespaceSelector"] = {"matchLabels": {pool.label: "guarded"}}
        status, text = try_create()
        assert status == 403, text
        assert "namespaceSelector can select any namespace" in text

        # The privileged account passes, with a list and with a selector.
        accepted = client.CustomObjectsApi(privileged).create_namespaced_custom_object(
            "sync.opsuite.dev", "v1alpha1", a, "configmapsyncs", body
        )
        syncs.created.append((a, accepted["metadata"]["name"]))
        # Whoever asks: the sync's own namespace (the default source) is no destination.
        with pytest.raises(ApiException) as onto_itself:
            syncs.create(a, sync_manifest("itself", "guarded", destinationNamespaces=[a, b]))
        assert onto_itself.value.status == 422
        assert "the source namespace cannot be a destination" in (onto_itself.value.body or "")
        limited.close()
        privileged.close()
    finally:
        adm.delete_validating_admission_policy_binding(name)
        adm.delete_validating_admission_policy(name)
        for role in roles:
            rbac.delete_cluster_role(role)
        try:
            rbac.delete_cluster_role_binding(f"privileged-{name}-cm-writer")
        except ApiException as exc:
            if exc.status != 404:
                raise


# --- steady state -------------------------------------------------------------------------

QUIET_SYNCS = 50
QUIET_SECONDS = 60


@pytest.mark.local_operators("finds the operator's requests in the audit log by its POD_NAME")
def test_steady_state_is_quiet_even_across_a_restart(
    cluster: Cluster, pool: Pool, syncs: Syncs, operator: OperatorHandle
) -> None:
    if cluster.audit_log is None:
        pytest.skip(f"audit log not readable on a {cluster.kind} cluster")
    quiet, a, b, c = (pool.name(s) for s in ("quiet", "a", "b", "c"))
    for ns in (a, b, c):
        syncs.core.patch_namespace(ns, {"metadata": {"labels": {pool.label: "quiet"}}})
    # A third of the syncs copy filtered keys (one naming a key the source lacks: Degraded
    # KeysMissing, a steady state too), a third select a, b and c but exclude c: the filtered
    # desired copy is what drift detection compares, so none of them writes either.
    shapes: list[dict[str, Any]] = [
        {"destinationNamespaces": [a, b]},
        {"destinationNamespaces": [a, b], "includeKeys": ["i", "absent"]},
        {
            "namespaceSelector": {"matchLabels": {pool.label: "quiet"}},
            "excludeNamespaces": ["*-c"],
            "excludeKeys": ["drop"],
        },
    ]
    setup_started = time.time()
    for i in range(QUIET_SYNCS):
        syncs.put_source(quiet, f"q-{i}", {"i": str(i), "drop": "x"})
        syncs.create(quiet, sync_manifest(f"q-{i}", f"q-{i}", **shapes[i % len(shapes)]))

    def ready() -> list[str]:
        items = syncs.custom.list_namespaced_custom_object(
            "sync.opsuite.dev", "v1alpha1", quiet, "configmapsyncs"
        )["items"]
        return [
            o["metadata"]["name"]
            for o in items
            if condition(o, "Ready").get("status") == "True"
            and o["status"].get("syncedNamespaces") == 2
        ]

    wait_until(ready, lambda r: len(r) == QUIET_SYNCS, timeout=120, what="50 syncs Ready")
    # The audit filter does see this operator's writes: the copies, finalizers and statuses.
    setup_writes = wait_until(
        lambda: writes_by(cluster.audit_log, pool.identity, setup_started, time.time()),
        lambda found: len(found) >= 3 * QUIET_SYNCS,
        timeout=15,
        what="the audit events of the set-up writes",
    )
    assert {e["verb"] for e in setup_writes} >= {"create", "patch"}
    # A restarted operator lists everything, reconciles every sync and writes nothing.
    operator.restart()
    started = time.time()
    reconciled = {"controller": "configmapsync", "result": "success"}
    wait_until(
        lambda: metric_value(operator.metrics(), "controller_runtime_reconcile_total", reconciled),
        lambda n: n >= QUIET_SYNCS,
        timeout=30,
        what="every sync reconciled after the restart",
    )
    time.sleep(max(0.0, started + QUIET_SECONDS - time.time()))
    ended = time.time()
    time.sleep(3)  # the audit log is written asynchronously
    writes = writes_by(cluster.audit_log, pool.identity, started, ended)
    assert not writes, f"{len(writes)} writes in steady state:\n{describe(writes)}"
    assert len(ready()) == QUIET_SYNCS
    assert syncs.configmap(c, "q-2") is None
    assert (syncs.configmap(a, "q-1").data, syncs.configmap(a, "q-2").data) == (
        {"i": "1"},
        {"i": "2"},
    )
    for ns in (a, b, c):
        syncs.core.patch_namespace(ns, {"metadata": {"labels": {pool.label: None}}})
