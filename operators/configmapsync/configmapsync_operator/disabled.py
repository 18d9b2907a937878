"""A kind of sync the operator was started without (a SecretSync without ``--secrets``): its
objects are watched only so that their status says so; what they would copy is never read."""

from __future__ import annotations

from datetime import UTC, datetime

from configmapsync_operator.actions import execute
from configmapsync_operator.kinds import SyncKind
from configmapsync_operator.models import GROUP, VERSION
from configmapsync_operator.reconcile import not_enabled
from opsuite_common.controller import Result
from opsuite_common.manager import Manager
from opsuite_common.store import JSON, ObjectKey, Store, object_key, status_only


def refuse(manager: Manager, kind: SyncKind) -> None:
    """Watch syncs of ``kind`` only to say in their status that this operator does not serve
    them (a SecretSync without ``--secrets``); the objects they would copy are never read."""
    syncs = Store(kind.plural, {})

    async def reconcile(key: ObjectKey) -> Result | None:
        sync = syncs.get(*key)
        if sync is None or sync["metadata"].get("deletionTimestamp"):
            return None
        actions = not_enabled(sync, datetime.now(UTC), kind)
        if actions.is_empty:
            return None
        nothing = Store(kind.resource)  # no copy is written
        await execute(manager.kube, nothing, sync, actions, on_status=syncs.record_write, kind=kind)
        return None

    controller = manager.add_controller(kind.kind.lower(), reconcile)

    def on_sync(event_type: str | None, obj: JSON, old: JSON | None) -> None:
        if event_type != "DELETED" and not status_only(old, obj):
            controller.enqueue(object_key(obj))

    manager.watch(GROUP, VERSION, kind.plural, store=syncs, on_event=on_sync)
