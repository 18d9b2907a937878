"""Planner examples: targets, conflicts, ownership, immutable replacement, status, cleanup."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest

from configmapsync_operator.consent import allowed_namespaces, matches
from configmapsync_operator.copies import Allowlist, Desired, content_digest, key_of, slim
from configmapsync_operator.destinations import wants
from configmapsync_operator.models import (
    ACCEPT_FROM_ANNOTATION,
    ALLOWED_NAMESPACES_ANNOTATION,
    DELETION_POLICY_ANNOTATION,
    FINALIZER,
    LAST_APPLIED,
    OWNER_ANNOTATION,
    OWNER_LABEL,
    SOURCE_ANNOTATION,
)
from configmapsync_operator.reconcile import collect
from configmapsync_operator.requester import WRITE_VERBS, needs
from configmapsync_operator.spec import InvalidSpecError, parse_spec
from configmapsync_operator.status import (
    CONFLICT,
    NAMESPACE_MISSING,
    NAMESPACE_NOT_WATCHED,
    NOT_ACCEPTED_BY_NAMESPACE,
    NOT_ALLOWED_BY_SOURCE,
    SOURCE_NAMESPACE,
    Issue,
)
from opsuite_common.requester import REQUESTER_NOT_ALLOWED
from opsuite_testkit.configmapsync import (
    GONE_UID,
    NAME,
    OTHER_UID,
    T0,
    UID,
    World,
    condition,
    configmap,
    converge,
    make_world,
    namespace,
    sync_object,
)

HELM_AND_ARGO = {
    "app.kubernetes.io/managed-by": "Helm",
    "app.kubernetes.io/instance": "platform",
}


def test_copies_data_and_binary_data_but_no_metadata_by_default() -> None:
    """Ownership metadata (Helm's, Argo CD's) stays on the source (#16, item 5)."""
    world = make_world({"destinationNamespaces": ["a"]}, "a")
    world.add(
        configmap(
            "src",
            allowed="*",
            data={"k": "v"},
            binary={"b": "AAE="},
            labels={"app": "x", **HELM_AND_ARGO},
            annotations={"meta.helm.sh/release-name": "platform", "note": "n"},
        )
    )
    (write,) = world.plan().writes
    copy = write.manifest
    assert (copy["data"], copy["binaryData"]) == ({"k": "v"}, {"b": "AAE="})
    assert copy["metadata"]["labels"] == {OWNER_LABEL: UID}
    assert copy["metadata"]["annotations"] == {
        OWNER_ANNOTATION: f"src/sync/{UID}",
        SOURCE_ANNOTATION: "src/cfg",
        DELETION_POLICY_ANNOTATION: "Delete",
    }


def test_copies_allowlisted_labels_and_annotations_without_bookkeeping() -> None:
    world = make_world(
        {
            "destinationNamespaces": ["a", "b"],
            "copyLabels": ["app", OWNER_LABEL],
            "copyAnnotations": ["*"],
        },
        "a",
        "b",
    )
    world.add(
        configmap(
            "src",
            allowed="*",
            data={"k": "v"},
            binary={"b": "AAE="},
            labels={"app": "x", OWNER_LABEL: "someone", **HELM_AND_ARGO},
            annotations={"note": "n", LAST_APPLIED: "{}", "sync.opsuite.dev/x": "y"},
        )
    )
    actions = world.plan()
    assert actions.strip_finalizer is False
    assert [w.verb for w in actions.writes] == ["create", "create"]
    copy = actions.writes[0].manifest
    assert copy["data"] == {"k": "v"}
    assert copy["binaryData"] == {"b": "AAE="}
    assert copy["metadata"]["labels"] == {"app": "x", OWNER_LABEL: UID}
    assert copy["metadata"]["annotations"] == {
        "note": "n",
        OWNER_ANNOTATION: f"src/sync/{UID}",
        SOURCE_ANNOTATION: "src/cfg",
        DELETION_POLICY_ANNOTATION: "Delete",
    }
    assert "immutable" not in copy
    world.apply(actions)
    assert world.sync["status"]["syncedNamespaces"] == 2
    assert condition(world, "Ready")["status"] == "True"
    assert world.plan().is_empty


def test_no_finalizer_is_added_and_the_one_of_earlier_versions_is_removed() -> None:
    """#16 minor: with the operator uninstalled, a finalizer would keep every ConfigMapSync,
    and so its namespace, from being deleted."""
    world = make_world({"destinationNamespaces": ["a"]}, "a")
    world.add(configmap("src", allowed="*", data={"k": "v"}))
    converge(world)
    assert world.sync["metadata"]["finalizers"] == []
    world.sync["metadata"]["finalizers"] = ["example.com/theirs", FINALIZER]
    actions = world.plan()
    assert actions.strip_finalizer
    converge(world)
    assert world.sync["metadata"]["finalizers"] == ["example.com/theirs"]
    world.sync["spec"] = {"configMapName": NAME}  # invalid: still stripped
    world.sync["metadata"]["finalizers"] = [FINALIZER]
    assert world.plan().strip_finalizer


def test_collect_ends_the_copies_of_a_gone_sync_as_its_policy_says() -> None:
    """#16 minor: no finalizer, so the copies of a ConfigMapSync deleted while the operator
    was away are found by their owner mark and deleted or released afterwards."""
    sync = sync_object({"configMapName": NAME, "destinationNamespaces": ["a"]})
    source = configmap("src", allowed="*", data={"k": "v"})
    deleted = slim(
        {
            **Desired(sync, source).manifest("a"),
            "metadata": {
                **Desired(sync, source).manifest("a")["metadata"],
                "uid": "1",
                "resourceVersion": "1",
            },
        }
    )
    orphan_sync = sync_object({**sync["spec"], "deletionPolicy": "Orphan"})
    kept = slim(
        {
            **Desired(orphan_sync, source).manifest("b"),
            "metadata": {
                **Desired(orphan_sync, source).manifest("b")["metadata"],
                "uid": "2",
                "resourceVersion": "1",
            },
        }
    )
    legacy = slim(configmap("c", owner=UID))  # an earlier version's copy: no recorded policy
    saved_as = configmap("d", "saved-as", owner=UID)
    saved_as["metadata"]["annotations"][SOURCE_ANNOTATION] = "src/cfg"
    saved = slim(saved_as)  # a copy saved under another name: not an exact copy, never touched
    actions = collect([deleted, kept, legacy, saved])
    assert actions.deletes == (deleted, legacy)
    assert actions.unmarks == (kept,)
    # The final state the watch delivered wins over what the copies record.
    actions = collect([deleted, kept], {UID: "Orphan"})
    assert (actions.deletes, actions.unmarks) == ((), (deleted, kept))


def test_wants_tells_listed_and_selected_destinations() -> None:
    sync = sync_object(
        {
            "configMapName": NAME,
            "destinationNamespaces": ["a", "src"],
            "namespaceSelector": {"matchLabels": {"team": "x"}},
        }
    )
    assert wants(sync, namespace("a"))
    assert wants(sync, namespace("b", {"team": "x"}))
    assert not wants(sync, namespace("b"))
    assert not wants(sync, namespace("src", {"team": "x"}))
    assert not wants(sync, namespace("a", accept=None))
    assert not wants(sync, namespace("a", accept="other"))
    assert not wants(sync, namespace("kube-a", {"team": "x"}, accept="*"), "kube-a")


def test_drifted_copy_is_patched_with_its_uid_and_resource_version() -> None:
    world = make_world({"destinationNamespaces": ["a"]}, "a")
    world.add(configmap("src", allowed="*", data={"k": "v"}))
    converge(world)
    copy = world.configmaps[("a", NAME)]
    copy["data"] = {"k": "edited", "added": "x"}
    (write,) = world.plan().writes
    assert write.verb == "update"
    assert write.patch == {
        "metadata": {
            "uid": copy["metadata"]["uid"],
            "resourceVersion": copy["metadata"]["resourceVersion"],
        },
        "data": {"$patch": "replace", "k": "v"},
        "binaryData": {"$patch": "replace"},
    }
    converge(world)
    assert world.configmaps[("a", NAME)]["data"] == {"k": "v"}


def test_keys_a_co_writer_adds_are_left_alone_and_cause_no_write() -> None:
    """A mutating admission policy labels every copy: no write loop (#16, item 3)."""
    world = make_world({"destinationNamespaces": ["a"], "copyLabels": ["team"]}, "a")
    world.add(configmap("src", allowed="*", data={"k": "v"}, labels={"team": "x"}))
    converge(world)
    copy = world.configmaps[("a", NAME)]
    copy["metadata"]["labels"]["policy.example/injected"] = "yes"
    copy["metadata"]["annotations"]["webhook.example/seen"] = "1"
    assert world.plan().is_empty
    # An owned key that drifts is restored by a patch naming only the owned keys.
    copy["metadata"]["labels"]["team"] = "edited"
    copy["metadata"]["labels"][OWNER_LABEL] = UID
    (write,) = world.plan().writes
    assert write.patch is not None
    assert write.patch["metadata"]["labels"] == {"team": "x"}
    assert "data" not in write.patch
    converge(world)
    labels = world.configmaps[("a", NAME)]["metadata"]["labels"]
    assert labels == {"team": "x", OWNER_LABEL: UID, "policy.example/injected": "yes"}
    # A label the source drops is removed from the copies; foreign keys stay.
    del world.configmaps[("src", NAME)]["metadata"]["labels"]["team"]
    (write,) = world.plan().writes
    assert write.patch is not None
    assert write.patch["metadata"]["labels"] == {"team": None}
    converge(world)
    labels = world.configmaps[("a", NAME)]["metadata"]["labels"]
    assert labels == {OWNER_LABEL: UID, "policy.example/injected": "yes"}


def test_consent_of_the_source_decides_where_copies_go() -> None:
    """#17, item 1: only namespaces the source's annotation allows get copies, whatever the
    ConfigMapSync asks (conflictPolicy Overwrite included)."""
    world = make_world(
        {"destinationNamespaces": ["a", "b", "team-c"], "conflictPolicy": "Overwrite"},
        "a",
        "b",
        "team-c",
    )
    source = world.add(configmap("src", allowed="a, team-*", data={"k": "v"}))
    theirs = world.add(configmap("b", data={"k": "unmanaged"}))
    actions = world.plan()
    assert sorted(w.namespace for w in actions.writes) == ["a", "team-c"]
    (refused,) = actions.outcome.issues
    assert (refused.namespace, refused.reason) == ("b", NOT_ALLOWED_BY_SOURCE)
    assert "does not allow copies in namespace b" in refused.message
    assert ALLOWED_NAMESPACES_ANNOTATION in refused.message
    converge(world)
    assert world.configmaps[("b", NAME)] == theirs
    assert condition(world, "Degraded")["reason"] == NOT_ALLOWED_BY_SOURCE
    assert condition(world, "Ready")["status"] == "False"
    assert world.sync["status"]["syncedNamespaces"] == 2

    # Narrowed consent: the copy in the namespace no longer allowed is deleted.
    source["metadata"]["annotations"][ALLOWED_NAMESPACES_ANNOTATION] = "a"
    actions = world.plan()
    assert [slim_key(r) for r in actions.deletes] == [("team-c", NAME)]
    assert not actions.writes
    converge(world)
    assert ("team-c", NAME) not in world.configmaps
    assert world.configmaps[("b", NAME)] == theirs

    # No consent at all (a source from before the upgrade): nothing is written or deleted,
    # the copy is kept as it is, and every destination is reported.
    del source["metadata"]["annotations"][ALLOWED_NAMESPACES_ANNOTATION]
    source["data"] = {"k": "v2"}
    actions = world.plan()
    assert not actions.writes
    assert not actions.deletes
    assert {i.namespace: i.reason for i in actions.outcome.issues} == {
        ns: NOT_ALLOWED_BY_SOURCE for ns in ("a", "b", "team-c")
    }
    assert "no sync.opsuite.dev/allowed-namespaces annotation" in actions.outcome.issues[0].message
    converge(world)
    assert world.configmaps[("a", NAME)]["data"] == {"k": "v"}
    assert condition(world, "Degraded")["reason"] == NOT_ALLOWED_BY_SOURCE

    # Consent given again: syncing resumes.
    source["metadata"]["annotations"][ALLOWED_NAMESPACES_ANNOTATION] = "*"
    converge(world)
    assert world.configmaps[("a", NAME)]["data"] == {"k": "v2"}
    assert world.configmaps[("b", NAME)]["metadata"]["labels"][OWNER_LABEL] == UID


def test_a_destination_receives_only_what_its_namespace_accepts() -> None:
    """#31, item 1: the source's consent is its owner's; a destination needs its own, from whoever
    administers the Namespace. A tenant who owns the source and asks for Overwrite writes
    nothing into a namespace that does not accept its namespace, takes nothing over there, and
    says so in the status."""
    world = make_world(
        {"destinationNamespaces": ["a", "b", "c"], "conflictPolicy": "Overwrite"}, "a", "b", "c"
    )
    world.namespaces["b"] = namespace("b", accept=None)
    world.namespaces["c"] = namespace("c", accept="platform, team-*")
    world.add(configmap("src", allowed="*", data={"k": "v"}))
    theirs = world.add(configmap("c", data={"k": "unmanaged"}))
    actions = world.plan()
    assert [w.namespace for w in actions.writes] == ["a"]
    issues = {i.namespace: i for i in actions.outcome.issues}
    assert {ns: i.reason for ns, i in issues.items()} == {
        "b": NOT_ACCEPTED_BY_NAMESPACE,
        "c": NOT_ACCEPTED_BY_NAMESPACE,
    }
    assert f"has no {ACCEPT_FROM_ANNOTATION} annotation" in issues["b"].message
    assert "does not accept copies from namespace src (" in issues["c"].message
    converge(world)
    assert world.configmaps[("c", NAME)] == theirs
    assert ("b", NAME) not in world.configmaps
    assert condition(world, "Degraded")["reason"] == NOT_ACCEPTED_BY_NAMESPACE

    # Accepted: copied (and the unmanaged one taken over, as Overwrite says).
    world.namespaces["c"] = namespace("c", accept="src")
    converge(world)
    assert world.configmaps[("c", NAME)]["metadata"]["labels"][OWNER_LABEL] == UID

    # Withdrawn: the own copy is deleted; without any annotation it is kept, frozen.
    world.namespaces["c"] = namespace("c", accept="platform")
    world.namespaces["a"] = namespace("a", accept=None)
    world.configmaps[("src", NAME)]["data"] = {"k": "v2"}
    actions = world.plan()
    assert [slim_key(r) for r in actions.deletes] == [("c", NAME)]
    assert not actions.writes
    converge(world)
    assert world.configmaps[("a", NAME)]["data"] == {"k": "v"}


@pytest.mark.parametrize(
    ("destination", "accept", "own", "ok"),
    [
        ("kube-system", "*", None, False),
        ("kube-system", "s*", None, False),
        ("kube-system", "src", None, True),
        ("openshift-config", "*", None, False),
        ("opsuite-system", "*", "opsuite-system", False),
        ("opsuite-system", "src", "opsuite-system", True),
        ("team-a", "*", "opsuite-system", True),
    ],
)
def test_protected_namespaces_accept_only_sources_they_name_literally(
    destination: str, accept: str, own: str | None, ok: bool
) -> None:
    """A cluster-wide ``*`` (a policy that annotates every namespace, say) never opens kube-*,
    openshift-* or the operator's own namespace."""
    world = make_world({"destinationNamespaces": [destination]}, destination)
    world.namespaces[destination] = namespace(destination, accept=accept)
    world.own_namespace = own
    world.add(configmap("src", allowed="*", data={"k": "v"}))
    actions = world.plan()
    assert bool(actions.writes) is ok
    if not ok:
        (issue,) = actions.outcome.issues
        assert issue.reason == NOT_ACCEPTED_BY_NAMESPACE
        assert "is protected" in issue.message


@pytest.mark.parametrize(
    ("allowed", "namespace", "ok"),
    [
        ("*", "anything", True),
        ("team-*", "team-a", True),
        ("team-*", "my-team-a", False),
        ("team", "team-a", False),
        ("a,b", "b", True),
        (" a , b ", "b", True),
        ("", "a", False),
        ("t.am", "team", False),
        ("*-prod", "shop-prod", True),
        ("[a-z]*", "a", False),
    ],
)
def test_consent_patterns_are_anchored_globs(allowed: str, namespace: str, ok: bool) -> None:
    source = configmap("src", allowed=allowed)
    patterns = allowed_namespaces(source)
    assert patterns is not None
    assert matches(patterns, namespace) is ok


def test_a_copy_whose_owner_is_gone_is_taken_over() -> None:
    """#16 minor: a stale owner label (its ConfigMapSync deleted while the operator was away)
    no longer blocks the destination, whatever the conflictPolicy."""
    world = make_world({"destinationNamespaces": ["a", "b"]}, "a", "b")
    world.add(configmap("src", allowed="*", data={"k": "v"}))
    stale = world.add(configmap("a", data={"k": "old"}, owner=GONE_UID))
    world.add(configmap("b", data={"k": "theirs"}, owner=OTHER_UID))
    actions = world.plan()
    (write,) = actions.writes
    assert (write.namespace, write.verb, write.patch) == ("a", "update", None)
    assert write.manifest["metadata"]["uid"] == stale["metadata"]["uid"]
    assert [(i.namespace, i.reason) for i in actions.outcome.issues] == [("b", CONFLICT)]
    converge(world)
    assert world.configmaps[("a", NAME)]["metadata"]["labels"][OWNER_LABEL] == UID
    assert world.configmaps[("a", NAME)]["data"] == {"k": "v"}


def test_a_copy_of_an_unwatched_owner_is_not_taken_over() -> None:
    """With --namespace, an owner outside the served namespaces is unknown, not gone."""
    world = make_world({"destinationNamespaces": ["a"]}, "a")
    world.served = ("src", "a")
    world.add(configmap("src", allowed="*", data={"k": "v"}))
    world.add(configmap("a", data={"k": "old"}, owner=GONE_UID))  # owner annotation: src/...
    assert len(world.plan().writes) == 1
    stale = world.configmaps[("a", NAME)]["metadata"]["annotations"]
    stale[OWNER_ANNOTATION] = f"elsewhere/other/{GONE_UID}"
    actions = world.plan()
    assert not actions.writes
    assert [i.reason for i in actions.outcome.issues] == [CONFLICT]


def test_unmanaged_destination_skip_reports_conflict_and_overwrite_takes_over() -> None:
    world = make_world({"destinationNamespaces": ["a"]}, "a")
    world.add(configmap("src", allowed="*", data={"k": "v"}))
    theirs = world.add(configmap("a", data={"k": "theirs"}))
    actions = world.plan()
    assert not actions.writes
    assert [i.reason for i in actions.outcome.issues] == [CONFLICT]
    world.apply(actions)
    assert condition(world, "Ready")["reason"] == CONFLICT
    assert condition(world, "Degraded")["status"] == "True"
    assert world.sync["status"]["failedTargets"][0]["namespace"] == "a"

    world.sync["spec"]["conflictPolicy"] = "Overwrite"
    (write,) = world.plan().writes
    assert (write.verb, write.patch) == ("update", None)  # taken over whole
    assert write.manifest["metadata"]["uid"] == theirs["metadata"]["uid"]
    converge(world)
    assert world.configmaps[("a", NAME)]["metadata"]["labels"][OWNER_LABEL] == UID


def test_copy_of_another_sync_is_never_taken_over() -> None:
    world = make_world({"destinationNamespaces": ["a"], "conflictPolicy": "Overwrite"}, "a")
    world.add(configmap("src", allowed="*", data={"k": "v"}))
    world.add(configmap("a", data={"k": "theirs"}, owner=OTHER_UID))
    actions = world.plan()
    assert not actions.writes
    assert actions.outcome.issues[0].reason == CONFLICT
    assert OTHER_UID in actions.outcome.issues[0].message


def test_a_source_of_another_sync_is_never_taken_over() -> None:
    world = make_world({"destinationNamespaces": ["a"], "conflictPolicy": "Overwrite"}, "a")
    world.add(configmap("src", allowed="*", data={"k": "v"}))
    world.add(configmap("a", data={"k": "theirs"}))
    world.sources_in_use = frozenset({("a", NAME)})
    actions = world.plan()
    assert not actions.writes
    assert "source of a ConfigMapSync" in actions.outcome.issues[0].message


def test_missing_namespace_is_reported_then_filled() -> None:
    world = make_world({"destinationNamespaces": ["a", "later"]}, "a")
    world.add(configmap("src", allowed="*", data={"k": "v"}))
    converge(world)
    assert world.sync["status"]["failedTargets"] == [
        {
            "namespace": "later",
            "reason": NAMESPACE_MISSING,
            "message": "the namespace does not exist; the copy is made when it appears",
        }
    ]
    assert condition(world, "Ready")["reason"] == NAMESPACE_MISSING
    assert condition(world, "Degraded")["status"] == "False"
    world.namespaces["later"] = namespace("later")
    assert [w.namespace for w in world.plan().writes] == ["later"]
    converge(world)
    assert condition(world, "Ready")["status"] == "True"
    assert world.sync["status"]["failedTargets"] == []


def test_selector_adds_and_removes_namespaces_but_never_the_source_namespace() -> None:
    world = make_world({"namespaceSelector": {"matchLabels": {"team": "x"}}})
    world.namespaces["src"] = namespace("src", {"team": "x"})
    world.namespaces["a"] = namespace("a", {"team": "x"})
    world.namespaces["b"] = namespace("b", {"team": "y"})
    world.add(configmap("src", allowed="*", data={"k": "v"}))
    converge(world)
    assert sorted(ns for ns, _ in world.configmaps) == ["a", "src"]
    world.namespaces["a"] = namespace("a", {"team": "y"})
    world.namespaces["b"] = namespace("b", {"team": "x"})
    actions = world.plan()
    assert [slim_key(r) for r in actions.deletes] == [("a", NAME)]
    assert [w.namespace for w in actions.writes] == ["b"]
    converge(world)
    assert sorted(ns for ns, _ in world.configmaps) == ["b", "src"]


def slim_key(record: Mapping[str, Any]) -> tuple[str, str]:
    return record["metadata"]["namespace"], record["metadata"]["name"]


def test_listed_source_namespace_is_reported_and_skipped() -> None:
    world = make_world({"destinationNamespaces": ["src", "a"]}, "a")
    world.add(configmap("src", allowed="*", data={"k": "v"}))
    actions = world.plan()
    assert [w.namespace for w in actions.writes] == ["a"]
    assert actions.outcome.issues == (
        Issue("src", SOURCE_NAMESPACE, "the source namespace is never a destination"),
    )


def test_source_deleted_keeps_copies_and_resumes() -> None:
    world = make_world({"destinationNamespaces": ["a"]}, "a")
    world.add(configmap("src", allowed="*", data={"k": "v"}))
    converge(world)
    del world.configmaps[("src", NAME)]
    actions = world.plan()
    assert not actions.writes
    assert not actions.deletes
    world.apply(actions)
    assert condition(world, "Ready")["reason"] == "SourceNotFound"
    assert world.sync["status"]["syncedNamespaces"] == 1
    world.add(configmap("src", allowed="*", data={"k": "back"}))
    (write,) = world.plan().writes
    assert write.verb == "update"
    assert write.manifest["data"] == {"k": "back"}
    converge(world)
    assert condition(world, "Ready")["status"] == "True"


def test_immutable_copy_is_replaced_when_the_data_changes() -> None:
    world = make_world({"destinationNamespaces": ["a"], "copyLabels": ["new"]}, "a")
    world.add(configmap("src", allowed="*", data={"k": "v1"}, immutable=True))
    converge(world)
    assert world.configmaps[("a", NAME)]["immutable"] is True
    world.add(configmap("src", allowed="*", data={"k": "v2"}, immutable=True))
    (write,) = world.plan().writes
    assert write.verb == "replace"
    converge(world)
    assert world.configmaps[("a", NAME)]["data"] == {"k": "v2"}
    # Only a label changed: an immutable ConfigMap's metadata can be updated in place.
    world.configmaps[("src", NAME)]["metadata"]["labels"]["new"] = "label"
    (write,) = world.plan().writes
    assert write.verb == "update"
    assert write.patch is not None
    assert "data" not in write.patch
    converge(world)


def test_rename_deletes_old_copies_and_the_deleting_sync_cleans_up() -> None:
    world = make_world({"destinationNamespaces": ["a", "b"]}, "a", "b")
    world.add(configmap("src", allowed="*", data={"k": "v"}))
    world.add(configmap("src", "other", allowed="*", data={"k": "o"}))
    converge(world)
    world.sync["spec"]["configMapName"] = "other"
    actions = world.plan()
    assert sorted(slim_key(r) for r in actions.deletes) == [("a", NAME), ("b", NAME)]
    converge(world)
    world.sync["metadata"]["finalizers"] = [FINALIZER]  # put there by an earlier version
    world.sync["metadata"]["deletionTimestamp"] = "2025-01-01T12:00:00Z"
    actions = world.plan()
    assert sorted(slim_key(r) for r in actions.deletes) == [("a", "other"), ("b", "other")]
    assert actions.remove_finalizer
    assert not actions.writes
    world.apply(actions)
    assert FINALIZER not in world.sync["metadata"]["finalizers"]
    assert world.plan().is_empty


def test_a_copy_saved_under_another_name_is_never_deleted() -> None:
    """A user who saves a copy under another name (`kubectl get -o yaml`, new name, apply)
    keeps the ownership label and annotations: it is not a copy the sync wrote (its name is not
    its source's), so neither a pass nor the sync's deletion deletes it."""
    world = make_world({"destinationNamespaces": ["a"]}, "a")
    world.add(configmap("src", allowed="*", data={"k": "v"}))
    converge(world)
    saved = copy.deepcopy(world.configmaps[("a", NAME)])
    saved["metadata"].update(name="saved", uid="saved-uid", resourceVersion="9")
    world.add(saved)
    assert slim_key(saved) not in [slim_key(r) for r in world.plan().deletes]
    converge(world)
    world.sync["metadata"]["finalizers"] = [FINALIZER]  # put there by an earlier version
    world.sync["metadata"]["deletionTimestamp"] = "2025-01-01T12:00:00Z"
    actions = world.plan()
    assert [slim_key(r) for r in actions.deletes] == [("a", NAME)]
    world.apply(actions)
    assert ("a", "saved") in world.configmaps


def test_orphan_policy_unmarks_copies() -> None:
    world = make_world({"destinationNamespaces": ["a"], "deletionPolicy": "Orphan"}, "a")
    world.add(configmap("src", allowed="*", data={"k": "v"}))
    converge(world)
    world.sync["metadata"]["finalizers"] = [FINALIZER]  # put there by an earlier version
    world.sync["metadata"]["deletionTimestamp"] = "2025-01-01T12:00:00Z"
    actions = world.plan()
    assert not actions.deletes
    assert len(actions.unmarks) == 1
    world.apply(actions)
    assert OWNER_LABEL not in world.configmaps[("a", NAME)]["metadata"]["labels"]


def test_not_watched_namespaces() -> None:
    world = make_world({"destinationNamespaces": ["a", "b"]}, "a", "b")
    world.served = ("src", "a")
    world.add(configmap("src", allowed="*", data={"k": "v"}))
    actions = world.plan()
    assert [w.namespace for w in actions.writes] == ["a"]
    assert [i.reason for i in actions.outcome.issues] == [NAMESPACE_NOT_WATCHED]
    world.served = ("a",)
    actions = world.plan()
    assert not actions.writes
    assert actions.status_patch is not None
    assert actions.status_patch["conditions"][0]["reason"] == "SourceNotWatched"


def test_invalid_spec_is_reported() -> None:
    world = World(sync_object({"configMapName": NAME}))
    actions = world.plan()
    assert not actions.writes
    assert actions.status_patch is not None
    ready = actions.status_patch["conditions"][0]
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec")
    with pytest.raises(InvalidSpecError, match="conflictPolicy"):
        parse_spec({"spec": {"configMapName": NAME, "conflictPolicy": "Maybe"}})


def test_status_is_quiet_in_steady_state() -> None:
    world = make_world({"destinationNamespaces": ["a"]}, "a")
    world.add(configmap("src", allowed="*", data={"k": "v"}))
    converge(world)
    synced_at = world.sync["status"]["lastSyncTime"]
    later = T0.replace(hour=13)
    assert world.plan(later).is_empty
    world.configmaps[("a", NAME)]["data"] = {"k": "edited"}
    world.apply(world.plan(later))
    assert world.sync["status"]["lastSyncTime"] != synced_at


def test_slim_record_digests_match_the_rendered_copy() -> None:
    sync = sync_object({"configMapName": NAME, "destinationNamespaces": ["a"]})
    source = configmap("src", allowed="*", data={"k": "v"}, labels={"l": "1"})
    copy = Desired(sync, source, Allowlist(labels=("l",))).manifest("a")
    record = slim({**copy, "metadata": {**copy["metadata"], "uid": "x", "resourceVersion": "1"}})
    assert record["contentDigest"] == content_digest(copy)
    assert record["metadata"]["labels"] == {OWNER_LABEL: UID}
    assert record["labelDigests"].keys() == {"l", OWNER_LABEL}
    assert Desired(sync, source, Allowlist(labels=("l",))).is_current(record)
    # Once "l" leaves the allowlist it is no longer the operator's: left alone, not removed.
    assert Desired(sync, source, Allowlist()).is_current(record)
    assert "data" not in record
    assert "contentDigest" not in slim(source)


def test_planning_many_current_copies_digests_the_wanted_content_and_marks_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every copy of a sync wants the same content and marks: checking 50 current copies must
    not digest them 50 times (that was a fifth of the operator's CPU in a 5,000-copy update)."""
    from configmapsync_operator import copies
    from opsuite_testkit import configmapsync

    names = [f"d{i:02d}" for i in range(50)]
    world = make_world({"destinationNamespaces": names, "copyLabels": ["l"]}, *names)
    world.add(configmap("src", allowed="*", data={"k": "v" * 64}, labels={"l": "1"}))
    converge(world)
    records = {id(o): slim(o) for o in world.configmaps.values()}
    monkeypatch.setattr(configmapsync, "slim", lambda o: records[id(o)])
    real, calls = copies._digest, []

    def counting(value: object) -> str:
        calls.append(value)
        return real(value)

    monkeypatch.setattr(copies, "_digest", counting)
    assert world.plan().is_empty
    assert len(calls) <= 10


def test_a_pass_renders_the_wanted_copy_once_for_all_its_destinations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every destination wants the same copy but for its namespace: a pass over 50 stale copies
    selects the source's labels and annotations once, not once per destination (rendering and
    digesting per destination was most of a pass over 500, #19)."""
    from configmapsync_operator import copies

    names = [f"d{i:02d}" for i in range(50)]
    world = make_world({"destinationNamespaces": names, "copyLabels": ["l"]}, *names)
    world.add(configmap("src", allowed="*", data={"k": "v"}, labels={"l": "1"}))
    converge(world)
    world.configmaps[("src", NAME)]["data"] = {"k": "changed"}
    real, calls = copies.copied, []

    def counting(entries: object, patterns: tuple[str, ...]) -> dict[str, str]:
        calls.append(patterns)
        return real(entries, patterns)

    monkeypatch.setattr(copies, "copied", counting)
    actions = world.plan()
    assert len(calls) == 2  # labels, annotations
    assert sorted(w.namespace for w in actions.writes) == names
    assert all(
        w.patch is not None and w.patch["data"] == {"$patch": "replace", "k": "changed"}
        for w in actions.writes
    )


def test_a_refused_requester_gets_nothing_written_or_deleted() -> None:
    world = make_world({"destinationNamespaces": ["a", "b"]}, "a", "b")
    world.add(configmap("src", allowed="*", data={"k": "v"}))
    wanted = world.plan()
    assert [w.namespace for w in wanted.writes] == ["a", "b"]
    assert [str(a) for a in needs(world.sync, wanted)] == [
        f"get configmaps {NAME} in src",
        *(f"{verb} configmaps in {ns}" for ns in ("a", "b") for verb in WRITE_VERBS),
    ]
    converge(world)
    world.sync["spec"]["destinationNamespaces"] = ["a"]
    withdrawn = world.plan()
    assert [key_of(r) for r in withdrawn.deletes] == [("b", NAME)]
    assert "delete configmaps in b" in [str(a) for a in needs(world.sync, withdrawn)]
    refused = world.plan(requester="alice may no longer")
    assert (refused.writes, refused.deletes) == ((), ())
    assert refused.status_patch is not None
    ready = refused.status_patch["conditions"][0]
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "False",
        REQUESTER_NOT_ALLOWED,
        "alice may no longer",
    )
