"""Mode Copy: a copy of a pod with the debug container added, as ``kubectl debug --copy-to
--share-processes`` makes it.

The copy is a new pod: the original's spec with the debug container appended as a regular
container and every container in one process namespace, off the original's node, without
its probes (kubectl's default without --keep-liveness/readiness/startup) and ephemeral
containers. Its metadata is the operator's alone: none of the original's labels (no Service
or controller selects the copy), annotations or owners; the PodDebugger is its controller
owner (the garbage collector deletes it with the PodDebugger), and :data:`COPY_LABEL` (the
PodDebugger's uid) tells the debugger's copies apart. Its name (:func:`copy_name`) depends on
the debugger's and the pod's names only, so a copy once made is found again and never made
twice, whatever the spec becomes.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Mapping
from typing import Any

from opsuite_common.store import JSON
from poddebugger_operator.models import API_VERSION, GROUP, KIND
from poddebugger_operator.pods import object_meta, pod_labels

COPY_LABEL = f"{GROUP}/copy-of-debugger"
"""On every copy: the uid of the PodDebugger that made it."""
COPY_OF = f"{GROUP}/copy-of"
"""On every copy (annotation): the name of the pod it copies."""
MAX_NAME = 63
HASH_LENGTH = 8
COPY_NAME_TAKEN = "CopyNameTaken"
"""A pod other than this debugger's copy holds the copy's name (mode Copy): nothing is sent,
the pod is reported and takes no maxPods slot, until the name is free."""
SUFFIX = "-debug-"
PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
DROPPED_SPEC = ("nodeName", "ephemeralContainers")
"""What of the original's spec the copy never has: its node (the copy is scheduled anew) and
its ephemeral containers."""


def copy_name(debugger_name: str, pod_name: str) -> str:
    """``<pod name, shortened>-debug-<8 hex digits of the debugger's and pod's names>``, a
    DNS label (at most 63 characters), the same for the same debugger and pod."""
    digest = hashlib.sha256(f"{debugger_name}/{pod_name}".encode()).hexdigest()[:HASH_LENGTH]
    room = MAX_NAME - len(SUFFIX) - HASH_LENGTH
    stem = re.sub(r"[^a-z0-9-]", "-", pod_name.lower())[:room].strip("-") or "pod"
    return f"{stem}{SUFFIX}{digest}"


def is_copy(pod: Mapping[str, Any]) -> bool:
    """Whether ``pod`` is a copy some PodDebugger made (never itself copied or debugged)."""
    return COPY_LABEL in pod_labels(pod)


def copy_of(debugger: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """Whether ``pod`` is a copy made by ``debugger``."""
    return pod_labels(pod).get(COPY_LABEL) == object_meta(debugger).get("uid")


def _container(container: Mapping[str, Any]) -> JSON:
    return {k: v for k, v in container.items() if k not in PROBES}


def copy_meta(debugger: Mapping[str, Any], pod: Mapping[str, Any]) -> JSON:
    """The metadata of ``debugger``'s copy of ``pod``: the operator's alone, nothing of the
    original's but its name in :data:`COPY_OF`."""
    meta = object_meta(debugger)
    original = str(object_meta(pod).get("name"))
    return {
        "name": copy_name(str(meta.get("name")), original),
        "namespace": object_meta(pod).get("namespace"),
        "labels": {COPY_LABEL: str(meta.get("uid"))},
        "annotations": {COPY_OF: original},
        "ownerReferences": [
            {
                "apiVersion": API_VERSION,
                "kind": KIND,
                "name": meta.get("name"),
                "uid": meta.get("uid"),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }


def copy_pod(meta: Mapping[str, Any], pod: Mapping[str, Any], container: JSON) -> JSON:
    """The copy of ``pod`` (the full object) with metadata ``meta`` (:func:`copy_meta`) and
    ``container`` (the debug container, whose securityContext is the profile's alone) added
    last."""
    spec = copy.deepcopy(dict(pod.get("spec") or {}))
    for key in DROPPED_SPEC:
        spec.pop(key, None)
    others = [
        _container(c)
        for c in spec.get("containers") or ()
        if isinstance(c, Mapping) and c.get("name") != container["name"]
    ]
    spec["containers"] = [*others, dict(container)]
    spec["shareProcessNamespace"] = True
    return {"apiVersion": "v1", "kind": "Pod", "metadata": copy.deepcopy(dict(meta)), "spec": spec}


def placeholder(meta: Mapping[str, Any], container: JSON) -> JSON:
    """A cached record of the copy while its creation is in flight, as :func:`slim_pod
    <poddebugger_operator.actions.slim_pod>` would keep it: a pass finds it there and does not
    create it again."""
    keep = {k: meta[k] for k in ("name", "namespace", "labels") if k in meta}
    containers = [{"name": container["name"], "image": container.get("image")}]
    return {"metadata": keep, "spec": {"containers": containers}, "status": {}}
