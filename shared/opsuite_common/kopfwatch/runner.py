"""kopf's run loop for one operator: its registry of ``on.event`` handlers, its login with the
operator's own credentials, and kopf's tasks, run until a stop flag with the signals left to the
caller."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import kopf

from opsuite_common.kopfwatch.settings import configure_kopf
from opsuite_common.kubeconfig import BasicAuth, Configuration
from opsuite_common.options import ManagerOptions

Deliver = Callable[[Mapping[str, Any]], None]
"""Takes a raw watch event: ``{"type": ..., "object": ...}``, type None for a listing's."""


async def connection_info(conf: Configuration) -> kopf.ConnectionInfo:
    """kopf's credentials: the same configuration as the operator's own client (one source)."""
    token = await conf.bearer_token()
    basic = conf.credentials if isinstance(conf.credentials, BasicAuth) else None
    return kopf.ConnectionInfo(
        server=conf.host,
        ca_path=conf.ca_file,
        insecure=not conf.verify,
        username=basic.username if basic is not None else None,
        password=basic.password if basic is not None else None,
        scheme="Bearer" if token else None,
        token=token,
        certificate_path=conf.cert_file,
        private_key_path=conf.key_file,
    )


class KopfWatches:
    """The watches of one operator, run by kopf."""

    def __init__(self, configuration: Callable[[], Configuration]) -> None:
        """``configuration``: the operator's client configuration at login time."""
        self._registry = kopf.OperatorRegistry()
        self._configuration = configuration

        async def login(**_: Any) -> kopf.ConnectionInfo:
            return await connection_info(self._configuration())

        kopf.on.login(registry=self._registry)(login)

    def add(self, group: str, version: str, plural: str, deliver: Deliver) -> None:
        """Watch ``plural`` of ``group``/``version`` read-only; its events reach ``deliver``
        through the route :func:`~opsuite_common.kopfwatch.install` puts in kopf's watcher,
        or, without one, through kopf's ``on.event`` handler."""

        async def handler(*, event: kopf.RawEvent, **_: Any) -> None:
            deliver(event)

        kopf.on.event(group, version, plural, registry=self._registry, id=f"watch-{plural}")(
            handler
        )

    async def run(
        self,
        options: ManagerOptions,
        identity: str,
        ready: asyncio.Event,
        stop: asyncio.Event,
        spawned: Callable[[], None],
    ) -> None:
        """``kopf.operator()`` until ``stop`` is set; ``ready`` is set once kopf has started.
        ``spawned`` is called once kopf's tasks are spawned: kopf installs its own handlers for
        SIGTERM and SIGINT then, which would stop the watches at once, before the reconciles in
        hand have finished, so the caller puts its own back there."""
        settings = kopf.OperatorSettings()
        configure_kopf(settings, options)
        existing = asyncio.all_tasks()
        namespaces: Sequence[str] = options.namespaces
        tasks = await kopf.spawn_tasks(
            registry=self._registry,
            settings=settings,
            standalone=True,
            # Without it kopf asks getpass for the user, and the images' uid 65532 has no
            # passwd entry (KeyError).
            identity=identity,  # type: ignore[arg-type]  # a str NewType kopf does not export
            clusterwide=options.clusterwide,
            namespaces=namespaces,
            ready_flag=ready,
            stop_flag=stop,
        )
        spawned()
        await kopf.run_tasks(tasks, ignored=existing)
