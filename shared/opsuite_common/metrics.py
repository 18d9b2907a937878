"""Prometheus metrics under controller-runtime's names, so its dashboards and alerts apply.

Everything lives on ``REGISTRY`` (with the process, platform and GC collectors), served at
/metrics by :mod:`opsuite_common.metrics_server`. This module holds the registry and the metrics
only, so that what records them (the API client among others) imports nothing of the server.
``_created`` series are disabled process-wide: controller-runtime exposes none.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from time import monotonic, perf_counter
from typing import TypeVar

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)
from prometheus_client.registry import Collector

disable_created_metrics()  # type: ignore[no-untyped-call]  # unannotated upstream

REGISTRY = CollectorRegistry()
for _collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
    REGISTRY.register(_collector)

RECONCILE_TIME_BUCKETS = (
    *(0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5),
    *(0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5),
    *(6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60),
)
"""controller-runtime's buckets for controller_runtime_reconcile_time_seconds."""

RECONCILE_TOTAL = Counter(
    "controller_runtime_reconcile_total",
    "Total number of reconciliations per controller",
    ["controller", "result"],
    registry=REGISTRY,
)
RECONCILE_ERRORS = Counter(
    "controller_runtime_reconcile_errors_total",
    "Total number of reconciliation errors per controller",
    ["controller"],
    registry=REGISTRY,
)
TERMINAL_RECONCILE_ERRORS = Counter(
    "controller_runtime_terminal_reconcile_errors_total",
    "Total number of terminal reconciliation errors per controller",
    ["controller"],
    registry=REGISTRY,
)
RECONCILE_PANICS = Counter(
    "controller_runtime_reconcile_panics_total",
    "Total number of reconciliation panics per controller",
    ["controller"],
    registry=REGISTRY,
)
RECONCILE_TIME = Histogram(
    "controller_runtime_reconcile_time_seconds",
    "Length of time per reconciliation per controller",
    ["controller"],
    buckets=RECONCILE_TIME_BUCKETS,
    registry=REGISTRY,
)
MAX_CONCURRENT_RECONCILES = Gauge(
    "controller_runtime_max_concurrent_reconciles",
    "Maximum number of concurrent reconciles per controller",
    ["controller"],
    registry=REGISTRY,
)
ACTIVE_WORKERS = Gauge(
    "controller_runtime_active_workers",
    "Number of currently used workers per controller",
    ["controller"],
    registry=REGISTRY,
)


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """prometheus.ExponentialBuckets: the same floats, as Go multiplies them step by step."""
    buckets = [start]
    while len(buckets) < count:
        buckets.append(buckets[-1] * factor)
    return tuple(buckets)


WORKQUEUE_DURATION_BUCKETS = exponential_buckets(10e-9, 10, 12)
"""controller-runtime's buckets for workqueue_{queue,work}_duration_seconds: 10 ns to 1000 s.
(Kubernetes' own components register client-go's queue metrics with 10 of them, up to 10 s.)"""

WORKQUEUE_DEPTH = Gauge(
    "workqueue_depth",
    "Current depth of workqueue by workqueue and priority",
    ["name", "controller", "priority"],
    registry=REGISTRY,
)
WORKQUEUE_ADDS = Counter(
    "workqueue_adds_total",
    "Total number of adds handled by workqueue",
    ["name", "controller"],
    registry=REGISTRY,
)
WORKQUEUE_QUEUE_DURATION = Histogram(
    "workqueue_queue_duration_seconds",
    "How long in seconds an item stays in workqueue before being requested",
    ["name", "controller"],
    buckets=WORKQUEUE_DURATION_BUCKETS,
    registry=REGISTRY,
)
WORKQUEUE_WORK_DURATION = Histogram(
    "workqueue_work_duration_seconds",
    "How long in seconds processing an item from workqueue takes.",
    ["name", "controller"],
    buckets=WORKQUEUE_DURATION_BUCKETS,
    registry=REGISTRY,
)
WORKQUEUE_UNFINISHED_WORK = Gauge(
    "workqueue_unfinished_work_seconds",
    "How many seconds of work has been done that is in progress and hasn't been observed by "
    "work_duration. Large values indicate stuck threads. One can deduce the number of stuck "
    "threads by observing the rate at which this increases.",
    ["name", "controller"],
    registry=REGISTRY,
)
WORKQUEUE_LONGEST_RUNNING_PROCESSOR = Gauge(
    "workqueue_longest_running_processor_seconds",
    "How many seconds has the longest running processor for workqueue been running.",
    ["name", "controller"],
    registry=REGISTRY,
)
WORKQUEUE_RETRIES = Counter(
    "workqueue_retries_total",
    "Total number of retries handled by workqueue",
    ["name", "controller"],
    registry=REGISTRY,
)
REST_CLIENT_REQUESTS = Counter(
    "rest_client_requests_total",
    "Number of HTTP requests, partitioned by status code, method, and host.",
    ["code", "method", "host"],
    registry=REGISTRY,
)
LEADER_ELECTION_MASTER_STATUS = Gauge(
    "leader_election_master_status",
    "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, "
    "1 indicates master. 'name' is the string used to identify the lease. "
    "Please make sure to group by name.",
    ["name"],
    registry=REGISTRY,
)
STALE_WATCH_STREAMS = Gauge(
    "opsuite_watch_stale_streams",
    "Watch streams of the leader silent (no event, bookmark or clean end) for over twice the "
    "watch timeout, when /readyz fails; 0 on a standby.",
    registry=REGISTRY,
)

CollectorT = TypeVar("CollectorT", bound=Collector)


def register(collector: CollectorT) -> CollectorT:
    """Register an operator's own metric on REGISTRY and return it.

    Create it unregistered: ``register(Counter("x_total", "...", registry=None))``.
    """
    REGISTRY.register(collector)
    return collector


def leader_status_hook(name: str) -> Callable[[bool], None]:
    """A LeaderElector ``on_leading_change`` that sets leader_election_master_status{name}."""
    gauge = LEADER_ELECTION_MASTER_STATUS.labels(name)

    def set_status(leading: bool) -> None:
        gauge.set(1 if leading else 0)

    return set_status


@dataclass
class ReconcileResult:
    """What a successful reconcile asked for; set it inside ``ReconcileMetrics.track``."""

    requeue: bool = False
    requeue_after: float = 0.0

    @property
    def label(self) -> str:
        """The ``result`` label controller-runtime gives this outcome."""
        if self.requeue_after > 0:
            return "requeue_after"
        return "requeue" if self.requeue else "success"


class ReconcileMetrics:
    """controller-runtime's reconcile and workqueue metrics for one controller.

    Exceptions map like controller-runtime errors: ``terminal_errors`` count
    as terminal errors (TerminalError); other ``expected_errors`` as plain
    errors; any other Exception as a recovered panic (a bug), which is also
    an error. Non-Exception BaseExceptions (cancellation) record no result.
    """

    def __init__(
        self,
        controller: str,
        max_concurrent_reconciles: int = 1,
        *,
        terminal_errors: tuple[type[Exception], ...] = (),
        expected_errors: tuple[type[Exception], ...] = (Exception,),
    ) -> None:
        """Initialise every series of ``controller`` to 0, as controller-runtime does."""
        self._terminal_errors = terminal_errors
        self._expected_errors = expected_errors
        self._results = {
            result: RECONCILE_TOTAL.labels(controller, result)
            for result in ("success", "error", "requeue", "requeue_after")
        }
        self._errors = RECONCILE_ERRORS.labels(controller)
        self._terminal = TERMINAL_RECONCILE_ERRORS.labels(controller)
        self._panics = RECONCILE_PANICS.labels(controller)
        self._time = RECONCILE_TIME.labels(controller)
        self._active = ACTIVE_WORKERS.labels(controller)
        self._active.set(0)
        MAX_CONCURRENT_RECONCILES.labels(controller).set(max_concurrent_reconciles)

    @contextmanager
    def track(self) -> Iterator[ReconcileResult]:
        """Time one reconcile and record its result; exceptions propagate."""
        self._active.inc()
        start = perf_counter()
        result = ReconcileResult()
        try:
            yield result
        except Exception as exc:
            if isinstance(exc, self._terminal_errors):
                self._terminal.inc()
            elif not isinstance(exc, self._expected_errors):
                self._panics.inc()
            self._errors.inc()
            self._results["error"].inc()
            raise
        else:
            self._results[result.label].inc()
        finally:
            self._time.observe(perf_counter() - start)
            self._active.dec()


class WorkQueueMetrics:
    """controller-runtime's workqueue_* series of one controller's queue (labels ``name`` and
    ``controller``, both the controller's name); a ``workqueue.QueueMetrics``.

    Recorded as client-go's queue metrics are: an add when a key becomes dirty (so depth counts
    a key added while it is processed), the queue duration from that add to a worker's get, the
    work duration from get to done, a retry per rate-limited or retry re-add. The unfinished
    work and longest running processor gauges are computed when scraped (client-go refreshes
    them every 500 ms).
    """

    def __init__(self, controller: str, *, clock: Callable[[], float] = monotonic) -> None:
        """Initialise every series of ``controller``'s queue (to 0, as controller-runtime does)."""
        labels = (controller, controller)
        self._clock = clock
        self._added: dict[Hashable, float] = {}
        self._started: dict[Hashable, float] = {}
        self._depth = WORKQUEUE_DEPTH.labels(*labels, "")
        self._depth.set(0)
        self._adds = WORKQUEUE_ADDS.labels(*labels)
        self._retries = WORKQUEUE_RETRIES.labels(*labels)
        self._queue_duration = WORKQUEUE_QUEUE_DURATION.labels(*labels)
        self._work_duration = WORKQUEUE_WORK_DURATION.labels(*labels)
        WORKQUEUE_UNFINISHED_WORK.labels(*labels).set_function(self._unfinished_work)
        WORKQUEUE_LONGEST_RUNNING_PROCESSOR.labels(*labels).set_function(self._longest_running)

    def add(self, key: Hashable) -> None:
        """``key`` became dirty."""
        self._adds.inc()
        self._depth.inc()
        self._added.setdefault(key, self._clock())

    def get(self, key: Hashable) -> None:
        """A worker took ``key``."""
        now = self._clock()
        self._depth.dec()
        self._started[key] = now
        added = self._added.pop(key, None)
        if added is not None:
            self._queue_duration.observe(now - added)

    def done(self, key: Hashable) -> None:
        """A worker finished ``key``."""
        started = self._started.pop(key, None)
        if started is not None:
            self._work_duration.observe(self._clock() - started)

    def retry(self) -> None:
        """A key was re-added as a retry."""
        self._retries.inc()

    def _unfinished_work(self) -> float:
        now = self._clock()
        return sum(now - started for started in self._started.values())

    def _longest_running(self) -> float:
        now = self._clock()
        return max((now - started for started in self._started.values()), default=0.0)
