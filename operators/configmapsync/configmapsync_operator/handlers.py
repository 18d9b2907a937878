"""ConfigMapSync and SecretSync wiring: per kind, two watches feed caches and enqueue its syncs
for its controller; one namespace watch serves both.

Per kind (:class:`~configmapsync_operator.kinds.SyncKind`), the ConfigMapSync's described here:

* configmapsyncs: the full objects, indexed by source key, uid, copy name, listed namespaces
  and whether they select namespaces by label;
* configmaps: one watch; every ConfigMap as a slim record (indexed by owner uid and by name),
  and the sources some ConfigMapSync reads in full, within a budget of bytes
  (:class:`~configmapsync_operator.sources.SourceCache`);

and, for both, namespaces: name, labels, deletionTimestamp and the consent annotation
(accept-from). A SecretSync has the same with secretsyncs and Secrets, only when the operator
runs with ``--secrets`` (the chart's ``secrets.enabled``, which grants the rights on Secrets);
without it the operator never watches Secrets and only reports on each SecretSync that it does
not copy them (SecretsNotEnabled).

Events map to sync keys through those indexes: a source change to the syncs reading
it, a copy change to its owner (not the echo of the owner's own write, a version the cache
holds already), any ConfigMap appearing or vanishing to the syncs copying that
name, a namespace appearing, vanishing or relabelled to the syncs listing it and to every
selector-based sync; a ConfigMapSync that is gone (deleted, or a copy marked with a uid no
ConfigMapSync has) to its own key, whose pass ends its copies (:func:`~configmapsync_operator.
reconcile.collect`), and to the syncs copying the same name (they may take a copy over). Nothing
is polled. Event handlers run as events arrive, also during the first listings (kopf hands the
manager's watches their events directly, holding none back); passes start only once every
watch has listed and its listing is in the cache (the manager's cache-sync gate, as
controller-runtime's WaitForCacheSync), so a pass never mistakes a cache still filling for
missing copies or namespaces, and a ConfigMapSync missing from the cache without the watch
having seen it deleted is confirmed gone by a live LIST before its copies are ended.

The caches are :class:`~opsuite_common.store.Store` objects given to ``manager.watch``
(ConfigMaps and namespaces with a ``transform`` that makes their slim record), so the manager
prunes them at the end of every (re)listing: an object deleted while a watch was down (no
DELETED event, a relist after "410 Gone") reaches its handler as a DELETED event, as client-go's
reflector turns it into one, and has the same effects (a pruned source also leaves the
:class:`~configmapsync_operator.sources.SourceCache`).

A pass that would write or delete ConfigMaps first asks whether the sync's recorded requester
may still read the source and write there (:mod:`~configmapsync_operator.requester`, cached
SubjectAccessReviews); one who may not gets nothing done (RequesterNotAllowed).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Hashable
from datetime import UTC, datetime

from configmapsync_operator import metrics
from configmapsync_operator.actions import Execution, execute, release
from configmapsync_operator.copies import is_terminating, key_of, owner_key, owner_uid, slim
from configmapsync_operator.destinations import wants
from configmapsync_operator.disabled import refuse
from configmapsync_operator.kinds import CONFIGMAPS, SECRETS, SyncKind
from configmapsync_operator.models import ACCEPT_FROM_ANNOTATION, API_VERSION, GROUP, VERSION
from configmapsync_operator.reconcile import Plan, collect, plan
from configmapsync_operator.requester import needs
from configmapsync_operator.sources import SourceCache
from configmapsync_operator.spec import (
    has_selector,
    listed_namespaces,
    source_index,
    source_key,
    source_name,
    uid_index,
)
from opsuite_common.controller import Result
from opsuite_common.kube import resource_path
from opsuite_common.manager import Manager, own_namespace
from opsuite_common.requester import RequesterReviews
from opsuite_common.store import JSON, ObjectKey, Store, object_key, status_only


def _owner_index(record: JSON) -> list[Hashable]:
    owner = owner_uid(record)
    return [owner] if owner is not None else []


def _name_index(record: JSON) -> list[Hashable]:
    return [record["metadata"]["name"]]


def _owner_key_index(record: JSON) -> list[Hashable]:
    key = owner_key(record) if owner_uid(record) is not None else None
    return [key] if key is not None else []


def _same_version(old: JSON | None, obj: JSON) -> bool:
    """Whether the cache held ``obj``'s resourceVersion already: the watch's echo of the
    operator's own write, recorded in the cache when the API server answered it."""
    version = obj["metadata"].get("resourceVersion")
    return (
        old is not None
        and version is not None
        and old["metadata"].get("resourceVersion") == version
    )


class _Objects(Store):
    """The slim records of the objects of one kind (ConfigMaps, Secrets). An event for the
    version a record already holds (the watch's echo of the operator's own write, recorded from
    the API server's answer) keeps that record: the same uid and resourceVersion are the same
    object, slimmed once."""

    def apply(self, event_type: str | None, obj: JSON) -> JSON | None:
        """:meth:`Store.apply`, unless the cache holds this very version already."""
        if event_type != "DELETED":
            meta = obj["metadata"]
            held = self.get(meta.get("namespace", ""), meta["name"])
            if (
                held is not None
                and _same_version(held, obj)
                and held["metadata"].get("uid") == meta.get("uid")
            ):
                return held
        return super().apply(event_type, obj)


def _slim_namespace(obj: JSON) -> JSON:
    meta = obj.get("metadata") or {}
    record = {k: meta[k] for k in ("name", "uid", "labels", "deletionTimestamp") if k in meta}
    consent = (meta.get("annotations") or {}).get(ACCEPT_FROM_ANNOTATION)
    if consent is not None:
        record["annotations"] = {ACCEPT_FROM_ANNOTATION: consent}
    return {"metadata": record}


class _LiveOwners:
    """The uids of the cached syncs of one kind, as a container (``uid in live_owners``)."""

    def __init__(self, syncs: Store) -> None:
        self._syncs = syncs

    def __contains__(self, uid: object) -> bool:
        return bool(self._syncs.by_index("uid", uid)) if isinstance(uid, str) else False


def _serve(manager: Manager, kind: SyncKind, namespaces: Store) -> Callable[[str], None]:
    """Register the watches of syncs of ``kind`` and of the objects they copy, and their
    controller, on ``manager``; the callback to call with the name of a namespace that
    appeared, vanished or changed (the namespace watch is shared)."""
    syncs = Store(
        kind.plural,
        {
            "source": functools.partial(source_index, kind=kind),
            "uid": uid_index,
            "name": functools.partial(source_name, kind=kind),
            "listed": listed_namespaces,
            "selector": has_selector,
        },
    )
    objects = _Objects(
        kind.resource,
        {"owner": _owner_index, "name": _name_index, "owner-key": _owner_key_index},
        transform=slim,
    )
    sources = SourceCache()
    pending: dict[ObjectKey, float] = {}
    """Syncs whose source changed: when the change was seen (monotonic seconds)."""
    served = frozenset(manager.options.namespaces)
    own = own_namespace(manager.options)
    recorder = manager.event_recorder()
    reviews = RequesterReviews(manager.kube)
    series = metrics.BY_KIND[kind.kind]
    live_owners = _LiveOwners(syncs)
    departed: dict[str, str] = {}
    """uid -> deletionPolicy of the syncs the watch saw go, until their copies went."""

    async def collect_garbage(key: ObjectKey) -> Result | None:
        """The sync ``key`` is gone: end its copies as its deletion policy says, once
        the watch saw it deleted or a live read confirms that no ConfigMapSync of that uid is
        there (as the garbage collector confirms an owner's absence before deleting
        dependents). A copy that another sync wants is left for it to take over."""

        def wanted(record: JSON) -> bool:
            ns, name = key_of(record)
            where = namespaces.get("", ns)
            return where is not None and any(
                wants(s, where, own) for s in syncs.by_index("name", name)
            )

        orphans = [
            r
            for r in objects.by_index("owner-key", key)
            if owner_uid(r) not in live_owners and not wanted(r)
        ]
        if not orphans:
            return None
        alive: set[str | None] = set()
        if any(owner_uid(r) not in departed for r in orphans):
            # An owner only missing from the cache: a LIST of that one name confirms it is
            # gone (the operator may list, not get, syncs). One the watch saw deleted needs
            # none: a uid never comes back.
            found = await manager.kube.request(
                "GET",
                resource_path(API_VERSION, kind.plural, key[0]),
                query={"fieldSelector": f"metadata.name={key[1]}"},
            )
            alive = {(item.get("metadata") or {}).get("uid") for item in found.get("items") or ()}
        actions = collect([r for r in orphans if owner_uid(r) not in alive], departed)
        if actions.is_empty:
            return None
        done = await release(manager.kube, objects, actions, kind)
        if done.requeue_after is not None:
            return Result(requeue_after=done.requeue_after)
        if done.failed:
            return Result(requeue=True)
        for uid in [u for u in departed if not objects.by_index("owner", u)]:
            del departed[uid]
        return None

    async def reconcile(key: ObjectKey) -> Result | None:
        # Copies marked with this key by a sync that is gone (the one there now, if any, was
        # re-created under the same name) and that no sync wants.
        garbage = await collect_garbage(key)
        sync = syncs.get(*key)
        if sync is None:
            series.forget(key)
            pending.pop(key, None)
            return garbage
        return await sync_pass(key, sync) or garbage

    async def sync_pass(key: ObjectKey, sync: JSON) -> Result | None:
        src = source_key(sync, kind)
        if src is not None and not sources.known(src) and (not served or src[0] in served):
            epoch = sources.epoch(src)
            fetched = await manager.kube.get(resource_path("v1", kind.resource, *src))
            if syncs.by_index("source", src):
                sources.fill(src, fetched, epoch)
        source = sources.get(src) if src is not None else None
        name = src[1] if src is not None else ""
        occupants = {r["metadata"]["namespace"]: r for r in objects.by_index("name", name)}
        in_use = {k for k in ((ns, name) for ns in occupants) if syncs.by_index("source", k)}
        now = datetime.now(UTC)

        def planned(requester: str | None = None) -> Plan:
            return plan(
                sync,
                source,
                namespaces.items(),
                occupants,
                objects.by_index("owner", sync["metadata"]["uid"]),
                now,
                served=served,
                sources_in_use=in_use,
                live_owners=live_owners,
                own_namespace=own,
                requester=requester,
                kind=kind,
            )

        actions = planned()
        if (actions.writes or actions.deletes) and not sync["metadata"].get("deletionTimestamp"):
            refused = await reviews.problem(sync, GROUP, needs(sync, actions, kind), required=False)
            if refused is not None:
                actions = planned(refused)
        outcome = actions.outcome
        if actions.is_empty:
            pending.pop(key, None)
            if not sync["metadata"].get("deletionTimestamp"):
                series.observe_targets(key, len(outcome.synced), len(outcome.issues))
            return None
        done = await execute(
            manager.kube, objects, sync, actions, on_status=syncs.record_write, kind=kind
        )
        record_events(sync, done)
        if done.written and key in pending:
            series.observe_propagation(time.monotonic() - pending[key], done.written)
        if done.outcome is not None:
            series.observe_targets(key, len(done.outcome.synced), len(done.outcome.issues))
        if done.requeue_after is None and not done.failed:
            pending.pop(key, None)  # every copy that could be written was
        if done.requeue_after is not None:
            return Result(requeue_after=done.requeue_after)
        if done.failed:
            return Result(requeue=True)
        return None

    controller = manager.add_controller(kind.kind.lower(), reconcile)

    def record_events(sync: JSON, done: Execution) -> None:
        """Events for writes, and for destinations that newly fail (the status has them all)."""
        if sync["metadata"].get("deletionTimestamp") or done.outcome is None:
            return
        source = done.outcome.source
        if done.written:
            recorder.normal(sync, "Synced", f"wrote {done.written} copies of {source}")
        if done.deleted:
            recorder.normal(
                sync, "CopiesDeleted", f"deleted {done.deleted} copies no longer wanted"
            )
        known = {
            (t.get("namespace"), t.get("reason"))
            for t in (sync.get("status") or {}).get("failedTargets") or ()
        }
        for issue in done.outcome.issues:
            if (issue.namespace, issue.reason) not in known:
                recorder.warning(sync, issue.reason, f"{issue.namespace}: {issue.message}")

    def enqueue_all(items: list[JSON]) -> None:
        for sync in items:
            controller.enqueue(object_key(sync))

    def on_sync(event_type: str | None, obj: JSON, old: JSON | None) -> None:
        if event_type == "MODIFIED" and status_only(old, obj):
            return  # our own status write: the cache now holds it, nothing to plan
        controller.enqueue(object_key(obj))
        if event_type == "DELETED":
            uid = obj["metadata"]["uid"]
            if objects.by_index("owner", uid):
                policy = (obj.get("spec") or {}).get("deletionPolicy")
                departed[uid] = policy if isinstance(policy, str) else "Delete"
            # Its copies are now free for the syncs that want the same places.
            enqueue_all(syncs.by_index("name", (source_key(obj, kind) or ("", ""))[1]))
        previous = source_key(old, kind)
        current = None if event_type == "DELETED" else source_key(obj, kind)
        if previous is not None and previous != current and not syncs.by_index("source", previous):
            sources.forget(previous)

    def on_object(event_type: str | None, obj: JSON, old: JSON | None) -> None:
        """``obj``: the event's object, or the cached record of one a relisting no longer holds
        (``slim`` of a record keeps what a DELETED needs: key, owner, deletionTimestamp)."""
        key = key_of(obj)
        record = (None if event_type == "DELETED" else objects.get(*key)) or slim(obj)
        readers = syncs.by_index("source", key)
        if readers:
            if sources.observe(event_type, obj):
                seen = time.monotonic()
                for sync in readers:
                    pending.setdefault(object_key(sync), seen)
                enqueue_all(readers)
        else:
            sources.forget(key)
        if event_type == "DELETED" or not _same_version(old, obj):
            # Not the echo of a copy's write that the cache already holds: its owner repairs.
            for uid in {owner_uid(record), owner_uid(old)} - {None}:
                enqueue_all(syncs.by_index("uid", uid))
        gone_owner = owner_key(record)
        if (
            event_type != "DELETED"
            and gone_owner is not None
            and owner_uid(record) not in live_owners
            and (not served or gone_owner[0] in served)
        ):
            controller.enqueue(gone_owner)  # a copy whose sync is gone
        appeared_or_vanished = old is None or event_type == "DELETED"
        if (
            appeared_or_vanished
            or owner_uid(old) != owner_uid(record)
            or (is_terminating(record) != is_terminating(old or {}))
        ):
            enqueue_all(syncs.by_index("name", key[1]))

    def namespace_changed(name: str) -> None:
        enqueue_all(syncs.by_index("listed", name))
        enqueue_all(syncs.by_index("selector", True))

    manager.watch(GROUP, VERSION, kind.plural, store=syncs, on_event=on_sync)
    manager.watch("", "v1", kind.resource, store=objects, on_event=on_object)
    return namespace_changed


def setup(manager: Manager, secrets: bool = False, *, secret_crd: bool = True) -> None:
    """Register the watches and one controller per kind on ``manager``: ConfigMapSync, and
    SecretSync when ``secrets`` (the chart's ``secrets.enabled``) lets the operator touch
    Secrets; without it SecretSyncs only get a status saying so. Without ``secret_crd`` (the
    CRD is not installed) nothing watches SecretSyncs."""
    namespaces = Store("namespaces", transform=_slim_namespace)
    listeners = [_serve(manager, CONFIGMAPS, namespaces)]
    if secrets and secret_crd:
        listeners.append(_serve(manager, SECRETS, namespaces))
    elif secret_crd:
        refuse(manager, SECRETS)

    def on_namespace(event_type: str | None, obj: JSON, old: JSON | None) -> None:
        record = _slim_namespace(obj)  # the store's record (idempotent on a record)
        if old is not None and event_type != "DELETED" and old == record:
            return
        for changed in listeners:
            changed(record["metadata"]["name"])

    manager.watch("", "v1", "namespaces", store=namespaces, on_event=on_namespace)
