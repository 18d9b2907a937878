"""Which of a pod's volumes a debug container may mount (spec.volumeMounts), checked per pod:
the volume must be the pod's own, and must not hold credentials.

A volume holding Secrets or service account tokens (``secret``; ``projected`` with a
``secret`` or ``serviceAccountToken`` source; ``csi``, which is how Secrets Store and vault
drivers deliver secrets) is never mounted: the requester may not be allowed to read those
Secrets, nor to act as the pod's ServiceAccount, and the pod's volume names which Secret only
per pod, after admission. Secrets reach a debug container through env valueFrom secretKeyRef
instead, whose Secret the requester must be allowed to get (:mod:`.requester`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opsuite_common.protofields import Fields
from opsuite_common.store import JSON
from poddebugger_operator.models import VolumeMount

VOLUME_NOT_FOUND = "VolumeNotFound"
"""The pod has no volume of a mount's name: nothing is sent (the API server would refuse it)."""
VOLUME_NOT_ALLOWED = "VolumeNotAllowed"
"""The pod's volume of a mount's name holds Secrets or tokens: nothing is sent."""
CREDENTIAL_KINDS = ("secret", "csi")
"""Kinds of volume that hold credentials."""
CREDENTIAL_SOURCES = frozenset({"secret", "serviceAccountToken"})
"""Sources of a projected volume that make it hold credentials."""


def _volumes(pod: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    volumes = (pod.get("spec") or {}).get("volumes") or ()
    return {str(v.get("name")): v for v in volumes if isinstance(v, Mapping)}


def holds_credentials(volume: Mapping[str, Any]) -> bool:
    """Whether mounting ``volume`` would show Secrets or a service account token."""
    if any(kind in volume for kind in CREDENTIAL_KINDS):
        return True
    projected = volume.get("projected")
    if not isinstance(projected, Mapping):
        return False
    return any(
        isinstance(source, Mapping) and not CREDENTIAL_SOURCES.isdisjoint(source)
        for source in projected.get("sources") or ()
    )


def slim_volume(volume: Mapping[str, Any]) -> JSON:
    """What :func:`holds_credentials` reads of a volume, for the operator's pod cache: its
    name, its credential kinds, a projected volume's credential sources (as empty objects)."""
    slim: JSON = {"name": volume.get("name")}
    slim.update((kind, {}) for kind in CREDENTIAL_KINDS if kind in volume)
    projected = volume.get("projected")
    if isinstance(projected, Mapping):
        sources = projected.get("sources") or ()
        slim["projected"] = {
            "sources": [
                {k: {} for k in sorted(CREDENTIAL_SOURCES) if k in source}
                for source in sources
                if isinstance(source, Mapping)
            ]
        }
    return slim


WATCHED_VOLUME_FIELDS: Fields = {
    "name": None,
    **{kind: {} for kind in CREDENTIAL_KINDS},
    "projected": {"sources": {k: {} for k in sorted(CREDENTIAL_SOURCES)}},
}
"""What the pod watch decodes of a volume: all that :func:`slim_volume` keeps."""


def mount_problem(
    pod: Mapping[str, Any], mounts: Sequence[VolumeMount] | None
) -> tuple[str, str] | None:
    """(reason, message) when ``pod`` cannot take the debug container's ``mounts``."""
    volumes = _volumes(pod)
    for mount in mounts or ():
        volume = volumes.get(mount.name)
        if volume is None:
            return VOLUME_NOT_FOUND, f"the pod has no volume {mount.name} (spec.volumeMounts)"
        if holds_credentials(volume):
            return (
                VOLUME_NOT_ALLOWED,
                f"the pod's volume {mount.name} holds Secrets or service account tokens, "
                "which a debug container never mounts (spec.volumeMounts; use env valueFrom "
                "secretKeyRef for a Secret you may read)",
            )
    return None
