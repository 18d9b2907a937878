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

from opsuite_common import kopfwatch, metrics, protowatch
from opsuite_common.caches import Caches, EventHandler
from opsuite_common.controller import Controller, Controllers, Reconciler
from opsuite_common.events import EventRecorder
from opsuite_common.fence import WriteFence
from opsuite_common.health import HealthServer, HttpServer
from opsuite_common.kopfwatch.activity import WatchActivity
from opsuite_common.kopfwatch.runner import Deliver, KopfWatches
from opsuite_common.kopfwatch.settings import watch_dead_after
from opsuite_common.kube import EVENT_WRITERS, KubeApi
from opsuite_common.kube_transport import bound_tls_read_buffers
from opsuite_common.kubeconfig import load_configuration
from opsuite_common.leader_election import (
    KubernetesLeaseApi,
    LeaderElectionConfig,
    LeaderElector,
    LeadershipLost,
    default_identity,
)
from opsuite_common.logs import configure_logging
from opsuite_common.metrics_auth import KubeReviewApi, MetricsAuth, server_context
from opsuite_common.metrics_server import metrics_server
from opsuite_common.options import ManagerOptions, parse_options
from opsuite_common.protofields import Fields
from opsuite_common.runnable import running
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


class WatchDead(Exception):
    """A watch stream stayed silent past watch_dead_after: the leader steps down."""


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
        self._stopping = asyncio.Event()
        self._leading = False
        self._dead: str | None = None
        self.caches = Caches(self.activity, options.namespaces)
        self._controllers = Controllers(self.caches.synced, RECONCILE_GRACE)

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
        if not self._watches.started.is_set() or not self.caches.synced.is_set():
            missing = self.caches.unlisted()
            return f"caches not synced yet: {', '.join(missing) or 'applying the listings'}"
        stale = self.caches.silent(2 * self.options.watch_timeout)
        if stale:
            return (
                f"watch silent for over {2 * self.options.watch_timeout:.0f} s: {', '.join(stale)}"
            )
        return None

    def liveness(self) -> str | None:
        """None when alive: failing once a watch stream of the leader is dead (from then on
        until the process exits; a standby has no watches)."""
        if self._dead is not None or not self._leading:
            return self._dead
        limit = watch_dead_after(self.options.watch_timeout)
        dead = self.caches.silent(limit)
        if not dead:
            return None
        return f"watch dead (silent for over {limit:.0f} s): {', '.join(dead)}"

    async def _watchdog(self) -> None:
        """Raise WatchDead once a watch stream is dead."""
        while True:
            await asyncio.sleep(WATCHDOG_PERIOD)
            self._dead = self.liveness()
            if self._dead is not None:
                raise WatchDead(self._dead)

    def stop(self) -> None:
        """Stop gracefully: lead() steps down, see there."""
        self._stopping.set()

    async def stopped(self) -> None:
        """Return once :meth:`stop` has been called."""
        await self._stopping.wait()

    def _handle_signals(self) -> None:
        """Make SIGTERM and SIGINT stop the process gracefully."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._signalled, sig)

    def _signalled(self, sig: signal.Signals) -> None:
        log.info("%s received: stopping", sig.name)
        self.stop()

    async def lead(self) -> None:
        """Run the controllers and kopf's watches (in that order: kopf waits on shutdown for
        tasks created after it starts) until :meth:`stop`, then step down: take no new key, let
        the reconciles in hand finish (up to RECONCILE_GRACE), close the write fence and stop
        kopf. Raise WatchDead (stopped) when a watch stream is dead. Writes may leave
        meanwhile."""
        self.fence.open()
        self._leading = True
        self.activity.start()
        collector_back = self._pause_collector()
        watchdog = asyncio.create_task(self._watchdog(), name="watchdog")
        stopping = asyncio.create_task(self.stopped(), name="stopping")
        try:
            async with running((self._controllers, self._watches)):
                ended = asyncio.create_task(self._watches.ended(), name="kopf-ended")
                try:
                    await asyncio.wait(
                        (ended, watchdog, stopping), return_when=asyncio.FIRST_COMPLETED
                    )
                finally:
                    ended.cancel()
                if watchdog.done():
                    watchdog.result()  # raises WatchDead
                if stopping.done():
                    await self._controllers.finish()
                    self.fence.close()
                await self._watches.finish()  # returns once stopped, unless it failed
        finally:
            if collector_back is not None:
                collector_back.cancel()
            gc.enable()
            self.fence.close()
            for task in (watchdog, stopping):
                task.cancel()
            await asyncio.gather(watchdog, stopping, return_exceptions=True)
            self._leading = False

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


def _metrics_server(manager: Manager) -> HttpServer:
    """The metrics server: plain, or with --metrics-secure HTTPS authenticated and authorized
    through the API server as the operator's own identity."""
    options = manager.options
    if not options.metrics_secure:
        return metrics_server(options.metrics_bind_address)
    context = server_context(
        options.metrics_cert_path, options.metrics_cert_name, options.metrics_cert_key
    )
    log.info(
        "metrics served over HTTPS with %s, authenticated and authorized by the API server",
        f"the certificate in {options.metrics_cert_path}"
        if options.metrics_cert_path
        else "a self-signed certificate",
    )
    return metrics_server(
        options.metrics_bind_address,
        ssl_context=context,
        auth=MetricsAuth(KubeReviewApi(manager.kube)),
    )


def _probes_server(manager: Manager) -> HealthServer:
    health = HealthServer(manager.options.health_probe_bind_address)
    health.add_healthz_check("watches", manager.liveness)
    health.add_readyz_check("leader-or-watches", manager.readiness)
    return health


async def serve(manager: Manager) -> int:
    """Run ``manager`` as the process does: its servers (metrics first: once the probes answer
    ready, /metrics is there to scrape), then, leading (with --leader-elect, once elected),
    its controllers and watches; return the exit status."""
    options = manager.options
    manager._handle_signals()
    try:
        async with running((_metrics_server(manager), _probes_server(manager))):
            if not options.leader_elect:
                await manager.lead()
                return 0
            elector = LeaderElector(
                KubernetesLeaseApi(manager.kube),
                LeaderElectionConfig(
                    name=options.leader_election_id,
                    namespace=_lease_namespace(options),
                    identity=manager.identity,
                ),
                on_leading_change=metrics.leader_status_hook(options.leader_election_id),
                fence=manager.fence,
            )
            await _elect(manager, elector)
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
        await manager.kube.close()


async def _elect(manager: Manager, elector: LeaderElector) -> None:
    """Run ``elector`` around lead() until it ends. Stopped while it holds the Lease, lead()
    steps down by itself and the elector then releases the Lease; stopped before, the elector
    is cancelled (and releases the Lease should a cancelled request have won it)."""
    electing = asyncio.create_task(elector.run(manager.lead), name="electing")
    stopping = asyncio.create_task(manager.stopped(), name="stopping")
    try:
        await asyncio.wait((electing, stopping), return_when=asyncio.FIRST_COMPLETED)
        if not elector.is_leader:
            electing.cancel()
        await electing
    finally:
        stopping.cancel()


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
        return await serve(manager)

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
