"""Revision history: templates kept as ControllerRevisions, revisionHistoryLimit, the revisions
the status names, and the Available condition."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from opsuite_testkit.podset import HASH, OLD, T0, TEMPLATE, UID, pod
from podset_operator.pod_state import TEMPLATE_HASH_LABEL
from podset_operator.reconcile import Plan, plan
from podset_operator.revisions import (
    Revision,
    RevisionWrites,
    owned_revisions,
    plan_revisions,
    revision_name,
)
from podset_operator.spec import parse_spec
from podset_operator.template import template_hash

NEW_TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"app": "web"}, "annotations": {"version": "2"}},
    "spec": TEMPLATE["spec"],
}
NEW = template_hash(NEW_TEMPLATE)


def podset(replicas: int = 2, template: dict[str, Any] = TEMPLATE, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "namespace": "ns", "uid": UID, "generation": 1},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": template,
            "updateStrategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}},
            **spec,
        },
    }


def revision(hash_: str, number: int, owner: str | None = UID, name: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name or f"web-{hash_}",
        "namespace": "ns",
        "uid": f"uid-rev-{hash_}-{owner}",
        "labels": {TEMPLATE_HASH_LABEL: hash_},
    }
    if owner is not None:
        meta["ownerReferences"] = [{"kind": "PodSet", "uid": owner, "controller": True}]
    return {"metadata": meta, "revision": number, "data": {"template": {}}}


def apply(store: list[dict[str, Any]], writes: RevisionWrites) -> list[dict[str, Any]]:
    """The revisions after ``writes``, as the API server would keep them."""
    gone = {uid for _, uid in writes.delete}
    result = [copy.deepcopy(r) for r in store if r["metadata"]["uid"] not in gone]
    if writes.renumber is not None:
        _, uid, number = writes.renumber
        for r in result:
            if r["metadata"]["uid"] == uid:
                r["revision"] = number
    if writes.create is not None:
        created = copy.deepcopy(dict(writes.create))
        created["metadata"]["uid"] = f"uid-created-{created['metadata']['name']}"
        result.append(created)
    return result


def step(ps: dict[str, Any], pods: list[dict[str, Any]], store: list[dict[str, Any]]) -> Plan:
    result = plan(ps, pods, T0, True, revisions=store)
    if result.status_patch is not None:
        ps["status"] = {**ps.get("status", {}), **result.status_patch}
    store[:] = apply(store, result.revisions)
    return result


def condition(ps: dict[str, Any], type_: str) -> tuple[str, str]:
    found = next(c for c in ps["status"]["conditions"] if c["type"] == type_)
    return found["status"], found["reason"]


def test_history_limit_defaults_to_ten() -> None:
    assert parse_spec(podset()).revision_history_limit == 10


def test_the_template_is_kept_as_a_revision_owned_by_the_podset_and_then_nothing_is_written() -> (
    None
):
    ps, pods = podset(), [pod("a"), pod("b")]
    store: list[dict[str, Any]] = []
    first = step(ps, pods, store)
    created = first.revisions.create
    assert created is not None
    assert created["metadata"]["name"] == f"web-{HASH}"
    assert created["metadata"]["labels"] == {
        TEMPLATE_HASH_LABEL: HASH,
        "apps.opsuite.dev/podset": "web",
    }
    (ref,) = created["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["uid"], ref["controller"]) == ("PodSet", UID, True)
    assert created["data"] == {"template": TEMPLATE}
    assert created["revision"] == 1
    assert (ps["status"]["updateRevision"], ps["status"]["currentRevision"]) == (
        f"web-{HASH}",
        f"web-{HASH}",
    )
    assert plan(ps, pods, T0, True, revisions=store).is_empty


def test_a_rollout_names_both_revisions_until_it_is_done() -> None:
    ps = podset()
    store: list[dict[str, Any]] = []
    old_pods = [pod("a"), pod("b")]
    step(ps, old_pods, store)
    ps["spec"]["template"] = NEW_TEMPLATE
    ps["metadata"]["generation"] = 2
    rolling = step(ps, old_pods, store)
    assert rolling.revisions.create is not None
    assert rolling.revisions.create["revision"] == 2
    assert (ps["status"]["currentRevision"], ps["status"]["updateRevision"]) == (
        f"web-{HASH}",
        f"web-{NEW}",
    )
    done = [pod("c", hash_=NEW), pod("d", hash_=NEW)]
    step(ps, done, store)
    assert ps["status"]["currentRevision"] == f"web-{NEW}"
    assert {r["metadata"]["name"] for r in store} == {f"web-{HASH}", f"web-{NEW}"}
    assert plan(ps, done, T0, True, revisions=store).is_empty


def test_going_back_to_an_earlier_template_makes_its_revision_the_newest() -> None:
    store = [revision(HASH, 1), revision(NEW, 2)]
    ps = podset()  # the template of revision 1, copied back into the spec
    result = plan(ps, [pod("a", hash_=NEW), pod("b", hash_=NEW)], T0, True, revisions=store)
    assert result.revisions.create is None
    assert result.revisions.renumber == (f"web-{HASH}", f"uid-rev-{HASH}-{UID}", 3)
    assert result.pods_to_create == 1  # and the rollout back begins


def test_old_revisions_beyond_the_limit_go_oldest_first_but_not_those_of_running_pods() -> None:
    old = [revision(f"h{i:09d}", i) for i in range(1, 6)]
    store = [*old, revision(HASH, 6)]
    pods = [pod("a"), pod("b", hash_="h000000001")]
    result = plan(podset(revisionHistoryLimit=2), pods, T0, True, revisions=store)
    # h1 has a pod: kept. Of h2..h5, the two newest stay.
    assert [name for name, _ in result.revisions.delete] == ["web-h000000002", "web-h000000003"]
    none_kept = plan(podset(revisionHistoryLimit=0), [pod("a")], T0, True, revisions=store)
    assert len(none_kept.revisions.delete) == 5


def test_revisions_of_others_are_never_touched_nor_count_as_kept() -> None:
    foreign = [
        revision(HASH, 7, owner="someone-else"),
        revision(OLD, 9, owner=None),
        revision(NEW, 8, owner="someone-else", name="web-crafted"),
    ]
    result = plan(podset(revisionHistoryLimit=0), [pod("a")], T0, True, revisions=foreign)
    assert result.revisions.create is not None
    assert result.revisions.create["revision"] == 1  # numbered among its own only
    assert (result.revisions.renumber, result.revisions.delete) == (None, ())


def test_no_revision_is_written_for_a_podset_being_deleted() -> None:
    ps = podset()
    ps["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    assert plan(ps, [pod("a")], T0, True, revisions=[]).revisions.empty


def test_revision_names_stay_valid_object_names() -> None:
    assert len(revision_name("x" * 253, HASH)) == 253
    assert revision_name("x" * 253, HASH).endswith(f"-{HASH}")


def test_available_is_true_while_at_least_replicas_minus_max_unavailable_are_available() -> None:
    ps = podset(4, revisionHistoryLimit=1)
    step(ps, [pod("a"), pod("b"), pod("c"), pod("d", ready=False)], [])
    assert condition(ps, "Available") == ("True", "MinimumReplicasAvailable")
    assert condition(ps, "Ready")[0] == "False"
    step(ps, [pod("a"), pod("b"), pod("c", ready=False), pod("d", ready=False)], [])
    assert condition(ps, "Available") == ("False", "MinimumReplicasUnavailable")
    on_delete = podset(2, updateStrategy={"type": "OnDelete"})
    step(on_delete, [pod("a"), pod("b", ready=False)], [])
    assert condition(on_delete, "Available") == ("False", "MinimumReplicasUnavailable")


HASHES = st.sampled_from([HASH, NEW, OLD, "h000000001", "h000000002", "h000000003"])


@settings(max_examples=100, deadline=None)
@given(
    owned=st.lists(HASHES, unique=True, max_size=6),
    foreign=st.lists(HASHES, max_size=3),
    live=st.frozensets(HASHES, max_size=3),
    limit=st.integers(0, 4),
    order=st.randoms(use_true_random=False),
)
def test_revision_writes_converge_in_one_step_and_keep_the_limit(
    owned: list[str],
    foreign: list[str],
    live: frozenset[str],
    limit: int,
    order: Any,
) -> None:
    """Whatever revisions exist: after one step's writes, the current template's revision is
    the newest of the PodSet's own, at most ``limit`` old revisions without pods remain, those
    of running pods and every revision of others are untouched, and a second step writes
    nothing."""
    numbers = list(range(1, len(owned) + 1))
    order.shuffle(numbers)
    mine = [revision(h, n) for h, n in zip(owned, numbers, strict=True)]
    others = [revision(h, 50 + i, owner="other", name=f"x-{i}-{h}") for i, h in enumerate(foreign)]
    store = [*mine, *others]
    ps = podset(revisionHistoryLimit=limit)
    writes = plan_revisions(ps, TEMPLATE, HASH, _own(store), limit, live)
    after = apply(store, writes)
    assert [r for r in after if r["metadata"]["name"].startswith("x-")] == others
    own = _own(after)
    (current,) = [r for r in own if r.hash == HASH]
    assert current.number == max(r.number for r in own)
    assert {r.hash for r in own} >= {h for h in owned if h in live}
    assert len([r for r in own if r.hash != HASH and r.hash not in live]) <= limit
    assert plan_revisions(ps, TEMPLATE, HASH, _own(after), limit, live).empty


def _own(store: list[dict[str, Any]]) -> list[Revision]:
    return owned_revisions(store, UID)
