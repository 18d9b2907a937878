"""Property tests of the planner over random clusters: safety, idempotence, never the source."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from configmapsync_operator.copies import key_of, owner_uid, render_copy
from configmapsync_operator.models import FINALIZER, OWNER_LABEL
from configmapsync_operator.reconcile import Plan
from configmapsync_operator.simulation import (
    NAME,
    OTHER_UID,
    UID,
    World,
    configmap,
    namespace,
    sync_object,
)

NAMESPACES = ("src", "a", "b", "c", "d")
LISTABLE = (*NAMESPACES, "never")
NAMES = (NAME, "old")
FAST = settings(max_examples=100, deadline=None)

datas = st.dictionaries(st.sampled_from("kxy"), st.sampled_from(["1", "2"]), max_size=2)
labels = st.dictionaries(st.sampled_from(["team", "app"]), st.sampled_from(["x", "y"]), max_size=2)


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {"configMapName": NAME}
    listed = draw(st.lists(st.sampled_from(LISTABLE), max_size=4, unique=True))
    selector = draw(
        st.sampled_from([None, {}, {"matchLabels": {"team": "x"}}])
        | st.just({"matchExpressions": [{"key": "app", "operator": "Exists"}]})
    )
    if not listed and selector is None:
        listed = ["a"]
    if listed:
        spec["destinationNamespaces"] = listed
    if selector is not None:
        spec["namespaceSelector"] = selector
    spec["conflictPolicy"] = draw(st.sampled_from(["Skip", "Overwrite"]))
    spec["deletionPolicy"] = draw(st.sampled_from(["Delete", "Orphan"]))
    if draw(st.booleans()):
        spec["sourceNamespace"] = "src"
    return spec


@st.composite
def worlds(draw: st.DrawFn, deleting: bool = False) -> World:
    world = World(
        sync_object(draw(specs()), finalizer=draw(st.booleans()) or deleting, deleting=deleting)
    )
    for ns in NAMESPACES:
        if ns == "src" or draw(st.integers(0, 5)) > 0:
            terminating = ns != "src" and draw(st.integers(0, 8)) == 0
            world.namespaces[ns] = namespace(ns, draw(labels), terminating)
    source = world.source_key
    for ns in NAMESPACES:
        for name in NAMES:
            kind = draw(st.sampled_from(["none", "none", "unowned", "mine", "mine", "other"]))
            if (ns, name) == source:
                kind = draw(st.sampled_from(["none", "unowned", "unowned", "other"]))
            if kind == "none":
                continue
            world.add(
                configmap(
                    ns,
                    name,
                    data=draw(datas),
                    owner={"unowned": None, "mine": UID, "other": OTHER_UID}[kind],
                    immutable=draw(st.integers(0, 3)) == 0,
                    labels=draw(labels),
                )
            )
    if draw(st.booleans()):
        world.served = tuple(sorted(draw(st.sets(st.sampled_from(NAMESPACES), min_size=1))))
    in_use = draw(st.sets(st.sampled_from([(ns, NAME) for ns in NAMESPACES]), max_size=2))
    world.sources_in_use = frozenset(in_use)
    return world


def touched_keys(actions: Plan) -> list[tuple[str, str]]:
    keys = [(w.namespace, w.manifest["metadata"]["name"]) for w in actions.writes]
    keys += [key_of(r) for r in (*actions.deletes, *actions.unmarks)]
    return keys


@FAST
@given(world=worlds())
def test_only_own_copies_are_changed_and_unmanaged_ones_only_under_overwrite(world: World) -> None:
    before = copy.deepcopy(world.configmaps)
    actions = world.plan()
    policy = world.sync["spec"]["conflictPolicy"]
    for write in actions.writes:
        key = (write.namespace, write.manifest["metadata"]["name"])
        existing = before.get(key)
        if existing is None:
            assert write.verb == "create"
            continue
        owner = owner_uid(existing)
        assert owner in (UID, None), f"wrote over a copy of another sync at {key}"
        if owner is None:
            assert policy == "Overwrite", f"Skip but took over {key}"
            assert key not in world.sources_in_use
        assert write.observed is not None
        assert (
            write.observed["metadata"]["resourceVersion"]
            == (existing["metadata"]["resourceVersion"])
        )
    for record in (*actions.deletes, *actions.unmarks):
        assert owner_uid(before[key_of(record)]) == UID


@FAST
@given(world=worlds())
def test_never_targets_the_source(world: World) -> None:
    actions = world.plan()
    assert world.source_key not in touched_keys(actions)
    assert world.source_key[0] not in {w.namespace for w in actions.writes}
    if world.sync["spec"]["conflictPolicy"] == "Skip":
        for write in actions.writes:
            assert write.observed is None or owner_uid(write.observed) == UID


@FAST
@given(world=worlds())
def test_applying_the_plan_then_replanning_gives_an_empty_plan(world: World) -> None:
    world.apply(world.plan())
    again = world.plan()
    assert not again.writes, again.writes
    assert not again.deletes
    assert not again.add_finalizer
    assert again.status_patch is None, again.status_patch
    assert again.is_empty


@FAST
@given(world=worlds())
def test_converged_copies_equal_the_source_in_every_writable_target(world: World) -> None:
    actions = world.plan()
    world.apply(actions)
    source = world.configmaps.get(world.source_key)
    outcome = actions.outcome
    if source is None or outcome.blocked is not None:
        return
    assert FINALIZER in world.sync["metadata"]["finalizers"]
    failing = {i.namespace for i in outcome.issues}
    for ns in outcome.targets:
        if ns in failing:
            continue
        assert ns in outcome.synced
        copy_ = world.configmaps[(ns, NAME)]
        assert copy_["metadata"]["labels"][OWNER_LABEL] == UID
        expected = render_copy(world.sync, source, ns)
        assert copy_.get("data") == expected.get("data")
        assert copy_["metadata"]["labels"] == expected["metadata"]["labels"]
        assert copy_.get("immutable") == expected.get("immutable")
    status = world.sync["status"]
    assert status["syncedNamespaces"] + status["failedNamespaces"] == status["targetNamespaces"]


@FAST
@given(world=worlds(deleting=True))
def test_a_deleting_sync_only_removes_or_releases_its_own_copies(world: World) -> None:
    before = copy.deepcopy(world.configmaps)
    actions = world.plan()
    assert not actions.writes
    assert actions.remove_finalizer
    orphan = world.sync["spec"]["deletionPolicy"] == "Orphan"
    assert not (actions.unmarks if not orphan else actions.deletes)
    for record in (*actions.deletes, *actions.unmarks):
        assert owner_uid(before[key_of(record)]) == UID
        assert key_of(record) != world.source_key
    world.apply(actions)
    assert not [
        k for k, o in world.configmaps.items() if owner_uid(o) == UID and k != world.source_key
    ]
    assert world.plan().is_empty
