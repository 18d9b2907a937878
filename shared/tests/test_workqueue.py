"""The work queue: client-go's dedupe, dirty re-queue and delayed adds, and controller-runtime's
default rate limiter (per-key exponential backoff, max'd with an overall token bucket)."""

import asyncio
from collections.abc import Hashable

import pytest

from opsuite_common.workqueue import BASE_DELAY, MAX_DELAY, TokenBucket, WorkQueue


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Recorder:
    """A QueueMetrics that remembers what the queue reported."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Hashable]] = []

    def add(self, key: Hashable) -> None:
        self.events.append(("add", key))

    def get(self, key: Hashable) -> None:
        self.events.append(("get", key))

    def done(self, key: Hashable) -> None:
        self.events.append(("done", key))

    def retry(self) -> None:
        self.events.append(("retry", None))

    def count(self, kind: str) -> int:
        return sum(1 for event, _ in self.events if event == kind)


async def test_a_key_added_twice_while_queued_is_processed_once() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    queue.add("b")
    queue.add("a")
    assert len(queue) == 2
    assert await queue.get() == "a"
    queue.done("a")
    assert await queue.get() == "b"
    queue.done("b")
    assert len(queue) == 0


async def test_a_key_added_while_processed_comes_back_once_after_done() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    assert await queue.get() == "a"
    queue.add("a")
    queue.add("a")
    assert len(queue) == 0  # never handed to a second worker while processed
    getter = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    assert not getter.done()
    queue.done("a")
    assert await asyncio.wait_for(getter, 1) == "a"
    assert len(queue) == 0
    queue.done("a")
    assert len(queue) == 0


async def test_per_key_backoff_doubles_up_to_its_cap_and_forget_resets_it() -> None:
    # controller-runtime's DefaultTypedControllerRateLimiter: 5 ms doubling to 1000 s.
    assert (BASE_DELAY, MAX_DELAY) == (0.005, 1000.0)
    queue: WorkQueue[str] = WorkQueue(overall=TokenBucket(rate=1e9, burst=10**9))
    delays = [queue.add_rate_limited("a") for _ in range(20)]
    assert delays[:4] == [0.005, 0.01, 0.02, 0.04]
    assert delays[17] == pytest.approx(0.005 * 2**17)  # 655.36 s
    assert delays[18:] == [1000.0, 1000.0]
    assert queue.retries("a") == 20
    assert queue.add_rate_limited("b") == 0.005  # per key
    queue.forget("a")
    assert queue.retries("a") == 0
    assert queue.add_rate_limited("a") == 0.005


def test_token_bucket_bursts_then_paces_like_golang_rate_limiter() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=10, burst=100, clock=clock)
    assert [bucket.reserve() for _ in range(100)] == [0.0] * 100
    assert [bucket.reserve() for _ in range(3)] == pytest.approx([0.1, 0.2, 0.3])
    clock.now += 0.3  # the debt is paid: the next token comes 0.1 s later
    assert bucket.reserve() == pytest.approx(0.1)
    clock.now += 60  # refills to the burst, not beyond
    assert [bucket.reserve() for _ in range(100)] == [0.0] * 100
    assert bucket.reserve() == pytest.approx(0.1)


async def test_overall_bucket_paces_rate_limited_re_adds_of_many_keys() -> None:
    clock = FakeClock()
    queue: WorkQueue[int] = WorkQueue(overall=TokenBucket(clock=clock))
    delays = [queue.add_rate_limited(key) for key in range(150)]
    # The first 100 failing keys wait only their own first backoff (5 ms)...
    assert delays[:100] == [0.005] * 100
    # ...the next 50 are let through at 10 per second.
    assert delays[100:] == pytest.approx([0.1 * n for n in range(1, 51)])
    # Plain adds are not rate limited.
    for key in range(150, 400):
        queue.add(key)
    assert len(queue) == 250
    # Forget resets a key's backoff, not the overall bucket.
    queue.forget(0)
    assert queue.add_rate_limited(0) == pytest.approx(5.1)
    clock.now += 60  # the bucket refilled: only the key's own backoff is left
    assert queue.add_rate_limited(0) == 0.01


async def test_overall_bucket_defaults_to_10_qps_and_100_burst() -> None:
    queue: WorkQueue[str] = WorkQueue()
    assert (queue.overall.rate, queue.overall.burst) == (10.0, 100)


async def test_delayed_adds_of_a_key_coalesce_at_the_earliest_time() -> None:
    recorder = Recorder()
    queue: WorkQueue[str] = WorkQueue(metrics=recorder)
    loop = asyncio.get_running_loop()
    start = loop.time()
    queue.add_after("a", 0.2)
    queue.add_after("a", 0.05)  # earlier: replaces the 0.2 s entry
    queue.add_after("a", 0.1)  # later than the waiting one: no effect
    assert await asyncio.wait_for(queue.get(), 1) == "a"
    assert 0.04 <= loop.time() - start < 0.15
    queue.done("a")
    await asyncio.sleep(0.25)  # the superseded entries release nothing
    assert len(queue) == 0
    assert recorder.events == [("add", "a"), ("get", "a"), ("done", "a")]


async def test_retries_count_each_rate_limited_or_retry_add_like_client_go() -> None:
    recorder = Recorder()
    queue: WorkQueue[str] = WorkQueue(metrics=recorder)
    queue.add_after("a", 0.01)  # an ordinary delayed add: not a retry
    queue.add_rate_limited("a")  # 5 ms backoff: earlier, replaces the entry
    queue.add_after("b", 0.01)
    queue.add_after("b", 0.02, retry=True)  # later: folded into the waiting entry
    assert {await asyncio.wait_for(queue.get(), 1) for _ in range(2)} == {"a", "b"}
    assert recorder.count("retry") == 2
    assert recorder.count("add") == 2


async def test_metrics_follow_client_go_add_get_done() -> None:
    recorder = Recorder()
    queue: WorkQueue[str] = WorkQueue(metrics=recorder)
    queue.add("a")
    queue.add("a")  # deduplicated: no add
    key = await queue.get()
    queue.add("a")  # dirty while processed: an add, queued at done
    queue.done(key)
    assert await queue.get() == "a"
    queue.done("a")
    assert recorder.events == [
        ("add", "a"),
        ("get", "a"),
        ("add", "a"),
        ("done", "a"),
        ("get", "a"),
        ("done", "a"),
    ]
