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
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, NoReturn

from opsuite_common import kopfwatch, metrics, protowatch
from opsuite_common.controller import Controller, Reconciler
from opsuite_common.events import EventRecorder
from opsuite_common.fence import WriteFence
from opsuite_common.health import HealthServer, HttpServer
from opsuite_common.kopfwatch.activity import WatchActivity
from opsuite_common.kopfwatch.runner import Deliver, KopfWatches
from opsuite_common.kopfwatch.settings import watch_dead_after
from opsuite_common.kube import EVENT_WRITERS, KubeApi, bound_tls_read_buffers
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
from opsuite_common.metrics_server import start_metrics_server
from opsuite_common.options import ManagerOptions, parse_options
from opsuite_common.protofields import Fields
from opsuite_common.store import JSON, Store, object_key

log = logging.getLogger(__name__)

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")

EventHandler = Callable[[str | None, JSON, JSON | None], None]
"""Called for each watch event with (event type, new object, previous cached object)."""

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
        self.controllers: list[Controller] = []
        self.activity = WatchActivity(clock)
        self._watches = KopfWatches(lambda: self.kube.configuration)
        self._ready = asyncio.Event()
        self._stopping = asyncio.Event()
        self._leading = False
        self._dead: str | None = None
        self._watched: list[str] = []
        self._stores: dict[str, tuple[Store | None, EventHandler | None]] = {}
        self._routes: dict[tuple[str, str], Deliver] = {}
        self._decoders: dict[str, protowatch.Decoder] = {}
        # Until the caches are synced: objects each handler has applied, and objects of each
        # initial listing not applied yet (handlers may run before or after the listing ends).
        self._applied_keys: dict[str, set[tuple[str, str]]] = {}
        self._unapplied: dict[tuple[str, str | None], set[tuple[str, str]]] = {}
        self._synced = asyncio.Event()
        self.activity.on_listed(self._listed)

    def event_recorder(self) -> EventRecorder:
        """The recorder of this operator's Events, with its own small bound on writes in
        flight."""
        return EventRecorder(self.kube.with_parallelism(EVENT_WRITERS), self.name, self.identity)

    def add_controller(self, name: str, reconcile: Reconciler) -> Controller:
        """A reconcile loop run with ``--max-concurrent-reconciles`` workers while leading."""
        ctl = Controller(name, reconcile, max_concurrent=self.options.max_concurrent_reconciles)
        self.controllers.append(ctl)
        return ctl

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
        """Watch a resource read-only: feed ``store`` and call ``on_event`` on every event.

        With ``fields`` (a built-in resource of :data:`protowatch.MESSAGES`), the watch is
        streamed in protobuf and its objects hold those fields (and the common metadata,
        :mod:`opsuite_common.protowatch`); the handlers and the store's transform must read
        nothing else. Objects of its paged listings are whole JSON objects still."""
        if fields is not None:
            if group or plural not in protowatch.MESSAGES:
                raise ValueError(f"{plural}.{group}: only {sorted(protowatch.MESSAGES)} (core)")
            self._decoders[plural] = protowatch.decoder(plural, fields)

        def deliver(event: Mapping[str, Any]) -> None:
            obj: JSON = dict(event["object"])
            event_type: str | None = event["type"]
            if store is not None and store.outdated(obj):
                self._applied(plural, obj)  # the cache holds a newer version: nothing changed
                return
            previous = store.apply(event_type, obj) if store is not None else None
            if on_event is not None:
                on_event(event_type, obj, previous)
            self._applied(plural, obj)

        self._watched.append(plural)
        self._stores[plural] = (store, on_event)
        self._routes[(group, plural)] = deliver
        self._watches.add(group, version, plural, deliver)

    def decoder(self, url: str) -> protowatch.Decoder | None:
        """The protobuf decoder of a watch URL (:meth:`watch`'s ``fields``), None: JSON."""
        plural = protowatch.core_plural(url)
        return None if plural is None else self._decoders.get(plural)

    def route(self, group: str, plural: str) -> Deliver | None:
        """The function that takes the raw watch events of a resource :meth:`watch` watches."""
        return self._routes.get((group, plural))

    def cache(self, plural: str) -> Store | None:
        """The store ``watch`` feeds for ``plural`` (None: not watched, or without a store)."""
        return self._stores.get(plural, (None, None))[0]

    def _has_listed(self, plural: str) -> bool:
        """Whether every watch stream of ``plural`` has listed."""
        streams = self.activity.streams(plural, self.options.namespaces)
        return all(self.activity.has_listed(stream) for stream in streams)

    def _silent(self, longer_than: float) -> list[str]:
        return self.activity.silent(self._watched, self.options.namespaces, longer_than)

    def _listed(
        self,
        plural: str,
        namespace: str | None,
        keys: set[tuple[str, str]],
        resource_version: str | None,
    ) -> None:
        """A (re)listing ended: drop cached objects it no longer holds, but for the operator's
        own writes after its snapshot (:meth:`Store.prune`); maybe open the gate."""
        if plural not in self._stores:
            return
        store, on_event = self._stores[plural]
        if store is not None:
            for obj in store.prune(keep=keys, namespace=namespace, snapshot=resource_version):
                log.info("%s %s/%s vanished while the watch was down", plural, *object_key(obj))
                if on_event is not None:
                    on_event("DELETED", obj, obj)
        if not self._synced.is_set():
            self._unapplied[(plural, namespace)] = keys - self._applied_keys.get(plural, set())
            self._check_synced()

    def _applied(self, plural: str, obj: JSON) -> None:
        if self._synced.is_set():
            return
        key = object_key(obj)
        self._applied_keys.setdefault(plural, set()).add(key)
        emptied = False
        for (resource, namespace), pending in self._unapplied.items():
            if resource == plural and key in pending and (namespace is None or namespace == key[0]):
                pending.discard(key)
                emptied = emptied or not pending
        if emptied:  # else nothing the gate waits on changed (a listing's end checks itself)
            self._check_synced()

    def _check_synced(self) -> None:
        listed = all(self._has_listed(plural) for plural in self._watched)
        if listed and not any(self._unapplied.values()):
            self._synced.set()
            self._applied_keys.clear()
            self._unapplied.clear()
            log.info("caches synced: %s", ", ".join(self._watched))
            # What the process holds now (code, kopf, the initial listings) lives as long as
            # it does: keep it out of the collector's full passes, which scan every tracked
            # object each time (tens of ms of an operator's CPU at each one, #19).
            gc.freeze()
            gc.enable()  # off since lead(), see there

    def readiness(self) -> str | None:
        """None when ready: a standby (leader election on, not leading) always is; the leader,
        or a process without leader election, once its watches are up and fresh."""
        if not self._leading and self.options.leader_elect:
            return None
        if not self._ready.is_set() or not self._synced.is_set():
            missing = [plural for plural in self._watched if not self._has_listed(plural)]
            return f"caches not synced yet: {', '.join(missing) or 'applying the listings'}"
        stale = self._silent(2 * self.options.watch_timeout)
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
        dead = self._silent(limit)
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
        """Run kopf's watches and every controller until :meth:`stop`, then step down: take no
        new key, let the reconciles in hand finish (up to RECONCILE_GRACE), close the write
        fence and stop kopf. Raise WatchDead (stopped) when a watch stream is dead. Writes may
        leave meanwhile."""
        self.fence.open()
        self._leading = True
        self.activity.start()
        collector_back = None
        if not self._synced.is_set():
            # The initial listings fill the caches in one burst of long-lived records, during
            # which the collector's passes find nothing to free, yet walk them all: a large
            # part of the CPU until Ready with many pods (#19). It is on again once the
            # caches are synced (those records frozen out of it), when lead() ends, or after
            # GC_PAUSE_LIMIT: a listing that keeps failing (RBAC, a CRD missing) makes cyclic
            # garbage (exceptions and their tracebacks) for as long as it does.
            gc.disable()
            collector_back = asyncio.get_running_loop().call_later(GC_PAUSE_LIMIT, gc.enable)
        ready_flag: asyncio.Event = asyncio.Event()
        stop_kopf = asyncio.Event()

        async def mark_ready() -> None:
            await ready_flag.wait()
            self._ready.set()
            log.info("kopf started")

        # Workers first: kopf waits on shutdown for tasks created after it starts.
        workers = [task for c in self.controllers for task in c.start(self._synced)]
        ready = asyncio.create_task(mark_ready(), name="ready")
        watchdog = asyncio.create_task(self._watchdog(), name="watchdog")
        stopping = asyncio.create_task(self.stopped(), name="stopping")
        kopf_task = asyncio.create_task(
            self._watches.run(
                self.options, self.identity, ready_flag, stop_kopf, self._handle_signals
            ),
            name="kopf",
        )
        try:
            await asyncio.wait((kopf_task, watchdog, stopping), return_when=asyncio.FIRST_COMPLETED)
            if watchdog.done():
                watchdog.result()  # raises WatchDead
            if stopping.done():
                await self._finish_reconciles(workers)
                self.fence.close()
                stop_kopf.set()
            await kopf_task  # returns once stopped, unless it fails
        finally:
            if collector_back is not None:
                collector_back.cancel()
            gc.enable()
            self.fence.close()
            kopf_task.cancel()
            for task in (ready, watchdog, stopping, *workers):
                task.cancel()
            await asyncio.gather(
                kopf_task, ready, watchdog, stopping, *workers, return_exceptions=True
            )
            self._leading = False

    async def _finish_reconciles(self, workers: Sequence[asyncio.Task[None]]) -> None:
        """Hand out no more keys and wait, up to RECONCILE_GRACE, for the reconciles in hand to
        end (before the caches are synced none has started: the workers wait for that)."""
        for controller in self.controllers:
            controller.queue.shut_down()
        if not workers or not self._synced.is_set():
            return
        _, running = await asyncio.wait(workers, timeout=RECONCILE_GRACE)
        if running:
            log.warning(
                "%d reconciles still running after %.0f s; stopping them",
                len(running),
                RECONCILE_GRACE,
            )


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


async def _start_metrics(manager: Manager) -> HttpServer:
    """The metrics server: plain, or with --metrics-secure HTTPS authenticated and authorized
    through the API server as the operator's own identity."""
    options = manager.options
    if not options.metrics_secure:
        return await start_metrics_server(options.metrics_bind_address)
    context = server_context(
        options.metrics_cert_path, options.metrics_cert_name, options.metrics_cert_key
    )
    log.info(
        "metrics served over HTTPS with %s, authenticated and authorized by the API server",
        f"the certificate in {options.metrics_cert_path}"
        if options.metrics_cert_path
        else "a self-signed certificate",
    )
    return await start_metrics_server(
        options.metrics_bind_address,
        ssl_context=context,
        auth=MetricsAuth(KubeReviewApi(manager.kube)),
    )


async def _serve(manager: Manager) -> int:
    options = manager.options
    # Metrics first: once the probes answer ready, /metrics is there to scrape.
    metrics_server = await _start_metrics(manager)
    health = HealthServer(options.health_probe_bind_address)
    health.add_healthz_check("watches", manager.liveness)
    health.add_readyz_check("leader-or-watches", manager.readiness)
    await health.start()
    manager._handle_signals()
    try:
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
        await health.stop()
        if metrics_server is not None:
            await metrics_server.stop()
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
        return await _serve(manager)

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
