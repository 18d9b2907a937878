"""Carry out a PodDebugger :class:`~poddebugger_operator.reconcile.Plan` through the API.

Every injection is one strategic-merge PATCH of the pod's ``ephemeralcontainers``
subresource adding one container (merge key: its name) after the existing ones, all in
parallel (API futures gathered, no tasks). A repeat of the same patch, from a stale cache,
changes nothing: the container of that name is already there with the same content. Nothing
else of a pod is written. Successful patches go through to the pod cache at once, and stay
there however stale the versions the watch delivers next (:mod:`poddebugger_operator.injected`),
so the next pass never plans the same container again. Then the status is written with the
refusals of this pass.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from opsuite_common.kube import ApiException, KubeApi, gather_results, resource_path
from opsuite_common.status_pacer import StatusPacer
from opsuite_common.store import Store
from poddebugger_operator.injected import Injected
from poddebugger_operator.models import API_VERSION, PLURAL
from poddebugger_operator.reconcile import Failure, Injection, Outcome, Plan, status_patch

log = logging.getLogger(__name__)

JSON = dict[str, Any]
RETRYABLE = frozenset({404, 409, 429})
"""Statuses after which the pass runs again soon (pod replaced, conflict, throttled); 5xx too."""
RETRY_AFTER = 1.0


@dataclass
class Execution:
    """What executing a plan did."""

    outcome: Outcome | None = None
    injected: list[Injection] = field(default_factory=list)
    refused: list[Failure] = field(default_factory=list)
    """Injections the API server rejected (reported, not retried)."""
    requeue_after: float | None = None
    failed: bool = False
    """Some injection failed for a transient reason (retry with backoff)."""


def slim_pod(pod: Mapping[str, Any]) -> JSON:
    """What the planner needs of a pod: identity, labels, phase and ephemeral containers."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    keep = ("name", "namespace", "uid", "labels", "creationTimestamp", "deletionTimestamp")
    return {
        "metadata": {k: meta[k] for k in keep if k in meta},
        "spec": {
            "ephemeralContainers": [
                {"name": c.get("name"), "image": c.get("image")}
                for c in spec.get("ephemeralContainers") or ()
            ]
        },
        "status": {
            "phase": status.get("phase"),
            "ephemeralContainerStatuses": [
                {"name": s.get("name"), "state": s.get("state") or {}}
                for s in status.get("ephemeralContainerStatuses") or ()
            ],
        },
    }


def api_message(exc: ApiException) -> str:
    """The API server's message of an error response (its Status), else the raw body."""
    try:
        body = json.loads(exc.body or "")
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    return f"{exc.status} {exc.reason}: {(exc.body or '')[:300]}"


def _inject(kube: KubeApi, injection: Injection) -> asyncio.Future[JSON]:
    meta = injection.pod["metadata"]
    path = resource_path("v1", "pods", meta["namespace"], meta["name"], "ephemeralcontainers")
    # Without an explicit order, a strategic merge puts the patch's items first.
    order = [
        {"name": c.get("name")}
        for c in (injection.pod.get("spec") or {}).get("ephemeralContainers") or ()
        if c.get("name") != injection.container["name"]
    ]
    order.append({"name": injection.container["name"]})
    patch = {
        "spec": {
            "$setElementOrder/ephemeralContainers": order,
            "ephemeralContainers": [injection.container],
        }
    }
    return kube.patch(path, patch, patch_type="strategic")


async def execute(
    kube: KubeApi,
    pods: Store,
    injected: Injected,
    debugger: Mapping[str, Any],
    plan: Plan,
    pacer: StatusPacer,
    now: datetime | None = None,
) -> Execution:
    """Execute ``plan`` for ``debugger``; added containers go through to the pod cache
    ``pods`` at once and are remembered in ``injected`` until the watch shows them.

    The status is written when ``pacer`` allows, else the execution asks for a pass then;
    refusals are written at once, so that the next pass does not try those pods again."""
    execution = Execution()
    results = await gather_results([_inject(kube, i) for i in plan.injections])
    for injection, result in zip(plan.injections, results, strict=True):
        name = f"{injection.pod['metadata']['namespace']}/{injection.pod_name}"
        container = injection.container["name"]
        if isinstance(result, ApiException):
            log.warning("adding %s to pod %s failed: %s", container, name, api_message(result))
            if result.status in RETRYABLE:
                execution.requeue_after = RETRY_AFTER
            elif result.status >= 500:
                execution.failed = True
            else:
                execution.refused.append(
                    Failure(injection.pod_name, injection.pod_uid, container, api_message(result))
                )
            continue
        injected.add(injection.pod_uid, injection.container)
        cached = pods.get(injection.pod["metadata"]["namespace"], injection.pod_name)
        if cached is not None and cached["metadata"].get("uid") == injection.pod_uid:
            pods.apply("MODIFIED", injected.fill(cached))
        execution.injected.append(injection)
        log.info("added ephemeral container %s to pod %s", container, name)
    execution.outcome = plan.outcome.with_results(execution.injected, execution.refused)
    if execution.requeue_after is not None or execution.failed:
        return execution  # the next pass, with a fresher cache, writes the status
    patch = status_patch(debugger, execution.outcome, now or datetime.now(UTC))
    if patch is None:
        return execution
    key = (debugger["metadata"]["namespace"], debugger["metadata"]["name"])
    delay = pacer.delay(key)
    if delay > 0 and not execution.refused:  # refusals are recorded at once: never retried
        execution.requeue_after = delay
        return execution
    path = resource_path(API_VERSION, PLURAL, *key, "status")
    try:
        await kube.patch(path, {"status": patch})
    except ApiException as exc:
        if exc.status != 404:  # deleted meanwhile
            raise
    pacer.wrote(key)
    return execution
