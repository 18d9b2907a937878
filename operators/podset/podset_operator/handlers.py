"""PodSet wiring: watches feed caches and enqueue PodSets; one controller reconciles them.

Creating is the one action that cannot be taken back cheaply, so the cache is not trusted for
it: when a plan made from the cache would create pods, the PodSet's pods are listed from the
API server (a consistent read) and the plan is made again from that list. A cache that is not
yet filled (the first seconds after a start, when kopf's listing events are still being
processed) or that lags behind therefore never leads to more pods than ``replicas``.
Expectations still keep a PodSet from acting again before its earlier creates and deletes are
observed, so the extra read happens once per scale-up, not once per event.

A plan that creates, deletes or adopts pods is first checked against the PodSet's recorded
requester (:mod:`~podset_operator.requester`, cached SubjectAccessReviews): one who may no
longer create and delete pods there gets nothing done (RequesterNotAllowed).
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

from opsuite_common.controller import Result
from opsuite_common.kube import resource_path
from opsuite_common.manager import Manager
from opsuite_common.requester import RequesterReviews
from opsuite_common.spec_cache import SpecCache
from opsuite_common.store import (
    JSON,
    ObjectKey,
    Store,
    by_controller_uid,
    by_namespace,
    status_only,
)
from podset_operator import metrics
from podset_operator.actions import apply_plan
from podset_operator.event_window import EventWindow
from podset_operator.expectations import Expectations
from podset_operator.models import GROUP, KIND, PLURAL, VERSION
from podset_operator.pod_state import WATCHED_FIELDS, slim_pod
from podset_operator.reconcile import Plan, plan
from podset_operator.requester import needs
from podset_operator.revisions import slim_revision
from podset_operator.spec import InvalidSpecError, parse_spec

CONTROLLER = "podset"
POD_EVENT_WINDOW = 0.1
"""Seconds during which the pod events of one PodSet share a reconcile (see
:mod:`podset_operator.event_window`): a burst of pod events (a scale-up going Running) costs one
reconcile per PodSet and window, not one per event; a PodSet whose reconciles are costly (tens of
thousands of pods) gets a wider window. PodSet events are not delayed."""


def _controller_podset(pod: JSON) -> ObjectKey | None:
    meta = pod.get("metadata", {})
    for ref in meta.get("ownerReferences", []):
        if (
            ref.get("controller")
            and ref.get("kind") == KIND
            and ref.get("apiVersion", "").startswith(GROUP + "/")
        ):
            return meta.get("namespace", ""), ref["name"]
    return None


def _expectation_key(key: ObjectKey) -> str:
    return f"{key[0]}/{key[1]}"


def setup(manager: Manager) -> None:
    """Register the PodSet and pod watches and the PodSet controller on ``manager``."""
    podsets = Store("podsets", {"namespace": by_namespace})
    pods = Store(
        "pods", {"controller": by_controller_uid, "namespace": by_namespace}, transform=slim_pod
    )
    revisions = Store(
        "controllerrevisions", {"controller": by_controller_uid}, transform=slim_revision
    )
    expectations = Expectations()
    specs = SpecCache(parse_spec, InvalidSpecError)
    recorder = manager.event_recorder()
    window = EventWindow(POD_EVENT_WINDOW)
    reviews = RequesterReviews(manager.kube)

    async def live_plan(
        podset: JSON, cached: Plan, cached_pods: list[JSON], now: datetime
    ) -> tuple[Plan, list[JSON]]:
        """The plan made again from the PodSet's pods as the API server lists them now.

        The listing holds the pods matching the selector, so the plan can adopt and delete
        but not release (pods that stopped matching); the next reconcile, from the cache,
        releases them.
        """
        spec = specs.get(podset)
        if spec is None:  # invalid spec: the cached plan creates nothing anyway
            return cached, cached_pods
        selector = spec.selector
        path = resource_path("v1", "pods", podset["metadata"]["namespace"])
        live = await manager.kube.list(path, label_selector=selector.selector_string())
        own = revisions.by_index("controller", podset["metadata"]["uid"])
        return plan(podset, live, now, True, revisions=own), live

    async def reconcile(key: ObjectKey) -> Result | None:
        podset = podsets.get(*key)
        exp_key = _expectation_key(key)
        if podset is None:
            expectations.forget(exp_key)
            metrics.forget(key)
            return None
        now = datetime.now(UTC)
        pending = expectations.pending_for(exp_key, now)
        if pending is not None:
            # Earlier creates or deletes are not all observed yet: the pod event that completes
            # them enqueues the PodSet again (ReplicaSet skips its sync likewise); the record's
            # expiry is the backstop for an event that never comes.
            return Result(requeue_after=pending)
        began = time.process_time()
        namespace_pods = pods.by_index("namespace", key[0])
        own = revisions.by_index("controller", podset["metadata"]["uid"])
        actions = plan(podset, namespace_pods, now, True, revisions=own)
        window.spent(key, time.process_time() - began)
        if actions.pods_to_create or actions.pods_to_delete or actions.pods_to_adopt:
            refused = await reviews.problem(podset, GROUP, needs(podset), required=False)
            if refused is not None:
                actions = plan(podset, namespace_pods, now, True, requester=refused, revisions=own)
        if actions.pods_to_create:
            actions, namespace_pods = await live_plan(podset, actions, namespace_pods, now)
        metrics.observe(key, actions.status)
        if actions.is_empty:
            return None
        failure = await apply_plan(
            manager.kube,
            recorder,
            expectations,
            exp_key,
            podset,
            namespace_pods,
            actions,
            on_status=podsets.record_write,
        )
        if failure is not None:
            return Result(requeue=True)  # retried with the work queue's backoff
        return Result(requeue_after=actions.requeue_after)

    controller = manager.add_controller(CONTROLLER, reconcile)

    def on_podset(event_type: str | None, obj: JSON, old: JSON | None) -> None:
        if event_type == "DELETED":
            specs.forget(obj["metadata"].get("uid", ""))
            window.forget((obj["metadata"]["namespace"], obj["metadata"]["name"]))
        elif event_type == "MODIFIED" and status_only(old, obj):
            return
        controller.enqueue((obj["metadata"]["namespace"], obj["metadata"]["name"]))

    def matching_podsets(pod: JSON) -> list[ObjectKey]:
        """PodSets in the pod's namespace whose selector matches it (adoption candidates)."""
        labels = pod.get("metadata", {}).get("labels") or {}
        keys = []
        for podset in podsets.by_index("namespace", pod["metadata"]["namespace"]):
            spec = specs.get(podset)
            if spec is not None and spec.selector.matches(labels):
                keys.append((podset["metadata"]["namespace"], podset["metadata"]["name"]))
        return keys

    def enqueue_for_pod(key: ObjectKey) -> None:
        controller.enqueue(key, after=window.delay(key, asyncio.get_running_loop().time()))

    def on_pod(event_type: str | None, pod: JSON, old: JSON | None) -> None:
        owner = _controller_podset(pod)
        previous_owner = _controller_podset(old) if old is not None else None
        if owner is not None:
            exp_key = _expectation_key(owner)
            if old is None:
                # First sight: ADDED, a (re)listing after a watch gap, or a DELETED that kopf's
                # batching folded the ADDED into. Counting a pod too many is harmless: creates
                # are checked against a live listing.
                expectations.creation_observed(exp_key)
            if event_type == "DELETED" or pod["metadata"].get("deletionTimestamp"):
                expectations.deletion_observed(exp_key, pod["metadata"]["name"])
            enqueue_for_pod(owner)
        else:
            for key in matching_podsets(pod):
                enqueue_for_pod(key)
        if previous_owner is not None and previous_owner != owner:
            enqueue_for_pod(previous_owner)

    def on_revision(event_type: str | None, obj: JSON, old: JSON | None) -> None:
        owner = _controller_podset(obj)
        if owner is not None:  # e.g. a revision deleted by hand is kept again
            controller.enqueue(owner)

    manager.watch(GROUP, VERSION, PLURAL, store=podsets, on_event=on_podset)
    manager.watch("apps", "v1", "controllerrevisions", store=revisions, on_event=on_revision)
    manager.watch("", "v1", "pods", store=pods, on_event=on_pod, fields=WATCHED_FIELDS)
