"""Read-only predicates over pods as plain API dicts (mirrors k8s pkg/api/v1/pod)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, TypeAlias, TypeGuard

from opsuite_common.conditions import parse_timestamp
from opsuite_common.protofields import Fields

Pod: TypeAlias = Mapping[str, Any]

TEMPLATE_HASH_LABEL = "opsuite.dev/pod-template-hash"
DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
# Same acceptance as k8s helper.GetDeletionCostFromPodAnnotations: no "+", no leading zeros.
_DELETION_COST_RE = re.compile(r"0|-[0-9]+|[1-9][0-9]*")


_EMPTY: Mapping[str, Any] = {}

WATCHED_FIELDS: Fields = {
    "spec": {"nodeName": None, "initContainers": {"name": None, "restartPolicy": None}},
    "status": {
        "phase": None,
        "conditions": {"type": None, "status": None, "lastTransitionTime": None},
        "containerStatuses": {"name": None, "restartCount": None},
        "initContainerStatuses": {"name": None, "restartCount": None},
    },
}
"""What the pod watch decodes besides the common metadata (protofields.OBJECT_META): all
that :func:`slim_pod` and the pod handler read."""


def _is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    """``isinstance(value, Mapping)``, a plain dict (what the API gives) checked first: the
    planner asks this thousands of times per reconcile and the ABC check is ten times slower."""
    return type(value) is dict or isinstance(value, Mapping)


def _section(obj: Pod, key: str) -> Mapping[str, Any]:
    value = obj.get(key)
    return value if _is_mapping(value) else _EMPTY


def metadata(pod: Pod) -> Mapping[str, Any]:
    """The pod's metadata mapping (empty when absent)."""
    return _section(pod, "metadata")


def pod_name(pod: Pod) -> str:
    """The pod's name ("" when absent)."""
    return str(metadata(pod).get("name", ""))


def pod_labels(pod: Pod) -> Mapping[str, str]:
    """The pod's labels (empty when absent)."""
    return _section(metadata(pod), "labels")


def node_name(pod: Pod) -> str:
    """The node the pod is bound to, "" when unscheduled."""
    return str(_section(pod, "spec").get("nodeName") or "")


def phase(pod: Pod) -> str:
    """The pod phase ("" when not reported yet)."""
    return str(_section(pod, "status").get("phase") or "")


def creation_time(pod: Pod) -> datetime | None:
    """metadata.creationTimestamp, None when absent."""
    return parse_timestamp(metadata(pod).get("creationTimestamp"))


def is_terminating(pod: Pod) -> bool:
    """True when the pod has a deletionTimestamp."""
    return metadata(pod).get("deletionTimestamp") is not None


def is_active(pod: Pod) -> bool:
    """Not Succeeded/Failed and not being deleted (k8s controller.IsPodActive)."""
    return phase(pod) not in ("Succeeded", "Failed") and not is_terminating(pod)


def _ready_condition(pod: Pod) -> Mapping[str, Any] | None:
    for condition in _section(pod, "status").get("conditions") or ():
        if _is_mapping(condition) and condition.get("type") == "Ready":
            return condition
    return None


def is_ready(pod: Pod) -> bool:
    """The Ready condition is True."""
    condition = _ready_condition(pod)
    return condition is not None and condition.get("status") == "True"


def ready_since(pod: Pod) -> datetime | None:
    """When a ready pod became ready; None when not ready or the time is unknown."""
    condition = _ready_condition(pod)
    if condition is None or condition.get("status") != "True":
        return None
    return parse_timestamp(condition.get("lastTransitionTime"))


def is_available(pod: Pod, min_ready_seconds: int, now: datetime) -> bool:
    """Ready for at least ``min_ready_seconds`` at ``now`` (k8s podutil.IsPodAvailable)."""
    if not is_ready(pod):
        return False
    if min_ready_seconds == 0:
        return True
    since = ready_since(pod)
    return since is not None and since + timedelta(seconds=min_ready_seconds) <= now


def is_updated(pod: Pod, template_hash: str) -> bool:
    """The pod carries the current template hash label."""
    return pod_labels(pod).get(TEMPLATE_HASH_LABEL) == template_hash


def _max_restart_count(statuses: object, names: frozenset[str] | None = None) -> int:
    if not isinstance(statuses, list | tuple):
        return 0
    counts = [
        int(s.get("restartCount") or 0)
        for s in statuses
        if _is_mapping(s) and (names is None or s.get("name") in names)
    ]
    return max(counts, default=0)


def max_restarts(pod: Pod) -> int:
    """Highest restartCount over the pod's regular containers."""
    return _max_restart_count(_section(pod, "status").get("containerStatuses"))


def sidecar_names(pod: Pod) -> frozenset[str]:
    """Names of the pod's sidecars: init containers with restartPolicy Always."""
    init = _section(pod, "spec").get("initContainers") or ()
    return frozenset(
        str(c.get("name")) for c in init if _is_mapping(c) and c.get("restartPolicy") == "Always"
    )


def max_sidecar_restarts(pod: Pod) -> int:
    """Highest restartCount over the pod's sidecars (k8s maxContainerRestarts' second value)."""
    names = sidecar_names(pod)
    if not names:
        return 0
    return _max_restart_count(_section(pod, "status").get("initContainerStatuses"), names)


def deletion_cost(pod: Pod) -> int:
    """The pod-deletion-cost annotation as int32; 0 when absent or invalid."""
    raw = _section(metadata(pod), "annotations").get(DELETION_COST_ANNOTATION)
    if not isinstance(raw, str) or not _DELETION_COST_RE.fullmatch(raw):
        return 0
    value = int(raw)
    return value if _INT32_MIN <= value <= _INT32_MAX else 0


def controller_ref(pod: Pod) -> Mapping[str, Any] | None:
    """The ownerReference with controller=true, if any."""
    for ref in metadata(pod).get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return ref
    return None


_SLIM_METADATA = (
    "name",
    "namespace",
    "uid",
    "labels",
    "ownerReferences",
    "creationTimestamp",
    "deletionTimestamp",
)


def slim_pod(pod: Pod) -> dict[str, Any]:
    """The fields the functions of this module read, and nothing else: the pod cache's record.

    A pod as the API gives it is 5 to 15 KiB once decoded (most of it the spec and the
    per-container status); the record is a few hundred bytes, and every predicate here gives
    the same answer on it as on the whole pod.
    """
    meta = metadata(pod)
    slim_meta = {k: meta[k] for k in _SLIM_METADATA if k in meta}
    cost = _section(meta, "annotations").get(DELETION_COST_ANNOTATION)
    if cost is not None:
        slim_meta["annotations"] = {DELETION_COST_ANNOTATION: cost}
    status: dict[str, Any] = {}
    if pod_phase := phase(pod):
        status["phase"] = pod_phase
    ready = _ready_condition(pod)
    if ready is not None:
        status["conditions"] = [
            {k: ready[k] for k in ("type", "status", "lastTransitionTime") if k in ready}
        ]
    if restarts := max_restarts(pod):
        status["containerStatuses"] = [{"restartCount": restarts}]
    spec: dict[str, Any] = {}
    if sidecar_restarts := max_sidecar_restarts(pod):
        # One stand-in sidecar carrying the highest count is all the ranking reads.
        status["initContainerStatuses"] = [{"name": "", "restartCount": sidecar_restarts}]
        spec["initContainers"] = [{"name": "", "restartPolicy": "Always"}]
    if node := node_name(pod):
        spec["nodeName"] = node
    return {"metadata": slim_meta, "spec": spec, "status": status}
