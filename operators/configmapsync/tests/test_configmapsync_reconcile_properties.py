"""Property tests of the planner over random clusters: safety, idempotence, never the source."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from configmapsync_operator.consent import accepted_sources, accepts, allowed_namespaces, matches
from configmapsync_operator.copies import Allowlist, Desired, content_digest, key_of, owner_uid
from configmapsync_operator.models import (
    FINALIZER,
    OWNER_LABEL,
    ConfigMapSyncSpec,
    ConfigMapSyncStatus,
)
from configmapsync_operator.reconcile import Plan
from configmapsync_operator.spec import parse_spec
from opsuite_packaging.crd import structural_schema
from opsuite_testkit import (
    LABELS,
    from_schema,
    is_dns_label,
    is_dns_subdomain,
    is_qualified_name,
    label_errors,
    schema_errors,
)
from opsuite_testkit.configmapsync import (
    GONE_UID,
    NAME,
    OTHER_UID,
    UID,
    World,
    configmap,
    namespace,
    sync_object,
)

NAMESPACES = ("src", "a", "b", "c", "d", "kube-a")
LISTABLE = (*NAMESPACES, "never")
NAMES = (NAME, "old")
FAST = settings(max_examples=100, deadline=None)

datas = st.dictionaries(st.sampled_from("kxy"), st.sampled_from(["1", "2"]), max_size=2)
binaries = st.dictionaries(
    st.sampled_from(["k", "bin"]), st.sampled_from(["AA==", "AQ=="]), max_size=2
)
key_filters = st.sampled_from(
    [{}, {}, {"includeKeys": ["k"]}, {"includeKeys": ["k", "gone", "b*"]}, {"excludeKeys": ["x*"]}]
)
"""spec.includeKeys or excludeKeys (or neither)."""
labels = st.dictionaries(st.sampled_from(["team", "app"]), st.sampled_from(["x", "y"]), max_size=2)
consents = st.sampled_from([None, None, "*", "a,b", "c*, d", "", "b,nope"])
acceptances = st.sampled_from(["*", "*", "*", None, "src", "s*", "other"])
"""A destination Namespace's sync.opsuite.dev/accept-from annotation (None: absent)."""
"""The source's sync.opsuite.dev/allowed-namespaces annotation (None: absent)."""


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
    copied = draw(st.sampled_from([None, ["team"], ["*"], ["te*", "nothing"]]))
    if copied is not None:
        spec["copyLabels"] = copied
    excluded = draw(st.sampled_from([None, ["b"], ["c*", "nope"], ["a", "d*"]]))
    if excluded is not None and not set(excluded) & set(listed):
        spec["excludeNamespaces"] = excluded
    spec.update(draw(key_filters))
    return spec


def allowlist(world: World) -> Allowlist:
    spec = world.sync["spec"]
    return Allowlist(tuple(spec.get("copyLabels") or ()), tuple(spec.get("copyAnnotations") or ()))


def selected(world: World, entries: dict[str, str]) -> dict[str, str]:
    """The entries of a content map that the spec's includeKeys or excludeKeys select."""
    spec = world.sync["spec"]
    include, exclude = spec.get("includeKeys"), spec.get("excludeKeys") or ()
    return {
        k: v
        for k, v in entries.items()
        if (include is None or matches(include, k)) and not matches(exclude, k)
    }


def allows(world: World, namespace: str) -> bool:
    """Whether the source (present) allows copies in ``namespace``."""
    patterns = allowed_namespaces(world.configmaps[world.source_key])
    return patterns is not None and matches(patterns, namespace)


@st.composite
def worlds(draw: st.DrawFn, deleting: bool = False) -> World:
    world = World(
        sync_object(draw(specs()), finalizer=draw(st.booleans()) or deleting, deleting=deleting)
    )
    for ns in NAMESPACES:
        if ns == "src" or draw(st.integers(0, 5)) > 0:
            terminating = ns != "src" and draw(st.integers(0, 8)) == 0
            world.namespaces[ns] = namespace(ns, draw(labels), terminating, draw(acceptances))
    source = world.source_key
    for ns in NAMESPACES:
        for name in NAMES:
            kind = draw(
                st.sampled_from(["none", "none", "unowned", "mine", "mine", "other", "gone"])
            )
            if (ns, name) == source:
                kind = draw(st.sampled_from(["none", "unowned", "unowned", "other"]))
            if kind == "none":
                continue
            world.add(
                configmap(
                    ns,
                    name,
                    data=draw(datas),
                    binary=draw(binaries),
                    owner={"unowned": None, "mine": UID, "other": OTHER_UID, "gone": GONE_UID}[
                        kind
                    ],
                    immutable=draw(st.integers(0, 3)) == 0,
                    labels=draw(labels),
                    allowed=draw(consents),
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
        assert owner in (UID, None, GONE_UID), f"wrote over a copy of another sync at {key}"
        if owner != UID:
            assert policy == "Overwrite" or owner == GONE_UID, f"Skip but took over {key}"
            assert key not in world.sources_in_use
            assert write.patch is None, "a take-over writes the whole copy"
        assert write.observed is not None
        assert (
            write.observed["metadata"]["resourceVersion"]
            == (existing["metadata"]["resourceVersion"])
        )
    for record in (*actions.deletes, *actions.unmarks):
        assert owner_uid(before[key_of(record)]) == UID


@FAST
@given(world=worlds())
def test_nothing_is_written_where_the_source_does_not_allow_and_consent_is_checked(
    world: World,
) -> None:
    """Consent: every write goes to a namespace the source's annotation allows; a target it
    does not allow is reported; copies are deleted for a narrowed consent, never for a missing
    one (copies written before the upgrade stay)."""
    actions = world.plan()
    for write in actions.writes:
        assert allows(world, write.namespace), write
    if world.source_key not in world.configmaps or actions.outcome.blocked is not None:
        return
    refused = {i.namespace for i in actions.outcome.issues if i.reason == "NotAllowedBySource"}
    assert not any(allows(world, ns) for ns in refused)
    assert all(allows(world, ns) for ns in actions.outcome.synced)
    assert not any(ns in actions.outcome.synced for ns in refused)
    if allowed_namespaces(world.configmaps[world.source_key]) is None:
        deleted = {key_of(r)[0] for r in actions.deletes if key_of(r)[1] == NAME}
        assert not deleted & refused


@FAST
@given(world=worlds())
def test_nothing_is_written_where_the_namespace_does_not_accept_the_source(
    world: World,
) -> None:
    """Consent of the destination (#31, item 1): every write goes to a namespace whose
    Namespace accepts the source's namespace, whatever the source allows and conflictPolicy
    says; a copy in a namespace without the annotation is never deleted (kept, frozen)."""
    actions = world.plan()
    source_namespace = world.source_key[0]
    for write in actions.writes:
        assert accepts(world.namespaces[write.namespace], source_namespace, None), write
    source = world.configmaps.get(world.source_key)
    for record in actions.deletes:
        ns, name = key_of(record)
        where = world.namespaces.get(ns)
        if where is None or name != world.source_key[1] or accepted_sources(where) is not None:
            continue
        source_refuses = (
            source is not None and allowed_namespaces(source) is not None and not allows(world, ns)
        )
        assert source_refuses or not _wanted(world, where), record


def _wanted(world: World, namespace: dict[str, Any]) -> bool:
    """Whether the sync lists or selects ``namespace`` and does not exclude it (whatever consent
    says); a selector never selects ``kube-*``."""
    spec = parse_spec(world.sync)
    name = namespace["metadata"]["name"]
    selector = spec.namespace_selector
    selected = (
        selector is not None
        and not name.startswith("kube-")
        and selector.matches(namespace["metadata"].get("labels", {}))
    )
    excluded = matches(spec.exclude_namespaces or (), name)
    return not excluded and (name in (spec.destination_namespaces or ()) or selected)


@FAST
@given(world=worlds(), foreign=st.sampled_from(["policy.example/injected", "app"]))
def test_keys_added_by_a_co_writer_cause_no_write_and_stay(world: World, foreign: str) -> None:
    """A mutating webhook labelling every copy causes no write (no write loop), and later
    updates of the copies leave its label in place (#16, item 3)."""
    world.apply(world.plan())
    assume(not matches(allowlist(world).labels, foreign))
    mine = [k for k, o in world.configmaps.items() if owner_uid(o) == UID]
    for key in mine:
        world.configmaps[key]["metadata"]["labels"][foreign] = "injected"
    assert world.plan().is_empty
    source = world.configmaps.get(world.source_key)
    if source is None:
        return
    source["data"] = {"changed": "yes"}
    again = world.plan()
    for write in again.writes:
        assert write.patch is None or foreign not in write.patch["metadata"].get("labels", {})
    world.apply(again)
    for write in again.writes:
        if write.patch is not None:
            obj = world.configmaps[(write.namespace, NAME)]
            assert obj["metadata"]["labels"][foreign] == "injected"


@FAST
@given(world=worlds())
def test_never_targets_the_source(world: World) -> None:
    actions = world.plan()
    assert world.source_key not in touched_keys(actions)
    assert world.source_key[0] not in {w.namespace for w in actions.writes}
    if world.sync["spec"]["conflictPolicy"] == "Skip":
        for write in actions.writes:
            assert write.observed is None or owner_uid(write.observed) in (UID, GONE_UID)


@FAST
@given(world=worlds())
def test_applying_the_plan_then_replanning_gives_an_empty_plan(world: World) -> None:
    world.apply(world.plan())
    again = world.plan()
    assert not again.writes, again.writes
    assert not again.deletes
    assert not again.strip_finalizer
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
    assert FINALIZER not in world.sync["metadata"]["finalizers"]
    failing = {i.namespace for i in outcome.issues}
    for ns in outcome.targets:
        if ns in failing:
            continue
        assert ns in outcome.synced
        copy_ = world.configmaps[(ns, NAME)]
        assert copy_["metadata"]["labels"][OWNER_LABEL] == UID
        allow = allowlist(world)
        expected = Desired(world.sync, source, allow).manifest(ns)
        for field in ("data", "binaryData"):
            assert (copy_.get(field) or {}) == selected(world, source.get(field) or {})
        labels_ = copy_["metadata"]["labels"]
        assert labels_.items() >= expected["metadata"]["labels"].items()
        foreign = labels_.keys() - expected["metadata"]["labels"].keys()
        assert not any(matches(allow.labels, k) for k in foreign), foreign
        assert copy_.get("immutable") == expected.get("immutable")
    status = world.sync["status"]
    assert status["syncedNamespaces"] + status["failedNamespaces"] == status["targetNamespaces"]


@FAST
@given(world=worlds())
def test_excluded_and_unlisted_protected_namespaces_get_nothing_written(world: World) -> None:
    """Exclusions win over the list and the selector, a selector never reaches ``kube-*``, and
    in such a namespace only this sync's own copy is ever deleted (nothing else touched)."""
    spec = world.sync["spec"]
    before = copy.deepcopy(world.configmaps)
    actions = world.plan()
    listed = spec.get("destinationNamespaces") or ()
    for write in actions.writes:
        assert not matches(spec.get("excludeNamespaces") or (), write.namespace)
        assert not write.namespace.startswith("kube-") or write.namespace in listed
    for record in (*actions.deletes, *actions.unmarks):
        assert owner_uid(before[key_of(record)]) == UID
    world.apply(actions)
    for (ns, name), obj in world.configmaps.items():
        if (
            matches(spec.get("excludeNamespaces") or (), ns)
            and owner_uid(before.get((ns, name))) != UID
        ):
            assert obj == before[(ns, name)]


@FAST
@given(world=worlds())
def test_keys_the_source_lacks_are_exactly_the_named_includes_it_lacks(world: World) -> None:
    actions = world.plan()
    source = world.configmaps.get(world.source_key)
    outcome = actions.outcome
    assume(source is not None and outcome.blocked is None)
    assert source is not None
    present = {*(source.get("data") or {}), *(source.get("binaryData") or {})}
    named = [k for k in world.sync["spec"].get("includeKeys") or () if "*" not in k]
    assert outcome.missing_keys == tuple(k for k in named if k not in present)


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


# --- any spec the CRD schema admits: no exception, only requests the API accepts -----------

SYNC_SPECS = from_schema(structural_schema(ConfigMapSyncSpec))
STATUS_SCHEMA = structural_schema(ConfigMapSyncStatus)
CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]{1,253}$")
MAX_ANNOTATIONS_BYTES = 256 * 1024


@st.composite
def schema_worlds(draw: st.DrawFn) -> World:
    """A ConfigMapSync with any spec the schema admits (CEL aside), its listed namespaces
    mostly present, selectable namespaces and a source with valid labels and annotations."""
    spec = draw(SYNC_SPECS)
    world = World(sync_object(spec, finalizer=draw(st.booleans()), deleting=draw(st.booleans())))
    if draw(st.booleans()):
        world.sync["status"] = draw(from_schema(STATUS_SCHEMA))
    for ns in [*spec.get("destinationNamespaces", []), *NAMESPACES]:
        if draw(st.integers(0, 3)):
            world.namespaces[ns] = namespace(ns, draw(LABELS))
    source_ns, name = world.source_key
    world.namespaces.setdefault(source_ns, namespace(source_ns))
    if draw(st.integers(0, 3)):
        world.add(
            configmap(
                source_ns,
                name,
                data=draw(st.dictionaries(st.from_regex(CONFIG_KEY, fullmatch=True), st.text())),
                labels=draw(LABELS),
                annotations=draw(LABELS),
                immutable=draw(st.booleans()),
                allowed=draw(st.none() | st.just("*")),
            )
        )
    return world


@settings(max_examples=200, deadline=None)
@given(world=schema_worlds())
def test_any_admitted_spec_plans_only_valid_requests(world: World) -> None:
    """Every copy written is a valid ConfigMap (names, labels, annotation keys and size, data
    keys) in a valid namespace; the status after the merge patch fits the CRD."""
    actions = world.plan()
    for write in actions.writes:
        copy_ = write.manifest
        meta = copy_["metadata"]
        assert (copy_["apiVersion"], copy_["kind"]) == ("v1", "ConfigMap")
        assert is_dns_subdomain(meta["name"])
        assert is_dns_label(write.namespace)
        assert meta["namespace"] == write.namespace
        assert not label_errors(meta["labels"]), label_errors(meta["labels"])
        annotations = meta["annotations"]
        assert all(is_qualified_name(k) and isinstance(v, str) for k, v in annotations.items())
        assert len(json.dumps(annotations)) <= MAX_ANNOTATIONS_BYTES
        assert all(CONFIG_KEY.fullmatch(k) for k in copy_.get("data", {}))
        assert write.verb == "create" or (write.patch or copy_)["metadata"].get("resourceVersion")
    if actions.status_patch is not None:
        status = {**world.sync.get("status", {}), **actions.status_patch}
        assert not schema_errors(status, STATUS_SCHEMA, ".status"), status


@given(
    data=st.dictionaries(st.text(max_size=8), st.text(max_size=40), max_size=6),
    binary=st.dictionaries(st.text(max_size=8), st.text(max_size=20), max_size=3),
)
def test_a_content_digest_is_the_sha256_of_the_canonical_json(
    data: dict[str, str], binary: dict[str, str]
) -> None:
    """The digests are taken with orjson (#19): the same bytes as the standard library's
    sorted, compact, non-ASCII-keeping JSON, whatever the keys and values."""
    canonical = json.dumps(
        [data, binary], sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    expected = hashlib.sha256(canonical.encode()).hexdigest()[:32]
    assert content_digest({"data": data, "binaryData": binary}) == expected
