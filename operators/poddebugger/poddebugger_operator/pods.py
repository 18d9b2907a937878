"""What a PodDebugger reads of a pod (a cached record): labels, liveness, its ephemeral
containers and their state as the kubelet reports it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from poddebugger_operator.models import MAX_STATE_MESSAGE, MAX_STATE_REASON, DebuggedPod

TERMINATED_PHASES = frozenset({"Succeeded", "Failed"})
STARTING_REASONS = frozenset({"", "ContainerCreating", "PodInitializing"})
"""Waiting reasons of a container on its way up; any other Waiting reason is an error
(CreateContainerConfigError, ErrImagePull, ImagePullBackOff, InvalidImageName...)."""

_EMPTY: Mapping[str, Any] = {}


def object_meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object's metadata (empty when absent or not a mapping)."""
    meta = obj.get("metadata")
    # A plain dict (what the API gives) is checked first: the ABC check is ten times slower.
    return meta if type(meta) is dict or isinstance(meta, Mapping) else _EMPTY


def pod_labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    """The object's labels (empty when absent)."""
    labels = object_meta(obj).get("labels")
    return labels if type(labels) is dict or isinstance(labels, Mapping) else _EMPTY


def injection_may_be_due(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether a pod's change can call for an injection: it is new, or its labels changed.

    Anything else a pod's watch event brings (phase, container states, deletion, a container
    added) can only change the status, which is written at most once per second anyway.
    """
    return old is None or pod_labels(old) != pod_labels(new)


def ephemeral_names(pod: Mapping[str, Any]) -> list[str]:
    """Names of the pod's ephemeral containers."""
    containers = (pod.get("spec") or {}).get("ephemeralContainers") or ()
    return [str(c.get("name")) for c in containers if isinstance(c, Mapping)]


def is_live(pod: Mapping[str, Any]) -> bool:
    """Not terminated and not being deleted."""
    phase = (pod.get("status") or {}).get("phase")
    return phase not in TERMINATED_PHASES and not object_meta(pod).get("deletionTimestamp")


def _text(value: Any, limit: int) -> str | None:
    """``value`` as a string of at most ``limit`` characters; None when empty."""
    return str(value)[:limit] or None if value else None


def container_state(
    pod: Mapping[str, Any], name: str, image: str, original: str | None = None
) -> DebuggedPod:
    """The ephemeral container ``name`` of ``pod`` as the kubelet reports it (Unknown: not
    yet); with ``original`` (mode Copy), the regular container ``name`` of ``pod``, the copy
    of the pod named ``original``."""
    here = str(object_meta(pod)["name"])
    fields: dict[str, Any] = {
        "pod": here if original is None else original,
        "container": name,
        "image": image,
        **({} if original is None else {"copy_pod": here}),
    }
    kind = "ephemeralContainerStatuses" if original is None else "containerStatuses"
    for status in (pod.get("status") or {}).get(kind) or ():
        if not (isinstance(status, Mapping) and status.get("name") == name):
            continue
        state = status.get("state")
        state = state if isinstance(state, Mapping) else _EMPTY
        if "running" in state:
            return DebuggedPod(**fields, state="Running")
        terminated = "terminated" in state  # else waiting; no member set means waiting too
        detail = state.get("terminated" if terminated else "waiting")
        detail = detail if isinstance(detail, Mapping) else _EMPTY
        code = detail.get("exitCode")
        return DebuggedPod(
            **fields,
            state="Terminated" if terminated else "Waiting",
            reason=_text(detail.get("reason"), MAX_STATE_REASON),
            message=_text(detail.get("message"), MAX_STATE_MESSAGE),
            exit_code=code if terminated and type(code) is int else None,
        )
    return DebuggedPod(**fields, state="Unknown")


def failed(entry: DebuggedPod) -> bool:
    """Whether the kubelet gave up on the container: Waiting with an error reason, or
    Terminated with a non-zero exit code."""
    if entry.state == "Waiting":
        return (entry.reason or "") not in STARTING_REASONS
    return entry.state == "Terminated" and entry.exit_code != 0


def up(entry: DebuggedPod) -> bool:
    """Whether the container runs, or ran and exited 0 (a one-shot command that succeeded)."""
    return entry.state == "Running" or (entry.state == "Terminated" and entry.exit_code == 0)


def container_image(pod: Mapping[str, Any], name: str, kind: str = "ephemeralContainers") -> str:
    """The image of the pod's ephemeral container ``name`` (``kind`` containers: a regular
    one) (empty: not there)."""
    for c in (pod.get("spec") or {}).get(kind) or ():
        if isinstance(c, Mapping) and c.get("name") == name:
            return str(c.get("image") or "")
    return ""


def regular_names(pod: Mapping[str, Any]) -> list[str]:
    """Names of the pod's (regular) containers."""
    containers = (pod.get("spec") or {}).get("containers") or ()
    return [str(c.get("name")) for c in containers if isinstance(c, Mapping)]


def container_names(pod: Mapping[str, Any]) -> frozenset[str]:
    """Names of the pod's containers and init containers: those an ephemeral container may
    target (targetContainerName), as the API server checks it."""
    spec = pod.get("spec") or _EMPTY
    return frozenset(
        str(c.get("name"))
        for kind in ("containers", "initContainers")
        for c in spec.get(kind) or ()
        if isinstance(c, Mapping)
    )
