"""Carry out a PodSet :class:`~podset_operator.reconcile.Plan` through the API server.

Order, as the ReplicaSet controller: an uncached check that the PodSet still exists and is not
being deleted before adopting or creating (the cache may lag a deletion, see
:func:`_still_current`), adopt and release, keep the template as a ControllerRevision (and trim
the history), record expectations, create with a slow-start
window (a failure stops further creates), delete, then write the status (with Degraded set when
an action failed). Every pod write carries a uid precondition, so a pod replaced under the same
name is never touched by mistake. Creates and deletes are reported as Events on the PodSet
(SuccessfulCreate, FailedCreate, SuccessfulDelete, FailedDelete), as the ReplicaSet controller
reports them; creates and deletes that failed or were never attempted are un-expected, also
when the failure is not an API error (a timeout), so expectations never wait for pods that will
not come.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from opsuite_common.events import EventRecorder
from opsuite_common.kube import ApiException, KubeApi, resource_path
from opsuite_common.store import JSON
from podset_operator.expectations import Expectations
from podset_operator.models import GROUP, PLURAL, VERSION
from podset_operator.reconcile import Plan
from podset_operator.revisions import RevisionWrites, owned_revisions
from podset_operator.scaling import SlowStart
from podset_operator.status import (
    FAILED_CREATE,
    FAILED_DELETE,
    FAILED_REVISION,
    Failure,
    status_patch,
)
from podset_operator.template import owner_reference

log = logging.getLogger(__name__)


SUCCESSFUL_CREATE = "SuccessfulCreate"
SUCCESSFUL_DELETE = "SuccessfulDelete"
MAX_ERROR_LENGTH = 1000


def api_error(exc: ApiException, generate_name: str | None = None) -> str:
    """The API server's message of a failed request (its Status ``message``), else the body.

    With ``generate_name``, the name the server generated for a rejected create is put back
    as the prefix ("Pod "web-" is invalid: ..."), so that retries give the same message: the
    Degraded condition is not rewritten and the Event is counted, not repeated, per attempt.
    """
    body = exc.body or ""
    if isinstance(body, bytes):
        body = body.decode(errors="replace")
    try:
        status = json.loads(body)
    except ValueError:
        status = None
    if not isinstance(status, dict) or not isinstance(status.get("message"), str):
        return f"{exc.status} {exc.reason}: {body}".strip()[:MAX_ERROR_LENGTH]
    message: str = status["message"]
    details = status.get("details")
    generated = details.get("name") if isinstance(details, dict) else None
    if generate_name and isinstance(generated, str) and generated.startswith(generate_name):
        message = message.replace(f'"{generated}"', f'"{generate_name}"')
    return message[:MAX_ERROR_LENGTH]


async def _still_current(kube: KubeApi, podset: JSON) -> bool:
    """An uncached read: the PodSet still exists (same uid) and is not being deleted. The cached
    copy can be stale: after a watch gap the pods watch may report the garbage collector's
    deletions of a deleted PodSet's pods before the PodSets watch reports its deletion (#20)."""
    meta = podset["metadata"]
    path = resource_path(f"{GROUP}/{VERSION}", PLURAL, meta["namespace"], meta["name"])
    fresh = await kube.get(path)
    if fresh is None or fresh["metadata"]["uid"] != meta["uid"]:
        return False
    return not fresh["metadata"].get("deletionTimestamp")


async def _adopt_and_release(
    kube: KubeApi, podset: JSON, pods: Mapping[str, JSON], plan: Plan
) -> None:
    meta = podset["metadata"]
    ns = meta["namespace"]
    if plan.pods_to_adopt:
        ref = owner_reference(podset)
        for name in plan.pods_to_adopt:
            patch = {"metadata": {"ownerReferences": [ref], "uid": pods[name]["metadata"]["uid"]}}
            await _patch_pod(kube, ns, name, patch)
    for name in plan.pods_to_release:
        patch = {
            "metadata": {
                "ownerReferences": [{"$patch": "delete", "uid": meta["uid"]}],
                "uid": pods[name]["metadata"]["uid"],
            }
        }
        await _patch_pod(kube, ns, name, patch)


async def _patch_pod(kube: KubeApi, namespace: str, name: str, patch: JSON) -> None:
    try:
        await kube.patch(
            resource_path("v1", "pods", namespace, name), patch, patch_type="strategic"
        )
    except ApiException as exc:
        if exc.status not in (404, 409, 422):  # gone or replaced meanwhile: next sync decides
            raise


async def _write_revisions(kube: KubeApi, podset: JSON, writes: RevisionWrites) -> Failure | None:
    """Keep the current template as a revision, renumber or trim: see
    :mod:`podset_operator.revisions`. A revision of that name that is the PodSet's already (the
    cache lags a create) is fine; one that is not is a FailedRevision, as is any API error.
    Renumbers and deletes carry the revision's uid as a precondition."""
    ns = podset["metadata"]["namespace"]
    path = resource_path("apps/v1", "controllerrevisions", ns)
    try:
        if writes.create is not None:
            name = writes.create["metadata"]["name"]
            try:
                await kube.create(path, writes.create)
            except ApiException as exc:
                if exc.status != 409:
                    raise
                existing = await kube.get(resource_path("apps/v1", "controllerrevisions", ns, name))
                if existing is None or not owned_revisions([existing], podset["metadata"]["uid"]):
                    message = f"controllerrevision {name} exists and is not this PodSet's"
                    return Failure(FAILED_REVISION, message)
        if writes.renumber is not None:
            name, uid, number = writes.renumber
            patch = {"metadata": {"uid": uid}, "revision": number}
            await kube.patch(resource_path("apps/v1", "controllerrevisions", ns, name), patch)
        for name, uid in writes.delete:
            try:
                await kube.delete(
                    resource_path("apps/v1", "controllerrevisions", ns, name),
                    preconditions={"uid": uid},
                )
            except ApiException as exc:
                if exc.status not in (404, 409):  # gone already, or replaced under that name
                    raise
    except ApiException as exc:
        return Failure(FAILED_REVISION, api_error(exc))
    return None


async def _create(
    kube: KubeApi,
    recorder: EventRecorder,
    podset: JSON,
    manifest: Mapping[str, Any],
    count: int,
) -> tuple[int, Failure | None, BaseException | None]:
    """Create ``count`` pods, as many at once as :class:`SlowStart` allows.

    Returns how many were created, the first failure and, when a failure was not an API
    error (a timeout, a dropped connection), the exception to re-raise once the creates that
    were never attempted are un-expected.
    """
    created = 0
    path = resource_path("v1", "pods", podset["metadata"]["namespace"])
    prefix = manifest.get("metadata", {}).get("generateName")
    window = SlowStart(count)
    pending: set[asyncio.Future[JSON]] = set()
    errors: list[BaseException] = []
    while True:
        issue = window.allowed()
        pending.update(kube.create(path, manifest) for _ in range(issue))
        window.issue(issue)
        if not pending:
            break
        done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        for future in done:
            error = future.exception()
            window.complete(ok=error is None)
            if error is None:
                created += 1
                name = future.result().get("metadata", {}).get("name", "")
                recorder.normal(podset, SUCCESSFUL_CREATE, f"Created pod: {name}")
                continue
            errors.append(error)
            if isinstance(error, ApiException):
                message = api_error(error, prefix)
                recorder.warning(podset, FAILED_CREATE, f"Error creating: {message}")
    if not errors:
        return created, None, None
    unexpected = next((e for e in errors if not isinstance(e, ApiException)), None)
    first = errors[0]
    message = api_error(first, prefix) if isinstance(first, ApiException) else repr(first)
    return created, Failure(FAILED_CREATE, message), unexpected


async def _delete(
    kube: KubeApi,
    recorder: EventRecorder,
    podset: JSON,
    pods: Mapping[str, JSON],
    names: tuple[str, ...],
) -> tuple[list[tuple[str, Failure | None]], BaseException | None]:
    """Delete pods by name with uid preconditions.

    Returns a failure per name (None when fine) and the first error that was not an API error.
    """
    namespace = podset["metadata"]["namespace"]
    results = await asyncio.gather(
        *(
            kube.delete(
                resource_path("v1", "pods", namespace, name),
                preconditions={"uid": pods[name]["metadata"]["uid"]},
            )
            for name in names
        ),
        return_exceptions=True,
    )
    outcome: list[tuple[str, Failure | None]] = []
    unexpected: BaseException | None = None
    for name, result in zip(names, results, strict=True):
        if not isinstance(result, BaseException):
            outcome.append((name, None))
            recorder.normal(podset, SUCCESSFUL_DELETE, f"Deleted pod: {name}")
        elif not isinstance(result, ApiException):
            unexpected = unexpected or result
            outcome.append((name, Failure(FAILED_DELETE, repr(result))))
        elif result.status in (404, 409):  # gone already, or replaced under the same name
            outcome.append((name, None))
        else:
            message = api_error(result)
            recorder.warning(podset, FAILED_DELETE, f"Error deleting: {message}")
            outcome.append((name, Failure(FAILED_DELETE, message)))
    return outcome, unexpected


async def apply_plan(
    kube: KubeApi,
    recorder: EventRecorder,
    expectations: Expectations,
    key: str,
    podset: JSON,
    pods: list[JSON],
    plan: Plan,
    *,
    on_status: Callable[[JSON], None] | None = None,
) -> Failure | None:
    """Execute ``plan`` for ``podset``; return the failure that stopped it, if any. The API
    server's answer to the status write goes to ``on_status``.

    Errors that are not API errors (timeouts, connection failures) are raised, after the
    bookkeeping, so that the controller retries with backoff.
    """
    meta = podset["metadata"]
    ns = meta["namespace"]
    if (plan.pods_to_adopt or plan.pods_to_create) and not await _still_current(kube, podset):
        log.info("PodSet %s is gone or being deleted: nothing adopted or created", key)
        return None
    by_name = {p["metadata"]["name"]: p for p in pods}
    await _adopt_and_release(kube, podset, by_name, plan)
    failure: Failure | None = None
    if not plan.revisions.empty:
        failure = await _write_revisions(kube, podset, plan.revisions)
    unexpected: BaseException | None = None
    if plan.pods_to_create or plan.pods_to_delete:
        expectations.expect(
            key,
            creates=plan.pods_to_create,
            deletes=plan.pods_to_delete,
            now=datetime.now(UTC),
        )
    if plan.pods_to_create and plan.pod_manifest is not None:
        try:
            created, create_failure, unexpected = await _create(
                kube, recorder, podset, plan.pod_manifest, plan.pods_to_create
            )
            failure = failure or create_failure
        except BaseException:
            expectations.creation_observed(key, plan.pods_to_create)  # cancelled: start over
            raise
        skipped = plan.pods_to_create - created
        if skipped:
            expectations.creation_observed(key, skipped)
            log.warning(
                "PodSet %s: %d of %d creates skipped: %s",
                key,
                skipped,
                plan.pods_to_create,
                failure.message if failure else "",
            )
    if plan.pods_to_delete:
        try:
            deleted, delete_error = await _delete(
                kube, recorder, podset, by_name, plan.pods_to_delete
            )
        except BaseException:
            for name in plan.pods_to_delete:
                expectations.deletion_observed(key, name)
            raise
        unexpected = unexpected or delete_error
        for name, delete_failure in deleted:
            if delete_failure is not None:
                expectations.deletion_observed(key, name)
                failure = failure or delete_failure
    if unexpected is not None:
        raise unexpected
    patch = plan.status_patch
    if failure is not None:
        patch = status_patch(podset.get("status") or {}, plan.status, failure, datetime.now(UTC))
    if patch is not None:
        path = resource_path(f"{GROUP}/{VERSION}", PLURAL, ns, meta["name"], "status")
        try:
            answer = await kube.patch(path, {"status": patch})
        except ApiException as exc:
            if exc.status != 404:  # deleted meanwhile
                raise
        else:
            if on_status is not None:
                on_status(answer)
    return failure
