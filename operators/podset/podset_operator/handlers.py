"""PodSet wiring: watches feed caches and enqueue PodSets; one controller reconciles them."""

from __future__ import annotations

from datetime import UTC, datetime

from opsuite_common.controller import Result
from opsuite_common.manager import Manager
from opsuite_common.store import JSON, ObjectKey, Store, by_controller_uid, by_namespace

from podset_operator.actions import apply_plan
from podset_operator.expectations import Expectations
from podset_operator.models import GROUP, KIND, PLURAL, VERSION
from podset_operator.reconcile import plan
from podset_operator.spec import InvalidSpecError, parse_spec

CONTROLLER = "podset"


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
    pods = Store("pods", {"controller": by_controller_uid, "namespace": by_namespace})
    expectations = Expectations()

    async def reconcile(key: ObjectKey) -> Result | None:
        podset = podsets.get(*key)
        if podset is None:
            expectations.forget(_expectation_key(key))
            return None
        now = datetime.now(UTC)
        exp_key = _expectation_key(key)
        namespace_pods = pods.by_index("namespace", key[0])
        actions = plan(podset, namespace_pods, now, expectations.satisfied(exp_key, now))
        if actions.is_empty:
            return None
        await apply_plan(manager.kube, expectations, exp_key, podset, namespace_pods, actions)
        return Result(requeue_after=actions.requeue_after)

    controller = manager.add_controller(CONTROLLER, reconcile)

    def on_podset(event_type: str | None, obj: JSON, _old: JSON | None) -> None:
        controller.enqueue((obj["metadata"]["namespace"], obj["metadata"]["name"]))

    def matching_podsets(pod: JSON) -> list[ObjectKey]:
        """PodSets in the pod's namespace whose selector matches it (adoption candidates)."""
        labels = pod.get("metadata", {}).get("labels") or {}
        keys = []
        for podset in podsets.by_index("namespace", pod["metadata"]["namespace"]):
            try:
                selector = parse_spec(podset).selector
            except InvalidSpecError:
                continue
            if selector.matches(labels):
                keys.append((podset["metadata"]["namespace"], podset["metadata"]["name"]))
        return keys

    def on_pod(event_type: str | None, pod: JSON, old: JSON | None) -> None:
        owner = _controller_podset(pod)
        previous_owner = _controller_podset(old) if old is not None else None
        if owner is not None:
            exp_key = _expectation_key(owner)
            if event_type == "ADDED":
                expectations.creation_observed(exp_key)
            elif event_type == "DELETED" or pod["metadata"].get("deletionTimestamp"):
                expectations.deletion_observed(exp_key, pod["metadata"]["name"])
            controller.enqueue(owner)
        else:
            for key in matching_podsets(pod):
                controller.enqueue(key)
        if previous_owner is not None and previous_owner != owner:
            controller.enqueue(previous_owner)

    manager.watch(GROUP, VERSION, PLURAL, store=podsets, on_event=on_podset)
    manager.watch("", "v1", "pods", store=pods, on_event=on_pod)
