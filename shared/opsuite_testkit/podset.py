"""What the PodSet unit tests build on: a clock origin, the PodSet's uid and template, and pods
as the API server returns them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from podset_operator.pod_state import TEMPLATE_HASH_LABEL
from podset_operator.template import template_hash

T0 = datetime(2025, 1, 1, 12, tzinfo=UTC)
"""The tests' now."""
UID = "u-1"
"""The uid of the PodSet ``web``."""
TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {"containers": [{"name": "c", "image": "nginx"}]},
}
HASH = template_hash(TEMPLATE)
"""The pod-template-hash of :data:`TEMPLATE`."""
OLD = "oldoldoldo"
"""The pod-template-hash of an older template."""


def iso(moment: datetime) -> str:
    """``moment`` as the API server writes timestamps."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(
    name: str,
    *,
    hash_: str | None = HASH,
    phase: str = "Running",
    ready: bool = True,
    ready_at: datetime | None = T0 - timedelta(hours=1),
    node: str = "n1",
    owner: str | None = UID,
    labels: dict[str, str] | None = None,
    created: datetime | None = T0 - timedelta(hours=2),
    restarts: int = 0,
    sidecar_restarts: int | None = None,
    cost: str | None = None,
    deleting: bool = False,
) -> dict[str, Any]:
    """A pod of namespace ``ns`` (labelled ``app=web`` unless ``labels`` says otherwise),
    controlled by the PodSet ``web`` of uid ``owner``; ``restarts`` counts the restarts of its
    first container (a second one never restarted); with ``sidecar_restarts``, it has an init
    container (restarted 50 times, which counts for nothing) and a sidecar restarted that often.
    """
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": f"uid-{name}",
        "labels": dict(labels if labels is not None else {"app": "web"}),
    }
    if hash_ is not None:
        meta["labels"][TEMPLATE_HASH_LABEL] = hash_
    if owner is not None:
        meta["ownerReferences"] = [
            {"kind": "PodSet", "name": "web", "uid": owner, "controller": True}
        ]
    if created is not None:
        meta["creationTimestamp"] = iso(created)
    if cost is not None:
        meta["annotations"] = {"controller.kubernetes.io/pod-deletion-cost": cost}
    if deleting:
        meta["deletionTimestamp"] = iso(T0)
    condition: dict[str, Any] = {"type": "Ready", "status": "True" if ready else "False"}
    if ready_at is not None:
        condition["lastTransitionTime"] = iso(ready_at)
    result: dict[str, Any] = {
        "metadata": meta,
        "spec": {"nodeName": node},
        "status": {
            "phase": phase,
            "conditions": [condition],
            "containerStatuses": [{"restartCount": restarts}, {"restartCount": 0}],
        },
    }
    if sidecar_restarts is not None:
        result["spec"]["initContainers"] = [
            {"name": "init", "image": "busybox"},
            {"name": "proxy", "image": "envoy", "restartPolicy": "Always"},
        ]
        result["status"]["initContainerStatuses"] = [
            {"name": "init", "restartCount": 50},
            {"name": "proxy", "restartCount": sidecar_restarts},
        ]
    return result
