"""Pod template hashing and rendering of the pod manifests a PodSet creates."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from podset_operator.models import GROUP, KIND, NAME_LABEL, VERSION
from podset_operator.pod_state import TEMPLATE_HASH_LABEL
from podset_operator.spec import ParsedSpec

API_VERSION = f"{GROUP}/{VERSION}"

# The Deployment controller's rand.SafeEncodeString alphabet: no vowels, no confusable 0/1/3.
SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
HASH_LENGTH = 10


def template_hash(template: Mapping[str, Any]) -> str:
    """Stable 10-character hash of the canonical JSON of a pod template (as stored)."""
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


def render_pod(podset: Mapping[str, Any], spec: ParsedSpec, hash_: str) -> dict[str, Any]:
    """The pod manifest to POST for one new replica (like k8s controller.GetPodFromTemplate).

    Labels are the template's, plus NAME_LABEL when the PodSet has no selector of its own,
    plus the template hash; annotations are the template's. Finalizers are never set.
    """
    template_meta = spec.template.metadata
    labels = dict((template_meta.labels if template_meta else None) or {})
    if spec.default_selector:
        labels[NAME_LABEL] = spec.name
    labels[TEMPLATE_HASH_LABEL] = hash_
    metadata: dict[str, Any] = {
        "generateName": f"{spec.name}-",
        "namespace": podset["metadata"]["namespace"],
        "labels": labels,
        "ownerReferences": [owner_reference(podset)],
    }
    if template_meta is not None and template_meta.annotations:
        metadata["annotations"] = dict(template_meta.annotations)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": copy.deepcopy(spec.template.spec),
    }
