"""Carry out a sync's :class:`~configmapsync_operator.reconcile.Plan` through the API, for
either kind (:class:`~configmapsync_operator.kinds.SyncKind`: the paths, the names in messages).

Order: remove the finalizer of earlier versions (resourceVersion precondition); delete the
immutable (or retyped) copies to be replaced; then create, update and delete copies, all in
parallel (API futures gathered, no tasks); then write the status with the failures of this pass.
The copies of a sync that is gone (or, with that finalizer, going) are deleted or unmarked in
parallel by :func:`release`.

A copy the operator owns is updated with a strategic merge patch of the keys it owns (other
labels and annotations, say a mutating webhook's, are left alone); an object taken over is
written whole (PUT). Every write to a copy carries preconditions (uid and resourceVersion of the
cached record), so an object someone replaced or re-marked meanwhile is never touched: the write
fails with 409 and the next pass decides again from the fresher cache. A failure of a Secret's
write is reported by its HTTP status alone: the API server's answer, which an admission webhook
may fill with the object it refused, is never quoted. Successful writes go through to the cache
at once, unless the watch delivered a newer state for that key meanwhile, so a pass that follows
right after never repeats a create its cache has not seen yet.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from configmapsync_operator.copies import MARK_ANNOTATIONS, MARK_LABELS, key_of
from configmapsync_operator.kinds import CONFIGMAPS, SyncKind
from configmapsync_operator.models import API_VERSION, FINALIZER
from configmapsync_operator.reconcile import Plan, Write
from configmapsync_operator.status import CONFLICT, WRITE_FAILED, Issue, Outcome, status_patch
from opsuite_common.kube import ApiException, KubeApi, gather_results, resource_path
from opsuite_common.store import JSON, Store

log = logging.getLogger(__name__)

_DONE = {"create": "created", "update": "updated", "replace": "replaced"}
RETRY_AFTER_CONFLICT = 1.0
"""Seconds before a pass whose write met a newer object (409) or a vanished one (404) runs
again: by then the watch has delivered the change."""


@dataclass
class Execution:
    """What executing a plan did."""

    outcome: Outcome | None = None
    """The status outcome after the writes (None when the pass stopped early)."""
    written: int = 0
    """Copies created, updated or replaced."""
    deleted: int = 0
    requeue_after: float | None = None
    """Run again soon: a precondition failed (the cache is about to catch up)."""
    failed: bool = False
    """Some write failed for another reason (retry with backoff)."""
    errors: list[str] = field(default_factory=list)


def _api_error(exc: ApiException, kind: SyncKind) -> str:
    """The failure, for status and logs: for confidential kinds its status alone."""
    if kind.confidential:
        return f"{exc.status} {exc.reason}"
    return f"{exc.status} {exc.reason}: {(exc.body or '')[:300]}"


def _object_path(kind: SyncKind, namespace: str, name: str | None = None) -> str:
    return resource_path("v1", kind.resource, namespace, name)


def _write_through(
    cache: Store, key: tuple[str, str], before: Mapping[str, Any] | None, after: JSON | None
) -> None:
    """Record our own write (the API server's answer: the store slims it) in the cache,
    unless the watch replaced ``before`` meanwhile."""
    current = cache.get(*key)
    if current is not before:
        return
    if after is not None:
        cache.apply("MODIFIED", after)
    elif current is not None:
        cache.apply("DELETED", current)


def _delete(kube: KubeApi, record: Mapping[str, Any], kind: SyncKind) -> asyncio.Future[JSON]:
    meta = record["metadata"]
    return kube.delete(
        _object_path(kind, meta["namespace"], meta["name"]),
        preconditions={"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]},
    )


def _unmark(kube: KubeApi, record: Mapping[str, Any], kind: SyncKind) -> asyncio.Future[JSON]:
    meta = record["metadata"]
    patch = {
        "metadata": {
            "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"],
            "labels": dict.fromkeys(MARK_LABELS),
            "annotations": dict.fromkeys(MARK_ANNOTATIONS),
        }
    }
    return kube.patch(_object_path(kind, meta["namespace"], meta["name"]), patch)


async def _patch_finalizers(
    kube: KubeApi, sync: Mapping[str, Any], finalizers: list[str], kind: SyncKind
) -> ApiException | None:
    meta = sync["metadata"]
    path = resource_path(API_VERSION, kind.plural, meta["namespace"], meta["name"])
    patch = {"metadata": {"finalizers": finalizers, "resourceVersion": meta["resourceVersion"]}}
    try:
        await kube.patch(path, patch)
    except ApiException as exc:
        if exc.status in (404, 409):
            return exc
        raise
    return None


async def release(
    kube: KubeApi, cache: Store, plan: Plan, kind: SyncKind = CONFIGMAPS
) -> Execution:
    """Delete ``plan.deletes`` and unmark ``plan.unmarks`` in parallel (the copies of a sync
    of ``kind`` that is going or gone)."""
    records = [*plan.deletes, *plan.unmarks]
    futures = [_delete(kube, r, kind) for r in plan.deletes]
    futures += [_unmark(kube, r, kind) for r in plan.unmarks]
    results = await gather_results(futures)
    execution = Execution()
    released = 0
    for index, (record, result) in enumerate(zip(records, results, strict=True)):
        key = key_of(record)
        if isinstance(result, ApiException):
            if result.status == 404:
                _write_through(cache, key, record, None)
                continue
            execution.errors.append(f"{key[0]}/{key[1]}: {_api_error(result, kind)}")
            if result.status == 409:
                execution.requeue_after = RETRY_AFTER_CONFLICT
            else:
                execution.failed = True
            continue
        unmarked = index >= len(plan.deletes)
        _write_through(cache, key, record, result if unmarked else None)
        execution.deleted += not unmarked
        released += unmarked
        log.debug("%s copy %s/%s", "released" if unmarked else "deleted", *key)
    if execution.deleted or released:
        log.info(
            "copies of a %s that is gone or going: deleted %d, released %d",
            kind.kind,
            execution.deleted,
            released,
        )
    return execution


async def _cleanup(
    kube: KubeApi, cache: Store, sync: Mapping[str, Any], plan: Plan, kind: SyncKind
) -> Execution:
    """Release the copies, then remove the finalizer of earlier versions."""
    execution = await release(kube, cache, plan, kind)
    if execution.errors:
        return execution
    finalizers = [f for f in sync["metadata"].get("finalizers") or () if f != FINALIZER]
    conflict = await _patch_finalizers(kube, sync, finalizers, kind)
    if conflict is not None and conflict.status == 409:
        execution.requeue_after = RETRY_AFTER_CONFLICT
    return execution


def _write_future(kube: KubeApi, write: Write, kind: SyncKind) -> asyncio.Future[JSON]:
    name = write.manifest["metadata"]["name"]
    if write.patch is not None:
        path = _object_path(kind, write.namespace, name)
        return kube.patch(path, write.patch, patch_type="strategic")
    if write.verb == "update":
        path = _object_path(kind, write.namespace, name)
        return kube.request("PUT", path, body=write.manifest)
    return kube.create(_object_path(kind, write.namespace), write.manifest)


def _write_issue(write: Write, exc: ApiException, kind: SyncKind) -> Issue:
    name = write.manifest["metadata"]["name"]
    if exc.status == 409 and write.verb != "update":
        return Issue(
            write.namespace,
            CONFLICT,
            f"{kind.object_kind} {write.namespace}/{name} appeared before the copy could be "
            "created",
        )
    return Issue(write.namespace, WRITE_FAILED, f"{write.verb} failed: {_api_error(exc, kind)}")


async def execute(
    kube: KubeApi,
    cache: Store,
    sync: Mapping[str, Any],
    plan: Plan,
    now: datetime | None = None,
    *,
    on_status: Callable[[JSON], None] | None = None,
    kind: SyncKind = CONFIGMAPS,
) -> Execution:
    """Execute ``plan`` for ``sync``, a sync of ``kind``; writes through to the slim ``cache``
    of the objects it copies, and hands the API server's answer to a status write to
    ``on_status``."""
    if plan.remove_finalizer:
        return await _cleanup(kube, cache, sync, plan, kind)
    if plan.strip_finalizer:
        finalizers = [f for f in sync["metadata"].get("finalizers") or () if f != FINALIZER]
        conflict = await _patch_finalizers(kube, sync, finalizers, kind)
        if conflict is not None:
            # 409: changed meanwhile (its event brings the new version); 404: deleted.
            return Execution(requeue_after=RETRY_AFTER_CONFLICT if conflict.status == 409 else None)
    execution = Execution()
    failures: list[Issue] = []

    # Immutable copies whose data must change: delete first (preconditions), create below.
    replaces = [w for w in plan.writes if w.replace]
    removed = await gather_results(
        [_delete(kube, w.observed, kind) for w in replaces if w.observed]
    )
    blocked: set[str] = set()
    for write, result in zip(replaces, removed, strict=True):
        if isinstance(result, ApiException) and result.status != 404:
            blocked.add(write.namespace)
            failures.append(_write_issue(write, result, kind))
            if result.status == 409:
                execution.requeue_after = RETRY_AFTER_CONFLICT
            continue
        _write_through(
            cache, (write.namespace, write.manifest["metadata"]["name"]), write.observed, None
        )

    writes = [w for w in plan.writes if w.namespace not in blocked]
    futures = [_write_future(kube, w, kind) for w in writes]
    futures += [_delete(kube, r, kind) for r in plan.deletes]
    results = await gather_results(futures)
    for write, result in zip(writes, results[: len(writes)], strict=True):
        key = (write.namespace, write.manifest["metadata"]["name"])
        if isinstance(result, ApiException):
            failures.append(_write_issue(write, result, kind))
            if result.status in (404, 409):
                execution.requeue_after = RETRY_AFTER_CONFLICT
            else:
                execution.failed = True
            error = _api_error(result, kind)
            log.warning("%s of copy %s/%s failed: %s", write.verb, *key, error)
            continue
        _write_through(cache, key, None if write.replace else write.observed, result)
        execution.written += 1
        log.debug("%s copy %s/%s", _DONE[write.verb], *key)
    for record, result in zip(plan.deletes, results[len(writes) :], strict=True):
        key = key_of(record)
        if isinstance(result, ApiException) and result.status != 404:
            execution.errors.append(f"delete {key[0]}/{key[1]}: {_api_error(result, kind)}")
            if result.status == 409:
                execution.requeue_after = RETRY_AFTER_CONFLICT
            else:
                execution.failed = True
            continue
        _write_through(cache, key, record, None)
        execution.deleted += 1
        log.debug("deleted copy %s/%s (no longer a destination)", *key)
    if execution.written or execution.deleted:
        meta = sync["metadata"]
        log.info(
            "%s %s/%s: wrote %d copies, deleted %d",
            kind.kind,
            meta["namespace"],
            meta["name"],
            execution.written,
            execution.deleted,
        )

    execution.outcome = plan.outcome.with_failures(failures)
    if execution.requeue_after is not None:
        return execution  # the next pass, with a fresher cache, writes the status
    patch = status_patch(
        sync, execution.outcome, now or datetime.now(UTC), wrote=execution.written > 0
    )
    if patch is not None:
        meta = sync["metadata"]
        path = resource_path(API_VERSION, kind.plural, meta["namespace"], meta["name"], "status")
        try:
            answer = await kube.patch(path, {"status": patch})
        except ApiException as exc:
            if exc.status != 404:  # deleted meanwhile
                raise
        else:
            if on_status is not None:
                on_status(answer)
    return execution
