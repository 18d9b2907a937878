"""One start-up path for every operator: what controller-runtime's manager is to a Go operator.

``run_operator`` parses the common flags, sets up logging, the Kubernetes client, the metrics
and health endpoints and (with ``--leader-elect``) Lease leader election, then lets the operator
wire its watches and controllers onto a :class:`Manager` and runs them: kopf as the watch layer,
opsuite controllers as the reconcile loops. Only the leader runs them; a standby keeps its
probes answering (ready) and waits for the Lease. Losing the Lease exits the process (status 1)
so the Deployment restarts it. SIGTERM (or SIGINT) makes the leader step down: it takes no new
work, lets the reconciles in hand finish (for up to ``RECONCILE_GRACE``), stops the watches,
releases the Lease and exits 0; the manager, not kopf, handles these signals. Only the leader
writes: its :class:`~opsuite_common.fence.WriteFence` opens when it
starts leading and closes the moment leadership ends. A watch stream that stays dead (silent
for ``watch_dead_after(--watch-timeout)``) fails ``/healthz`` and makes the leader step down, as
an informer failure ends a controller-runtime manager: it stops, releases the Lease and exits 1.

What the process runs are runnables (:mod:`opsuite_common.runnable`), started and stopped alike:
the metrics and probes servers (:mod:`.servers`) from start to exit, and while leading the
watchdog (:mod:`.leading`), the controllers and kopf's watches (:mod:`.kopfwatch`), with the
leader elector (:class:`~opsuite_common.leading.Election`) deciding when.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, NoReturn

from opsuite_common import kopfwatch, protowatch, servers
from opsuite_common.caches import Caches, EventHandler
from opsuite_common.controller import Controller, Controllers, Reconciler
from opsuite_common.events import EventRecorder
from opsuite_common.fence import WriteFence
from opsuite_common.kopfwatch.activity import WatchActivity
from opsuite_common.kopfwatch.hooks import Deliver
from opsuite_common.kopfwatch.runner import KopfWatches
from opsuite_common.kopfwatch.settings import watch_dead_after
from opsuite_common.kube import EVENT_WRITERS, KubeApi
from opsuite_common.kube_transport import bound_tls_read_buffers
from opsuite_common.kubeconfig import load_configuration
from opsuite_common.leader_election import LeadershipLost, default_identity
from opsuite_common.leading import Election, WatchDead, Watchdog, lease_elector
from opsuite_common.logs import configure_logging
from opsuite_common.metrics import STALE_WATCH_STREAMS
from opsuite_common.options import ManagerOptions, parse_options
from opsuite_common.protofields import Fields
from opsuite_common.runnable import Runnable, run_group, running
from opsuite_common.store import Store

log = logging.getLogger(__name__)

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


WATCHDOG_PERIOD = 1.0
"""How often the leader checks that its watch streams are alive."""

RECONCILE_GRACE = 5.0
"""Seconds a leader told to stop lets its reconciles in hand run on. The rest of its stop is
bounded too (kopf's: its queueing exit timeout, then up to 5 s for the tasks started after it;
the drain of the writes in flight: up to the renew deadline; the release: one Lease request), so
that all of it fits in the pods' terminationGracePeriodSeconds (the charts' 30 s)."""

GC_PAUSE_LIMIT = 120.0
"""Longest time the garbage collector is kept off while the initial listings fill the caches
(seconds; 20,000 objects take a few)."""


def package_version() -> str:
    """The installed opsuite version."""
    try:
        return version("opsuite")
    except PackageNotFoundError:
        return "0.0.0"


class Manager:
    """Holds an operator's watches, caches and controllers, and runs them while leading."""

    def __init__(
        self, name: str, options: ManagerOptions, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        """``clock`` (seconds, monotonic) measures the watches' silence."""
        self.name = name
        self.options = options
        self.identity = default_identity()
        self.fence = WriteFence()
        self.kube = KubeApi(
            load_configuration(),
            user_agent=f"{name}/{package_version()} ({self.identity})",
            fence=self.fence,
        )
        self.activity = WatchActivity(clock)
        self._watches = KopfWatches(
            lambda: self.kube.configuration, options, self.identity, self._handle_signals
        )
        self._watchdog = Watchdog(self._dead_streams, WATCHDOG_PERIOD)
        self._stopping = asyncio.Event()
        self._leading = False
        self.caches = Caches(self.activity, options.namespaces)
        self._controllers = Controllers(self.caches.synced, self.fence, RECONCILE_GRACE)
        self._runnables: tuple[Runnable, ...] = (
            servers.metrics(options, self.kube),
            servers.probes(options, self.liveness, self.readiness),
            self._watchdog,
            self._controllers,
            self._watches,
        )
        """What the process runs, in the order it starts them: /metrics first, so that once the
        probes answer ready it is there to scrape; kopf last (:func:`run_group`)."""
        STALE_WATCH_STREAMS.set_function(lambda: len(self._stale_streams()))

    def event_recorder(self) -> EventRecorder:
        """The recorder of this operator's Events, with its own small bound on writes in
        flight."""
        return EventRecorder(self.kube.with_parallelism(EVENT_WRITERS), self.name, self.identity)

    def add_controller(self, name: str, reconcile: Reconciler) -> Controller:
        """A reconcile loop run with ``--max-concurrent-reconciles`` workers while leading."""
        ctl = Controller(name, reconcile, max_concurrent=self.options.max_concurrent_reconciles)
        self._controllers.add(ctl)
        return ctl

    @property
    def controllers(self) -> Sequence[Controller]:
        """The controllers :meth:`add_controller` made, in that order."""
        return tuple(self._controllers.all)

    @property
    def synced(self) -> bool:
        """Whether every watched cache holds its initial listing (the reconciles may start)."""
        return self.caches.synced.is_set()

    def watch(
        self,
        group: str,
        version: str,
        plural: str,
        *,
        store: Store | None = None,
        on_event: EventHandler | None = None,
        fields: Fields | None = None,
    ) -> None:
        """Watch a resource read-only: feed ``store`` and call ``on_event`` on every event
        (:meth:`Caches.watch <opsuite_common.caches.Caches.watch>`)."""
        deliver = self.caches.watch(group, plural, store=store, on_event=on_event, fields=fields)
        self._watches.add(group, version, plural, deliver)

    def decoder(self, url: str) -> protowatch.Decoder | None:
        """The protobuf decoder of a watch URL (:meth:`watch`'s ``fields``), None: JSON."""
        return self.caches.decoder(url)

    def route(self, group: str, plural: str) -> Deliver | None:
        """The function that takes the raw watch events of a resource :meth:`watch` watches."""
        return self.caches.route(group, plural)

    def cache(self, plural: str) -> Store | None:
        """The store ``watch`` feeds for ``plural`` (None: not watched, or without a store)."""
        return self.caches.store(plural)

    def readiness(self) -> str | None:
        """None when ready: a standby (leader election on, not leading) always is; the leader,
        or a process without leader election, once its watches are up and fresh."""
        if not self._leading and self.options.leader_elect:
            return None
        if not self._watches.ready or not self.caches.synced.is_set():
            missing = self.caches.unlisted()
            return f"caches not synced yet: {', '.join(missing) or 'applying the listings'}"
        stale = self._stale_streams()
        if stale:
            return (
                f"watch silent for over {2 * self.options.watch_timeout:.0f} s: {', '.join(stale)}"
            )
        return None

    def _stale_streams(self) -> list[str]:
        """The leader's watch streams silent for over twice the watch timeout."""
        return self.caches.silent(2 * self.options.watch_timeout) if self._leading else []

    def liveness(self) -> str | None:
        """None when alive: failing once a watch stream of the leader is dead (from then on
        until the process exits; a standby has no watches)."""
        if self._watchdog.dead is not None or not self._leading:
            return self._watchdog.dead
        return self._dead_streams()

    def _dead_streams(self) -> str | None:
        limit = watch_dead_after(self.options.watch_timeout)
        dead = self.caches.silent(limit)
        if not dead:
            return None
        return f"watch dead (silent for over {limit:.0f} s): {', '.join(dead)}"

    def stop(self) -> None:
        """Stop gracefully: lead() steps down, see there."""
        self._stopping.set()

    def _handle_signals(self) -> None:
        """Make SIGTERM and SIGINT stop the process gracefully."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._signalled, sig)

    def _signalled(self, sig: signal.Signals) -> None:
        log.info("%s received: stopping", sig.name)
        self.stop()

    async def lead(self) -> None:
        """Run the runnables that need leadership (the watchdog, the controllers, kopf's
        watches) until :meth:`stop`, then step down in that order: take no new key, let the
        reconciles in hand finish (up to RECONCILE_GRACE), close the write fence and stop kopf.
        Raise WatchDead (stopped) when a watch stream is dead. Writes may leave meanwhile."""
        self.fence.open()
        self._leading = True
        self.activity.start()
        collector_back = self._pause_collector()
        try:
            leading = [runnable for runnable in self._runnables if runnable.needs_leader]
            await run_group(leading, self._stopping)
        finally:
            if collector_back is not None:
                collector_back.cancel()
            gc.enable()
            self.fence.close()
            self._leading = False

    async def run(self) -> int:
        """Serve /metrics and the probes, then lead (with --leader-elect: once elected) until
        :meth:`stop`; return the process's exit code: 1 when the Lease was lost or a watch
        died, else 0."""
        try:
            async with contextlib.AsyncExitStack() as serving:
                for runnable in self._runnables:
                    if not runnable.needs_leader:  # each once the one before it listens
                        await serving.enter_async_context(running(runnable))
                self._handle_signals()
                if self.options.leader_elect:
                    namespace = _lease_namespace(self.options)
                    elector = lease_elector(
                        self.kube, self.options, namespace, self.identity, self.fence
                    )
                    await Election(elector, self.lead).run(self._stopping)
                else:
                    await self.lead()
                return 0
        except LeadershipLost as exc:
            log.error("leader election lost: %s; exiting so that the pod restarts", exc)
            return 1
        except WatchDead as exc:
            log.error("%s; stepped down, exiting so that the pod restarts", exc)
            return 1
        except asyncio.CancelledError:
            log.info("stopped by signal")
            return 0
        finally:
            await self.kube.close()

    def _pause_collector(self) -> asyncio.TimerHandle | None:
        """Keep the garbage collector off until the caches are synced, or GC_PAUSE_LIMIT.

        The initial listings fill the caches in one burst of long-lived records, during which
        the collector's passes find nothing to free, yet walk them all: a large part of the CPU
        until Ready with many pods (#19). It is on again once the caches are synced (those
        records frozen out of it), when lead() ends, or after GC_PAUSE_LIMIT: a listing that
        keeps failing (RBAC, a CRD missing) makes cyclic garbage (exceptions and their
        tracebacks) for as long as it does."""
        if self.caches.synced.is_set():
            return None
        gc.disable()
        return asyncio.get_running_loop().call_later(GC_PAUSE_LIMIT, gc.enable)


def own_namespace(options: ManagerOptions) -> str | None:
    """The operator's namespace: its Lease's, else the pod's (POD_NAMESPACE, or the service
    account's); None for a process outside a cluster without either."""
    namespace = options.leader_election_namespace or os.environ.get("POD_NAMESPACE")
    if not namespace and SERVICE_ACCOUNT_NAMESPACE.exists():
        namespace = SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
    return namespace or None


def _lease_namespace(options: ManagerOptions) -> str:
    namespace = own_namespace(options)
    if not namespace:
        sys.exit(
            "leader election needs a namespace for its Lease: set --leader-election-namespace "
            "(or POD_NAMESPACE) when running outside a cluster"
        )
    return namespace


def run_main(main: Callable[[], Coroutine[Any, Any, int]]) -> int:
    """``asyncio.run(main())`` without joining the default executor's threads at the end: one
    blocked on the network (the API clients resolve the API server's name with ``getaddrinfo``
    there, kopf waits on flags there) would hold the exit until the kubelet SIGKILLs the pod
    (#20)."""

    async def without_waiting() -> int:
        try:
            return await main()
        finally:
            # asyncio.run shuts down whichever executor is the default then: a fresh, idle one.
            asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=1))

    return asyncio.run(without_waiting())


def run_operator(
    name: str,
    description: str,
    setup: Callable[[Manager], Awaitable[None] | None],
    argv: Sequence[str] | None = None,
) -> NoReturn:
    """Parse flags, build the manager, let ``setup`` wire the operator, run, exit the process."""
    options = parse_options(name, description, argv)
    configure_logging(options.log_format, options.log_level)
    bound_tls_read_buffers()

    async def main() -> int:
        manager = Manager(name, options)
        wiring = setup(manager)
        if wiring is not None:
            await wiring
        kopfwatch.install(manager)
        log.info(
            "starting %s %s as %s (leader election %s, namespaces %s)",
            name,
            package_version(),
            manager.identity,
            "on" if options.leader_elect else "off",
            ", ".join(options.namespaces) or "all",
        )
        return await manager.run()

    code = 0
    with contextlib.suppress(KeyboardInterrupt):
        code = run_main(main)
    # The watches are closed and the Lease is released. A default-executor thread still blocked
    # on the network would hold the interpreter's exit (it joins such threads) past the pod's
    # grace period, so leave at once, as controller-runtime's manager does.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
