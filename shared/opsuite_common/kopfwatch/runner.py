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
    """The watches of one operator, run by kopf: a :class:`~opsuite_common.runnable.Runnable`."""

    def __init__(
        self,
        configuration: Callable[[], Configuration],
        options: ManagerOptions,
        identity: str,
        spawned: Callable[[], None],
    ) -> None:
        """``configuration``: the operator's client configuration at login time. ``spawned`` is
        called once kopf's tasks are spawned: kopf installs its own handlers for SIGTERM and
        SIGINT then, which would stop the watches at once, before the reconciles in hand have
        finished, so the caller puts its own back there."""
        self._registry = kopf.OperatorRegistry()
        self._configuration = configuration
        self._options = options
        self._identity = identity
        self._spawned = spawned
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.started = asyncio.Event()
        """Set once kopf has started."""

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

    async def start(self) -> None:
        """Start kopf (``kopf.operator()``, the signals left to the caller)."""
        self._stop.clear()
        self.started.clear()
        self._task = asyncio.create_task(self._run(), name="kopf")

    async def ended(self) -> None:
        """Return when kopf has ended (stopped, or failed: :meth:`finish` raises then)."""
        assert self._task is not None, "not started"
        await asyncio.wait((self._task,))

    async def finish(self) -> None:
        """Stop kopf through its stop flag and wait until it has; raise what it failed with."""
        assert self._task is not None, "not started"
        self._stop.set()
        await self._task

    async def stop(self) -> None:
        """Stop kopf at once (cancelled)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(self) -> None:
        settings = kopf.OperatorSettings()
        configure_kopf(settings, self._options)
        existing = asyncio.all_tasks()
        namespaces: Sequence[str] = self._options.namespaces
        tasks = await kopf.spawn_tasks(
            registry=self._registry,
            settings=settings,
            standalone=True,
            # Without it kopf asks getpass for the user, and the images' uid 65532 has no
            # passwd entry (KeyError).
            identity=self._identity,  # type: ignore[arg-type]  # a str NewType kopf lacks
            clusterwide=self._options.clusterwide,
            namespaces=namespaces,
            ready_flag=self.started,
            stop_flag=self._stop,
        )
        self._spawned()
        await kopf.run_tasks(tasks, ignored=existing)
