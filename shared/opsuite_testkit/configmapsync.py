"""An in-memory cluster for exercising the sync planner (unit and property tests).

Namespaces and full ConfigMaps (or Secrets) as the API server returns them, one sync of either
kind, and
:meth:`World.apply`, which does what the API server would do with a plan whose writes all
succeed (checking their preconditions), so that re-planning shows whether the plan converged.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime

from configmapsync_operator.copies import MARK_ANNOTATIONS, MARK_LABELS, key_of, owner_uid, slim
from configmapsync_operator.kinds import CONFIGMAPS, SyncKind
from configmapsync_operator.models import (
    ACCEPT_FROM_ANNOTATION,
    ALLOWED_NAMESPACES_ANNOTATION,
    FINALIZER,
    OWNER_ANNOTATION,
    OWNER_LABEL,
    SOURCE_ANNOTATION,
)
from configmapsync_operator.reconcile import Plan, plan
from opsuite_common.store import JSON

T0 = datetime(2025, 1, 1, 12, tzinfo=UTC)
UID = "uid-mine"
OTHER_UID = "uid-other"
GONE_UID = "uid-gone"
"""The uid of a ConfigMapSync deleted while the operator was away: no ConfigMapSync has it."""
NAME = "cfg"

_versions = itertools.count(100)


def configmap(
    namespace: str,
    name: str = NAME,
    *,
    data: dict[str, str] | None = None,
    owner: str | None = None,
    immutable: bool = False,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    binary: dict[str, str] | None = None,
    allowed: str | None = None,
) -> JSON:
    """A ConfigMap as the API server returns it; ``allowed``: its consent annotation."""
    meta: JSON = {
        "name": name,
        "namespace": namespace,
        "uid": f"cm-{namespace}-{name}-{next(_versions)}",
        "resourceVersion": str(next(_versions)),
        "labels": dict(labels or {}),
        "annotations": dict(annotations or {}),
    }
    if allowed is not None:
        meta["annotations"][ALLOWED_NAMESPACES_ANNOTATION] = allowed
    if owner is not None:
        meta["labels"][OWNER_LABEL] = owner
        meta["annotations"][OWNER_ANNOTATION] = f"src/other/{owner}"
        meta["annotations"][SOURCE_ANNOTATION] = f"src/{name}"  # a copy of src/<its name>
    obj: JSON = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}
    if data is not None:
        obj["data"] = dict(data)
    if binary:
        obj["binaryData"] = dict(binary)
    if immutable:
        obj["immutable"] = True
    return obj


def secret(
    namespace: str,
    name: str = NAME,
    *,
    type_: str = "Opaque",
    data: dict[str, str] | None = None,
    owner: str | None = None,
    immutable: bool = False,
    allowed: str | None = None,
) -> JSON:
    """A Secret as the API server returns it (``data`` base64-encoded by the caller; never
    ``stringData``, which is write-only); the other arguments as :func:`configmap`'s."""
    obj = configmap(namespace, name, data=data, owner=owner, immutable=immutable, allowed=allowed)
    obj["kind"] = "Secret"
    obj["type"] = type_
    return obj


def namespace(
    name: str,
    labels: dict[str, str] | None = None,
    terminating: bool = False,
    accept: str | None = "*",
) -> JSON:
    """A Namespace record; ``accept``: its accept-from annotation (None: it has none)."""
    meta: JSON = {"name": name, "uid": f"ns-{name}", "labels": dict(labels or {})}
    if terminating:
        meta["deletionTimestamp"] = "2025-01-01T11:00:00Z"
    if accept is not None:
        meta["annotations"] = {ACCEPT_FROM_ANNOTATION: accept}
    return {"metadata": meta}


def sync_object(spec: JSON, *, finalizer: bool = False, deleting: bool = False) -> JSON:
    """The ConfigMapSync under test; ``finalizer``: with the finalizer of earlier versions."""
    meta: JSON = {
        "name": "sync",
        "namespace": "src",
        "uid": UID,
        "generation": 1,
        "resourceVersion": "1",
        "finalizers": [FINALIZER] if finalizer else [],
    }
    if deleting:
        meta["deletionTimestamp"] = "2025-01-01T12:00:00Z"
    return {"metadata": meta, "spec": spec}


def strategic_merge(obj: JSON, patch: JSON) -> JSON:
    """What the API server makes of a copy's strategic merge patch (the subset the planner
    sends: metadata maps merged, null deleting, ``$patch: replace`` maps, scalars set)."""
    result = copy.deepcopy(obj)
    for field_, value in patch.items():
        if field_ == "metadata":
            meta = result["metadata"]
            for key, entries in value.items():
                if isinstance(entries, dict):
                    merged = {**(meta.get(key) or {}), **entries}
                    meta[key] = {k: v for k, v in merged.items() if v is not None}
                else:
                    meta[key] = entries
        elif isinstance(value, dict) and value.get("$patch") == "replace":
            entries = {k: v for k, v in value.items() if k != "$patch"}
            if entries:
                result[field_] = entries
            else:
                result.pop(field_, None)
        else:
            result[field_] = value
    return result


@dataclass
class World:
    """Namespaces by name and ConfigMaps by key; ``sync`` is the ConfigMapSync under test."""

    sync: JSON
    namespaces: dict[str, JSON] = field(default_factory=dict)
    configmaps: dict[tuple[str, str], JSON] = field(default_factory=dict)
    served: tuple[str, ...] = ()
    sources_in_use: frozenset[tuple[str, str]] = frozenset()
    live_owners: frozenset[str] = frozenset({UID, OTHER_UID})
    own_namespace: str | None = None
    kind: SyncKind = CONFIGMAPS
    """The sync's kind; ``configmaps`` holds the objects of the kind it copies."""

    def add(self, obj: JSON) -> JSON:
        self.configmaps[key_of(obj)] = obj
        return obj

    @property
    def source_key(self) -> tuple[str, str]:
        spec = self.sync["spec"]
        return spec.get("sourceNamespace") or self.sync["metadata"]["namespace"], spec[
            self.kind.name_field
        ]

    def plan(self, now: datetime = T0, requester: str | None = None) -> Plan:
        name = self.source_key[1]
        occupants = {ns: slim(obj) for (ns, n), obj in sorted(self.configmaps.items()) if n == name}
        owned = [slim(o) for o in self.configmaps.values() if owner_uid(o) == UID]
        return plan(
            self.sync,
            self.configmaps.get(self.source_key),
            list(self.namespaces.values()),
            occupants,
            owned,
            now,
            served=self.served,
            sources_in_use=self.sources_in_use,
            live_owners=self.live_owners,
            own_namespace=self.own_namespace,
            requester=requester,
            kind=self.kind,
        )

    def apply(self, actions: Plan) -> None:
        """What the API server would do with the plan's writes (all succeeding)."""
        meta = self.sync["metadata"]
        if actions.strip_finalizer:
            meta["finalizers"] = [f for f in meta.get("finalizers", []) if f != FINALIZER]
        for write in actions.writes:
            obj = copy.deepcopy(write.manifest)
            key = key_of(obj)
            existing = self.configmaps.get(key)
            if write.patch is not None:
                assert existing is not None
                obj = strategic_merge(existing, write.patch)
            if write.verb == "update":
                assert existing is not None
                assert obj["metadata"]["resourceVersion"] == existing["metadata"]["resourceVersion"]
                assert obj["metadata"]["uid"] == existing["metadata"]["uid"]
                # the API server's rule for Secrets: the type cannot change
                assert obj.get("type") == existing.get("type"), f"{key}: type changed"
                if existing.get("immutable"):  # the API server's rule for immutable ConfigMaps
                    assert obj.get("immutable") is True, f"{key}: immutable cannot be unset"
                    for field_ in ("data", "binaryData"):
                        # nil and empty maps are the same once stored
                        same = (obj.get(field_) or {}) == (existing.get(field_) or {})
                        assert same, f"{key}: data of an immutable ConfigMap changed"
            elif write.verb == "create":
                assert existing is None, f"create over an existing {key}"
            obj["metadata"]["uid"] = (
                existing["metadata"]["uid"]
                if existing is not None and write.verb == "update"
                else f"cm-new-{next(_versions)}"
            )
            obj["metadata"]["resourceVersion"] = str(next(_versions))
            self.configmaps[key] = obj
        for record in actions.deletes:
            del self.configmaps[key_of(record)]
        for record in actions.unmarks:
            obj = self.configmaps[key_of(record)]
            for mark in MARK_LABELS:
                obj["metadata"]["labels"].pop(mark, None)
            for mark in MARK_ANNOTATIONS:
                obj["metadata"]["annotations"].pop(mark, None)
        if actions.remove_finalizer:
            meta["finalizers"] = [f for f in meta.get("finalizers", []) if f != FINALIZER]
        if actions.status_patch is not None:
            self.sync["status"] = {**self.sync.get("status", {}), **actions.status_patch}


def make_world(
    spec: JSON,
    *names: str,
    own_namespace: str | None = None,
    kind: SyncKind = CONFIGMAPS,
    **sync: bool,
) -> World:
    """A World whose sync of ``kind`` copies ``NAME`` with ``spec``, and the namespaces src and
    ``names`` (accepting copies from anywhere); ``sync``: :func:`sync_object`'s flags."""
    world = World(
        sync_object({kind.name_field: NAME, **spec}, **sync),
        own_namespace=own_namespace,
        kind=kind,
    )
    for ns in ("src", *names):
        world.namespaces[ns] = namespace(ns)
    return world


def converge(world: World, rounds: int = 3) -> None:
    """Apply plans until one is empty; AssertionError when ``rounds`` do not get there."""
    for _ in range(rounds):
        actions = world.plan()
        if actions.is_empty:
            return
        world.apply(actions)
    raise AssertionError(f"not converged: {world.plan()}")


def condition(world: World, type_: str) -> JSON:
    """The sync's condition of ``type_``."""
    return next(c for c in world.sync["status"]["conditions"] if c["type"] == type_)
