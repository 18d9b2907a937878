"""kopf's run loop for one operator, a runnable of its manager (:mod:`opsuite_common.runnable`):
its registry of ``on.event`` handlers, its login with the operator's own credentials, and kopf's
tasks, run until a stop flag with the signals left to the manager."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import kopf

from opsuite_common.credentials import BasicAuth
from opsuite_common.kopfwatch.hooks import Deliver
from opsuite_common.kopfwatch.settings import configure_kopf
from opsuite_common.kubeconfig import Configuration
from opsuite_common.options import ManagerOptions

log = logging.getLogger(__name__)


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
    """The watches of one operator, run by kopf while the process leads: a
    :class:`~opsuite_common.runnable.Runnable`."""

    needs_leader = True

    def __init__(
        self,
        configuration: Callable[[], Configuration],
        options: ManagerOptions,
        identity: str,
        spawned: Callable[[], None],
    ) -> None:
        """``configuration``: the operator's client configuration at login time. ``spawned``
        is called once kopf's tasks are spawned: kopf installs its own handlers for SIGTERM and
        SIGINT then, which would stop the watches at once, before the reconciles in hand have
        finished, so the manager puts its own back there."""
        self._registry = kopf.OperatorRegistry()
        self._configuration = configuration
        self._options = options
        self._identity = identity
        self._spawned = spawned
        self._ready = asyncio.Event()
        self.started = asyncio.Event()
        """Set once kopf's tasks are spawned."""

        async def login(**_: Any) -> kopf.ConnectionInfo:
            return await connection_info(self._configuration())

        kopf.on.login(registry=self._registry)(login)

    @property
    def ready(self) -> bool:
        """Whether kopf has started (its ready flag)."""
        return self._ready.is_set()

    def add(self, group: str, version: str, plural: str, deliver: Deliver) -> None:
        """Watch ``plural`` of ``group``/``version`` read-only; its events reach ``deliver``
        through the route :func:`~opsuite_common.kopfwatch.install` puts in kopf's watcher,
        or, without one, through kopf's ``on.event`` handler."""

        async def handler(*, event: kopf.RawEvent, **_: Any) -> None:
            deliver(event)

        kopf.on.event(group, version, plural, registry=self._registry, id=f"watch-{plural}")(
            handler
        )

    async def run(self, stop: asyncio.Event) -> None:
        """``kopf.operator()`` until ``stop`` is set."""
        settings = kopf.OperatorSettings()
        configure_kopf(settings, self._options)
        ready = asyncio.create_task(self._log_ready(), name="ready")
        existing = asyncio.all_tasks()
        try:
            tasks = await kopf.spawn_tasks(
                registry=self._registry,
                settings=settings,
                standalone=True,
                # Without it kopf asks getpass for the user, and the images' uid 65532 has no
                # passwd entry (KeyError).
                identity=self._identity,  # type: ignore[arg-type]  # a str NewType kopf does not export
                clusterwide=self._options.clusterwide,
                namespaces=self._options.namespaces,
                ready_flag=self._ready,
                stop_flag=stop,
            )
            self._spawned()
            self.started.set()
            await kopf.run_tasks(tasks, ignored=existing)
        finally:
            ready.cancel()

    async def _log_ready(self) -> None:
        await self._ready.wait()
        log.info("kopf started")
