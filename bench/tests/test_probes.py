"""The probe-latency benchmark's statistics and sampler, without a cluster."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.probes import Sample, Sampler, percentile, probe, summarize


def test_percentiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([5.0], 99) == 5.0
    # With fewer than 100 values the p99 is the maximum.
    assert percentile([0.1] * 98 + [2.0], 99) == 2.0
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)
    with pytest.raises(ValueError, match="not in"):
        percentile([1.0], 0)


@given(st.lists(st.floats(0, 10), min_size=1, max_size=300), st.floats(0.01, 100))
def test_a_percentile_is_a_sample_with_at_least_q_percent_at_or_below_it(
    values: list[float], q: float
) -> None:
    p = percentile(values, q)
    assert p in values
    assert sum(v <= p for v in values) >= q / 100 * len(values)
    assert sum(v < p for v in values) < q / 100 * len(values)


def test_summary_counts_slow_and_unanswered_probes() -> None:
    samples = [Sample(float(i), 0.01, 200) for i in range(97)]
    samples += [Sample(97, 1.5, 200), Sample(98, 5.0, 0), Sample(99, 0.02, 500)]
    summary = summarize(samples)
    assert summary.samples == 100
    assert summary.p50 == 0.01
    assert summary.p99 == 1.5
    assert summary.max == 5.0
    assert summary.over_kubelet_timeout == 2  # the 1.5 s answer and the unanswered one
    assert summary.not_ok == 2  # the unanswered one and the 500


class _Handler(BaseHTTPRequestHandler):
    delays: ClassVar[dict[str, float]] = {"/fast": 0.0, "/slow": 0.5}

    def do_GET(self) -> None:
        time.sleep(self.delays.get(self.path, 0.0))
        self.send_response(200 if self.path in self.delays else 500)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_probe_measures_latency_and_reports_timeouts_as_status_0(server: str) -> None:
    latency, status = probe(f"{server}/slow", timeout=5)
    assert status == 200
    assert 0.5 <= latency < 2
    latency, status = probe(f"{server}/slow", timeout=0.1)
    assert status == 0
    assert 0.1 <= latency < 0.5
    assert probe(f"{server}/missing", timeout=5)[1] == 500


def test_the_sampler_probes_each_url_on_its_own_schedule(server: str) -> None:
    with Sampler({"fast": f"{server}/fast", "slow": f"{server}/slow"}, interval=0.1) as sampler:
        time.sleep(1.2)
    fast, slow = sampler.samples["fast"], sampler.samples["slow"]
    assert 8 <= len(fast) <= 13
    assert 2 <= len(slow) <= 3  # each probe takes 0.5 s: a slow endpoint does not delay others
    assert all(s.status == 200 for s in fast + slow)
    assert min(s.latency for s in slow) >= 0.5
