"""Carry out a PodSet :class:`~podset_operator.reconcile.Plan` through the API server.

Order, as the ReplicaSet controller: adopt and release (after an uncached check that the
PodSet still exists and is not being deleted), record expectations, create in slow-start
batches (a failed batch skips the rest), delete, then write the status (with Degraded set when
an action failed). Every pod write carries a uid precondition, so a pod replaced under the same
name is never touched by mistake.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from opsuite_common.kube import ApiException, KubeApi, resource_path

from podset_operator.expectations import Expectations
from podset_operator.models import GROUP, PLURAL, VERSION
from podset_operator.reconcile import Plan
from podset_operator.scaling import slow_start_batches
from podset_operator.status import FAILED_CREATE, FAILED_DELETE, Failure, status_patch
from podset_operator.template import owner_reference

log = logging.getLogger(__name__)

JSON = dict[str, Any]


def _api_error(exc: ApiException) -> str:
    return f"{exc.status} {exc.reason}: {(exc.body or '')[:500]}"


async def _adopt_and_release(
    kube: KubeApi, podset: JSON, pods: Mapping[str, JSON], plan: Plan
) -> None:
    meta = podset["metadata"]
    ns = meta["namespace"]
    if plan.pods_to_adopt:
        fresh = await kube.get(resource_path(f"{GROUP}/{VERSION}", PLURAL, ns, meta["name"]))
        if fresh is None or fresh["metadata"]["uid"] != meta["uid"]:
            return
        if fresh["metadata"].get("deletionTimestamp"):
            return
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


async def _create(
    kube: KubeApi, namespace: str, manifest: Mapping[str, Any], count: int
) -> tuple[int, Failure | None]:
    """Create ``count`` pods in slow-start batches; (created, failure of the failed batch)."""
    created = 0
    path = resource_path("v1", "pods", namespace)
    for batch in slow_start_batches(count):
        results = await asyncio.gather(
            *(kube.create(path, manifest) for _ in range(batch)), return_exceptions=True
        )
        errors = [r for r in results if isinstance(r, BaseException)]
        created += batch - len(errors)
        if errors:
            first = errors[0]
            if not isinstance(first, ApiException):
                raise first
            return created, Failure(FAILED_CREATE, _api_error(first))
    return created, None


async def _delete(
    kube: KubeApi, namespace: str, pods: Mapping[str, JSON], names: tuple[str, ...]
) -> list[tuple[str, Failure | None]]:
    """Delete pods by name with uid preconditions; a failure per name (None when fine)."""
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
    for name, result in zip(names, results, strict=True):
        if not isinstance(result, BaseException):
            outcome.append((name, None))
        elif not isinstance(result, ApiException):
            raise result
        elif result.status in (404, 409):  # gone already, or replaced under the same name
            outcome.append((name, None))
        else:
            outcome.append((name, Failure(FAILED_DELETE, _api_error(result))))
    return outcome


async def apply_plan(
    kube: KubeApi,
    expectations: Expectations,
    key: str,
    podset: JSON,
    pods: list[JSON],
    plan: Plan,
) -> Failure | None:
    """Execute ``plan`` for ``podset``; return the failure that stopped it, if any."""
    meta = podset["metadata"]
    ns = meta["namespace"]
    by_name = {p["metadata"]["name"]: p for p in pods}
    await _adopt_and_release(kube, podset, by_name, plan)
    failure: Failure | None = None
    if plan.pods_to_create or plan.pods_to_delete:
        expectations.expect(
            key,
            creates=plan.pods_to_create,
            deletes=plan.pods_to_delete,
            now=datetime.now(UTC),
        )
    if plan.pods_to_create and plan.pod_manifest is not None:
        created, failure = await _create(kube, ns, plan.pod_manifest, plan.pods_to_create)
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
    for name, delete_failure in await _delete(kube, ns, by_name, plan.pods_to_delete):
        if delete_failure is not None:
            expectations.deletion_observed(key, name)
            failure = failure or delete_failure
    patch = plan.status_patch
    if failure is not None:
        patch = status_patch(podset.get("status") or {}, plan.status, failure, datetime.now(UTC))
    if patch is not None:
        path = resource_path(f"{GROUP}/{VERSION}", PLURAL, ns, meta["name"], "status")
        try:
            await kube.patch(path, {"status": patch})
        except ApiException as exc:
            if exc.status != 404:  # deleted meanwhile
                raise
    return failure
