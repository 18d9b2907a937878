"""What a PodDebugger's requester must still be allowed for the operator to act for them
(:mod:`opsuite_common.requester`): run `kubectl debug` in the namespace, that is patch
``pods/ephemeralcontainers`` there (mode Copy: also create pods there), and get every Secret
and ConfigMap its env reads (``valueFrom``): the kubelet reads those for the container, so
without this check a debug container would show a Secret its requester may not read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opsuite_common.requester import Access, requested_by, requested_by_groups
from poddebugger_operator.models import GROUP
from poddebugger_operator.spec import InvalidSpecError, parse_spec

REQUESTED_BY = requested_by(GROUP)
REQUESTED_BY_GROUPS = requested_by_groups(GROUP)


def needs(debugger: Mapping[str, Any]) -> list[Access]:
    """What the requester of ``debugger`` must still be allowed."""
    namespace = str((debugger.get("metadata") or {}).get("namespace") or "")
    accesses = [Access(namespace, "patch", "pods", "ephemeralcontainers")]
    try:
        spec = parse_spec(debugger)
    except InvalidSpecError:  # nothing is injected for it (InvalidSpec)
        return accesses
    if spec.mode == "Copy":  # the copy is a pod the requester could have created
        accesses.append(Access(namespace, "create", "pods"))
    for var in spec.env or ():
        source = var.value_from
        if source is None:
            continue
        if source.secret_key_ref is not None:
            accesses.append(Access(namespace, "get", "secrets", name=source.secret_key_ref.name))
        if source.config_map_key_ref is not None:
            name = source.config_map_key_ref.name
            accesses.append(Access(namespace, "get", "configmaps", name=name))
    return list(dict.fromkeys(accesses))
