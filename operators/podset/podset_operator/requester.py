"""What a PodSet's requester must still be allowed for the operator to create, delete or adopt
pods for them (:mod:`opsuite_common.requester`): create and delete pods in the namespace."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opsuite_common.requester import Access

POD_VERBS = ("create", "delete")
"""What the operator does to pods for a PodSet: create them, and delete them (scaling down,
rolling out, and pods it adopted); the admission policy asks the same."""


def needs(podset: Mapping[str, Any]) -> list[Access]:
    """What the requester of ``podset`` must still be allowed."""
    namespace = str((podset.get("metadata") or {}).get("namespace") or "")
    return [Access(namespace, verb, "pods") for verb in POD_VERBS]
