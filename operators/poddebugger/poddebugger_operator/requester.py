"""What a PodDebugger's requester must still be allowed for the operator to act for them
(:mod:`opsuite_common.requester`): run `kubectl debug` in the namespace, that is patch
``pods/ephemeralcontainers`` there."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opsuite_common.requester import Access, requested_by, requested_by_groups
from poddebugger_operator.models import GROUP

REQUESTED_BY = requested_by(GROUP)
REQUESTED_BY_GROUPS = requested_by_groups(GROUP)


def needs(debugger: Mapping[str, Any]) -> list[Access]:
    """What the requester of ``debugger`` must still be allowed."""
    namespace = str((debugger.get("metadata") or {}).get("namespace") or "")
    return [Access(namespace, "patch", "pods", "ephemeralcontainers")]
