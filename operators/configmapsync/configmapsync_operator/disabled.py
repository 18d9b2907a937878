"""A kind of sync the operator was started without (a SecretSync without ``--secrets``): its
objects are watched only so that their status says so; what they would copy is never read."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from configmapsync_operator.actions import execute
from configmapsync_operator.kinds import SyncKind
from configmapsync_operator.models import GROUP, VERSION
from configmapsync_operator.reconcile import Plan
from configmapsync_operator.spec import source_key
from configmapsync_operator.status import SECRETS_NOT_ENABLED, Outcome, as_utc, status_patch
from opsuite_common.controller import Result
from opsuite_common.manager import Manager
from opsuite_common.store import JSON, ObjectKey, Store, object_key, status_only


def not_enabled(sync: Mapping[str, Any], now: datetime, kind: SyncKind) -> Plan:
    """The plan for a sync of a ``kind`` the operator was started without (a SecretSync without
    ``--secrets``): nothing read or written but its status, which says why."""
    source = source_key(sync, kind)
    outcome = Outcome(
        source=f"{source[0]}/{source[1]}" if source is not None else "",
        object_kind=kind.object_kind,
        blocked=(
            SECRETS_NOT_ENABLED,
            f"this operator was installed without secrets.enabled; it does not copy "
            f"{kind.resource} (a cluster administrator can enable it: see docs/configmapsync.md)",
        ),
    )
    return Plan(outcome, status_patch=status_patch(sync, outcome, as_utc(now), wrote=False))


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
