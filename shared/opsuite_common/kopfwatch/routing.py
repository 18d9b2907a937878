"""Watch events delivered straight to the operator's handler (see :func:`install_routing`)."""

from __future__ import annotations

import logging

import kopf
from kopf._cogs.aiokits import aiotoggles
from kopf._cogs.clients import watching
from kopf._cogs.structs import references
from kopf._core.reactor import queueing

from opsuite_common.kopfwatch.hooks import WatchHooks
from opsuite_common.kopfwatch.shape import unwrapped, wrapping


def install_routing(hooks: WatchHooks) -> None:
    """Deliver the watch events of the resources ``hooks.route`` routes straight to their
    handler, in order.

    kopf gives every watched object its own worker task and queue, and runs each event through
    cause detection, per-object loggers and its handler machinery before an ``on.event``
    handler sees it: under a burst of pod events, over a third of the operator's CPU, for
    handlers that only update a cache and enqueue a key. For a routed resource, kopf's
    ``queueing.watcher`` is replaced by a loop over kopf's own watch stream (listing,
    reconnects, relists after "410 Gone" and bookmarks stay kopf's) that calls the handler
    for each event as it arrives. A handler error is logged and the stream goes on, as kopf
    does for ``on.event`` handlers. kopf looks the watcher up by module attribute when it
    spawns it (private API; kopf is pinned to 1.45.x and the e2e suite exercises every watch).
    """
    original = unwrapped(queueing.watcher)
    logger = logging.getLogger(__name__)

    async def watcher(
        *,
        namespace: references.Namespace,
        settings: kopf.OperatorSettings,
        resource: references.Resource,
        processor: queueing.WatchStreamProcessor,
        operator_paused: aiotoggles.ToggleSet | None = None,
        operator_indexed: aiotoggles.ToggleSet | None = None,
        resource_indexed: aiotoggles.Toggle | None = None,
    ) -> None:
        deliver = hooks.route(resource.group, resource.plural)
        if deliver is None:
            await original(
                namespace=namespace,
                settings=settings,
                resource=resource,
                processor=processor,
                operator_paused=operator_paused,
                operator_indexed=operator_indexed,
                resource_indexed=resource_indexed,
            )
            return
        stream = watching.infinite_watch(
            settings=settings,
            resource=resource,
            namespace=namespace,
            operator_paused=operator_paused,
        )
        async for raw_event in stream:
            if isinstance(raw_event, watching.Bookmark):
                if operator_indexed is not None and resource_indexed is not None:
                    await operator_indexed.drop_toggle(resource_indexed)
                continue
            if raw_event.get("type") == "BOOKMARK":
                continue
            try:
                deliver(raw_event)
            except Exception:
                logger.exception("%s event handler failed; event ignored", resource.plural)

    queueing.watcher = wrapping(watcher, original)
