"""Pod template hashing and rendering of the pod manifests a PodSet creates."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from podset_operator.pod_state import TEMPLATE_HASH_LABEL
from podset_operator.spec import PodSetSpec

API_VERSION = "apps.opsuite.dev/v1alpha1"
KIND = "PodSet"

# The Deployment controller's rand.SafeEncodeString alphabet: no vowels, no confusable 0/1/3.
SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
HASH_LENGTH = 10


def template_hash(template: Mapping[str, Any]) -> str:
    """Stable 10-character hash of the canonical JSON of a pod template."""
    canonical = json.dumps(template, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    value = int.from_bytes(hashlib.sha256(canonical.encode()).digest()[:8], "big")
    chars = []
    for _ in range(HASH_LENGTH):
        value, index = divmod(value, len(SAFE_ALPHABET))
        chars.append(SAFE_ALPHABET[index])
    return "".join(chars)


def owner_reference(podset: Mapping[str, Any]) -> dict[str, Any]:
    """The controller ownerReference pointing at ``podset``."""
    meta = podset["metadata"]
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def render_pod(podset: Mapping[str, Any], spec: PodSetSpec, hash_: str) -> dict[str, Any]:
    """The pod manifest to POST for one new replica (like k8s controller.GetPodFromTemplate)."""
    template_meta: Mapping[str, Any] = spec.template.get("metadata") or {}
    labels = {**template_meta.get("labels", {}), **spec.selector.match_labels}
    labels[TEMPLATE_HASH_LABEL] = hash_
    metadata: dict[str, Any] = {
        "generateName": f"{podset['metadata']['name']}-",
        "namespace": podset["metadata"]["namespace"],
        "labels": labels,
        "ownerReferences": [owner_reference(podset)],
    }
    for key in ("annotations", "finalizers"):
        if template_meta.get(key):
            metadata[key] = copy.deepcopy(template_meta[key])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": copy.deepcopy(spec.template.get("spec") or {}),
    }
