"""Leadership, as runnables of the manager (:mod:`opsuite_common.runnable`): whether the process
leads, and whether it may go on leading.

- :class:`Election`: Lease leader election (:func:`lease_elector`) around the leader's
  runnables.
- :class:`Watchdog`: a watch stream silent past ``watch_dead_after`` makes the leader step down
  (:class:`WatchDead`), as an informer failure ends a controller-runtime manager.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

from opsuite_common import metrics
from opsuite_common.fence import WriteFence
from opsuite_common.kube import KubeApi
from opsuite_common.leader_election import LeaderElectionConfig, LeaderElector
from opsuite_common.lease_api import KubernetesLeaseApi
from opsuite_common.options import ManagerOptions


class WatchDead(Exception):
    """A watch stream stayed silent past watch_dead_after: the leader steps down."""


class Watchdog:
    """Checks every ``period`` seconds whether a watch stream of the leader is dead (``check``
    names them, None: none is) and raises :class:`WatchDead` once one is. Its verdict
    (:attr:`dead`) stands until the process exits, even if the stream came back."""

    needs_leader = True

    def __init__(self, check: Callable[[], str | None], period: float) -> None:
        self._check = check
        self._period = period
        self._dead: str | None = None
        self.started = asyncio.Event()

    @property
    def dead(self) -> str | None:
        """Why the leader stepped down (the dead streams), None while none has died."""
        return self._dead

    async def run(self, stop: asyncio.Event) -> None:
        """Check until ``stop`` is set; raise WatchDead once a stream is dead."""
        self.started.set()
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._period):
                    await stop.wait()
            if stop.is_set():
                return
            self._dead = self._check()
            if self._dead is not None:
                raise WatchDead(self._dead)


class Election:
    """Lease leader election as a runnable: waits for the Lease, then runs ``lead`` while it
    holds it; ``lead`` returns once the ``stop`` given to :meth:`run` is set. Stopped while it
    holds the Lease, ``lead`` steps down by itself and the elector then releases the Lease;
    stopped before, the elector is cancelled (and releases the Lease should a cancelled request
    have won it). Losing the Lease raises LeadershipLost."""

    needs_leader = False

    def __init__(
        self, elector: LeaderElector, lead: Callable[[], Coroutine[Any, Any, None]]
    ) -> None:
        self._elector = elector
        self._lead = lead
        self.started = asyncio.Event()

    async def run(self, stop: asyncio.Event) -> None:
        """Elect, and lead while elected, until ``stop`` is set or the Lease is lost."""
        self.started.set()
        electing = asyncio.create_task(self._elector.run(self._lead), name="electing")
        stopping = asyncio.create_task(stop.wait(), name="stopping")
        try:
            await asyncio.wait((electing, stopping), return_when=asyncio.FIRST_COMPLETED)
            if not self._elector.is_leader:
                electing.cancel()
            await electing
        finally:
            stopping.cancel()


def lease_elector(
    kube: KubeApi, options: ManagerOptions, namespace: str, identity: str, fence: WriteFence
) -> LeaderElector:
    """The elector of the operator's Lease (``--leader-election-id`` in ``namespace``) for
    ``identity``, its leading reported as a metric; it closes ``fence`` the moment leadership
    ends."""
    return LeaderElector(
        KubernetesLeaseApi(kube),
        LeaderElectionConfig(
            name=options.leader_election_id, namespace=namespace, identity=identity
        ),
        on_leading_change=metrics.leader_status_hook(options.leader_election_id),
        fence=fence,
    )
