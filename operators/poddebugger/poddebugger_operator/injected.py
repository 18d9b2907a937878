"""Ephemeral containers this operator added (or is adding) that the watch has not shown yet.

A successful PATCH proves the container is on the pod, but the cache is fed by the watch, and
the watch may still deliver older versions of the pod first (kwok's status updates, the
scheduler's binding, written before the PATCH). A planner reading such a record would add the
container again. Ephemeral containers are add-only, so a record without a container this
operator added is merely stale: :meth:`Injected.fill` puts the container back in, until the
watch shows it (then the entry is dropped) or ``ttl`` seconds have passed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from opsuite_common.store import JSON

TTL = 300.0
"""Seconds an entry is trusted without the watch confirming it (a pod deleted and recreated
with the same uid cannot happen, so this only bounds memory for events that never come)."""


def _uid(record: Mapping[str, Any]) -> str:
    return str((record.get("metadata") or {}).get("uid") or "")


class Injected:
    """Containers added per pod uid, each with the moment it was added."""

    def __init__(self, ttl: float = TTL, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl
        self._clock = clock
        self._pods: dict[str, dict[str, tuple[JSON, float]]] = {}

    def __len__(self) -> int:
        return sum(len(containers) for containers in self._pods.values())

    def add(self, uid: str, container: Mapping[str, Any]) -> None:
        """Remember that ``container`` (name and image suffice) was added to pod ``uid``."""
        entry = {"name": container["name"], "image": container.get("image")}
        self._pods.setdefault(uid, {})[str(container["name"])] = (entry, self._clock())

    def discard(self, uid: str, name: str) -> None:
        """The container ``name`` was not added to pod ``uid`` after all."""
        pending = self._pods.get(uid)
        if pending is not None:
            pending.pop(name, None)
            if not pending:
                del self._pods[uid]

    def forget(self, uid: str) -> None:
        """The pod is gone."""
        self._pods.pop(uid, None)

    def fill(self, record: JSON) -> JSON:
        """``record`` with the containers added to its pod that it does not show yet."""
        uid = _uid(record)
        pending = self._pods.get(uid)
        if not pending:
            return record
        spec = record.get("spec") or {}
        shown = list(spec.get("ephemeralContainers") or ())
        names = {c.get("name") for c in shown}
        expired = self._clock() - self._ttl
        for name in [n for n, (_, added) in pending.items() if n in names or added < expired]:
            del pending[name]
        if not pending:
            del self._pods[uid]
            return record
        missing = [entry for entry, _ in pending.values()]
        return {**record, "spec": {**spec, "ephemeralContainers": [*shown, *missing]}}
