"""controller-runtime compatible metrics, the /metrics endpoint and the Grafana dashboard."""

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client import Counter
from prometheus_client.parser import text_string_to_metric_families

from opsuite_common.leader_election import LeaderElectionConfig, LeaderElector
from opsuite_common.metrics import (
    REGISTRY,
    ReconcileMetrics,
    WorkQueueMetrics,
    leader_status_hook,
    register,
)
from opsuite_common.metrics_server import metrics_server
from opsuite_common.workqueue import WorkQueue

DASHBOARD = Path(__file__).parent.parent / "dashboards" / "opsuite-operators.json"
CONTROLLER_RUNTIME_BUCKETS = [
    *(0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7),
    *(0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15),
    *(20, 25, 30, 40, 50, 60),
]
WORKQUEUE_FAMILIES = (
    "workqueue_depth",
    "workqueue_adds",
    "workqueue_queue_duration_seconds",
    "workqueue_work_duration_seconds",
    "workqueue_retries",
    "workqueue_unfinished_work_seconds",
    "workqueue_longest_running_processor_seconds",
)


def go_exponential_buckets(start: float, factor: float, count: int) -> list[float]:
    """prometheus.ExponentialBuckets, multiplied step by step as Go does."""
    buckets = [start]
    while len(buckets) < count:
        buckets.append(buckets[-1] * factor)
    return buckets


class FakeClock:
    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


class Temporary(Exception):
    pass


class Permanent(Exception):
    pass


def value(metric: str, /, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(metric, labels)


def test_controller_series_start_at_zero_like_controller_runtime() -> None:
    ReconcileMetrics("init", 3)
    for result in ("success", "error", "requeue", "requeue_after"):
        assert value("controller_runtime_reconcile_total", controller="init", result=result) == 0
    for name in ("errors", "terminal_reconcile_errors", "reconcile_panics"):
        metric = f"controller_runtime_{'reconcile_' if name == 'errors' else ''}{name}_total"
        assert value(metric, controller="init") == 0
    assert value("controller_runtime_max_concurrent_reconciles", controller="init") == 3
    assert value("controller_runtime_active_workers", controller="init") == 0
    WorkQueueMetrics("init")
    labels = {"name": "init", "controller": "init"}
    assert value("workqueue_depth", priority="", **labels) == 0
    for counter in ("adds", "retries"):
        assert value(f"workqueue_{counter}_total", **labels) == 0
    for histogram in ("queue", "work"):
        assert value(f"workqueue_{histogram}_duration_seconds_count", **labels) == 0
    for gauge in ("unfinished_work", "longest_running_processor"):
        assert value(f"workqueue_{gauge}_seconds", **labels) == 0


def test_track_records_results_time_and_active_workers() -> None:
    metrics = ReconcileMetrics("results")
    with metrics.track():
        assert value("controller_runtime_active_workers", controller="results") == 1
    with metrics.track() as result:
        result.requeue = True
    with metrics.track() as result:
        result.requeue_after = 30
    for label in ("success", "requeue", "requeue_after"):
        assert value("controller_runtime_reconcile_total", controller="results", result=label) == 1
    assert value("controller_runtime_reconcile_time_seconds_count", controller="results") == 3
    assert value("controller_runtime_active_workers", controller="results") == 0
    assert value("controller_runtime_reconcile_errors_total", controller="results") == 0


def test_track_classifies_errors_terminal_errors_and_panics() -> None:
    metrics = ReconcileMetrics("errors", terminal_errors=(Permanent,), expected_errors=(Temporary,))
    for exc in (Temporary("retry"), Permanent("give up"), KeyError("bug"), KeyError("bug")):
        with pytest.raises(type(exc)), metrics.track():
            raise exc
    assert value("controller_runtime_reconcile_total", controller="errors", result="error") == 4
    assert value("controller_runtime_reconcile_errors_total", controller="errors") == 4
    assert value("controller_runtime_terminal_reconcile_errors_total", controller="errors") == 1
    assert value("controller_runtime_reconcile_panics_total", controller="errors") == 2
    assert value("controller_runtime_active_workers", controller="errors") == 0


async def test_cancelled_reconcile_records_time_but_no_result() -> None:
    metrics = ReconcileMetrics("cancelled")

    async def reconcile() -> None:
        with metrics.track():
            await asyncio.sleep(10)

    task = asyncio.create_task(reconcile())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for label in ("success", "error", "requeue", "requeue_after"):
        assert (
            value("controller_runtime_reconcile_total", controller="cancelled", result=label) == 0
        )
    assert value("controller_runtime_reconcile_time_seconds_count", controller="cancelled") == 1
    assert value("controller_runtime_active_workers", controller="cancelled") == 0


async def test_workqueue_metrics_move_as_the_queue_is_used() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(metrics=WorkQueueMetrics("queue", clock=clock))
    labels = {"name": "queue", "controller": "queue"}

    def metric(name: str, **extra: str) -> float | None:
        return value(f"workqueue_{name}", **labels, **extra)

    queue.add("a")
    queue.add("b")
    queue.add("a")  # deduplicated: not an add
    assert metric("adds_total") == 2
    assert value("workqueue_depth", priority="", **labels) == 2

    clock.now += 0.5
    assert await queue.get() == "a"
    assert value("workqueue_depth", priority="", **labels) == 1
    assert metric("queue_duration_seconds_count") == 1
    assert metric("queue_duration_seconds_sum") == 0.5
    assert metric("queue_duration_seconds_bucket", le="1.0") == 1
    assert metric("queue_duration_seconds_bucket", le="0.1") == 0

    clock.now += 1
    assert await queue.get() == "b"
    clock.now += 2  # "a" has run 3 s, "b" 2 s, neither is done
    assert metric("unfinished_work_seconds") == 5
    assert metric("longest_running_processor_seconds") == 3
    assert metric("work_duration_seconds_count") == 0

    queue.done("a")
    assert metric("work_duration_seconds_count") == 1
    assert metric("work_duration_seconds_sum") == 3
    assert metric("unfinished_work_seconds") == 2
    assert metric("longest_running_processor_seconds") == 2

    queue.add_rate_limited("b")  # a failure while processed: a retry, and an add at once
    queue.add_after("c", 10)  # not a retry, not an add until due
    assert metric("retries_total") == 1
    assert metric("adds_total") == 2
    queue.done("b")
    assert metric("unfinished_work_seconds") == 0
    assert metric("longest_running_processor_seconds") == 0
    assert metric("work_duration_seconds_count") == 2
    queue.shut_down()


def test_workqueue_duration_buckets_are_controller_runtimes() -> None:
    WorkQueueMetrics("buckets")
    expected = [*go_exponential_buckets(10e-9, 10, 12), float("inf")]
    for family in REGISTRY.collect():
        if family.name in ("workqueue_queue_duration_seconds", "workqueue_work_duration_seconds"):
            buckets = [
                float(sample.labels["le"])
                for sample in family.samples
                if sample.name.endswith("_bucket") and sample.labels["name"] == "buckets"
            ]
            assert buckets == expected, family.name
            assert buckets[0] == 1e-08
            assert buckets[-2] == pytest.approx(1000)


def test_leader_status_hook_follows_the_elector() -> None:
    hook = leader_status_hook("podset-operator-lock")
    LeaderElector(
        _NoLeaseApi(),
        LeaderElectionConfig(name="podset-operator-lock", namespace="ops", identity="a"),
        on_leading_change=hook,
    )
    assert value("leader_election_master_status", name="podset-operator-lock") == 0
    hook(True)
    assert value("leader_election_master_status", name="podset-operator-lock") == 1


class _NoLeaseApi:
    async def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        raise AssertionError("not called")

    async def create(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("not called")

    async def replace(self, namespace: str, name: str, lease: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("not called")

    async def wait_for_change(
        self, namespace: str, name: str, resource_version: str, max_wait: float
    ) -> None:
        raise AssertionError("not called")


def test_register_adds_operator_metrics_to_the_registry() -> None:
    drift = register(Counter("opsuite_test_drift_total", "Drift corrections.", registry=None))
    drift.inc(2)
    assert value("opsuite_test_drift_total") == 2


async def test_metrics_endpoint_serves_parseable_text_and_openmetrics() -> None:
    ReconcileMetrics("scraped", 2)
    WorkQueueMetrics("scraped")
    server = metrics_server("127.0.0.1:0")
    await server.start()
    assert server.port is not None
    url = f"http://127.0.0.1:{server.port}/metrics"
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(url) as response:
                assert response.status == 200
                assert response.headers["Content-Type"].startswith("text/plain")
                text = await response.text()
            accept = {"Accept": "application/openmetrics-text; version=1.0.0"}
            async with session.get(url, headers=accept) as response:
                assert response.headers["Content-Type"].startswith("application/openmetrics-text")
                assert (await response.text()).endswith("# EOF\n")
    finally:
        await server.stop()

    families = {family.name: family for family in text_string_to_metric_families(text)}
    # The parser names counter families without their _total suffix.
    assert families["controller_runtime_reconcile"].type == "counter"
    assert families["controller_runtime_reconcile_time_seconds"].type == "histogram"
    assert {"process_resident_memory_bytes", "python_gc_objects_collected", "python_info"} <= set(
        families
    )
    buckets = [
        float(sample.labels["le"])
        for sample in families["controller_runtime_reconcile_time_seconds"].samples
        if sample.name.endswith("_bucket") and sample.labels["controller"] == "scraped"
    ]
    assert buckets == [*CONTROLLER_RUNTIME_BUCKETS, float("inf")]
    assert not any(name.endswith("_created") for name in families)
    for name in WORKQUEUE_FAMILIES:
        assert any(sample.labels.get("name") == "scraped" for sample in families[name].samples)
    assert families["rest_client_requests"].type == "counter"
    workers = families["controller_runtime_max_concurrent_reconciles"].samples
    assert [s.value for s in workers if s.labels["controller"] == "scraped"] == [2]


async def test_metrics_server_disabled_with_zero() -> None:
    server = metrics_server("0")
    await server.start()
    assert server.port is None
    await server.stop()


def exposed_metric_names() -> set[str]:
    names: set[str] = set()
    for family in REGISTRY.collect():
        names.add(family.name)
        names.update(sample.name for sample in family.samples)
        if family.type == "counter":
            names.add(f"{family.name}_total")
        if family.type == "histogram":
            names.update(f"{family.name}_{suffix}" for suffix in ("bucket", "sum", "count"))
    return names


PROMQL_WORDS = {"sum", "max", "rate", "histogram_quantile", "label_values"}


def metric_names(query: str) -> set[str]:
    """Identifiers left once strings, matchers, ranges, groupings and label args are removed."""
    query = re.sub(r'"[^"]*"', "", query)
    query = re.sub(r"\{[^}]*\}|\[[^\]]*\]|\bby\s*\([^)]*\)|,\s*\w+\)$", "", query)
    return set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", query)) - PROMQL_WORDS


def test_metric_names_parses_panel_and_variable_queries() -> None:
    assert metric_names(
        'histogram_quantile(0.99, sum by (controller, le) (rate(x_bucket{job=~"$job"}[5m])))'
    ) == {"x_bucket"}
    assert metric_names('label_values(y_total{job=~"$job"}, namespace)') == {"y_total"}


def test_dashboard_queries_only_use_exposed_metrics() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert 36 <= dashboard["schemaVersion"] <= 41
    variables = {variable["name"]: variable for variable in dashboard["templating"]["list"]}
    assert {"datasource", "job", "namespace", "controller"} <= variables.keys()
    assert variables["datasource"]["type"] == "datasource"

    panels = dashboard["panels"]
    assert len({panel["id"] for panel in panels}) == len(panels)
    queries = [v["definition"] for v in variables.values() if v["type"] == "query"]
    for panel in (panel for panel in panels if panel["type"] != "row"):
        assert panel["datasource"]["uid"] == "${datasource}"
        assert panel["targets"], panel["title"]
        queries += [target["expr"] for target in panel["targets"]]

    known = exposed_metric_names()
    used: set[str] = set()
    for query in queries:
        names = metric_names(query)
        assert names, query
        # The operators' own opsuite_* metrics: hack/tests/test_dashboard.py.
        assert {n for n in names if not n.startswith("opsuite_")} <= known, query
        used |= names
    assert {
        "controller_runtime_reconcile_total",
        "controller_runtime_reconcile_errors_total",
        "controller_runtime_reconcile_time_seconds_bucket",
        "controller_runtime_active_workers",
        "controller_runtime_max_concurrent_reconciles",
        "workqueue_depth",
        "leader_election_master_status",
        "process_resident_memory_bytes",
        "process_cpu_seconds_total",
    } <= used
