"""What a sync's requester must still be allowed for the operator to write for them
(:mod:`opsuite_common.requester`): read the source, and create, update and delete objects of its
kind (ConfigMaps, Secrets) in every namespace a pass writes or deletes in (what the admission
policy asks at admission)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from configmapsync_operator.kinds import CONFIGMAPS, SyncKind
from configmapsync_operator.reconcile import Plan
from configmapsync_operator.spec import source_key
from opsuite_common.requester import Access

WRITE_VERBS = ("create", "update", "delete")
"""What the operator may do to a ConfigMap in a destination for a ConfigMapSync: create a copy,
update it or take one over, delete it (a withdrawn destination, an immutable copy replaced, the
copies of a deleted ConfigMapSync, one it took over included)."""


def needs(sync: Mapping[str, Any], actions: Plan, kind: SyncKind = CONFIGMAPS) -> list[Access]:
    """What the requester of ``sync``, a sync of ``kind``, must still be allowed for
    ``actions``."""
    needed: list[Access] = []
    source = source_key(sync, kind)
    if source is not None:
        needed.append(Access(source[0], "get", kind.resource, name=source[1]))
    namespaces = {w.namespace for w in actions.writes}
    namespaces.update(str(r["metadata"]["namespace"]) for r in actions.deletes)
    needed += [Access(ns, verb, kind.resource) for ns in sorted(namespaces) for verb in WRITE_VERBS]
    return needed
