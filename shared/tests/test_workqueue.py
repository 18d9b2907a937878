"""The work queue's delayed adds: one waiting entry per key, at the earliest time asked."""

import asyncio

from opsuite_common.workqueue import WorkQueue


async def test_delayed_adds_of_a_key_coalesce_at_the_earliest_time() -> None:
    adds: list[bool] = []
    queue: WorkQueue[str] = WorkQueue(on_queued=adds.append)
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
    assert adds == [False]


async def test_a_retry_folded_into_a_waiting_add_still_counts_as_a_retry() -> None:
    adds: list[bool] = []
    queue: WorkQueue[str] = WorkQueue(on_queued=adds.append)
    queue.add_after("a", 0.01)
    queue.add_rate_limited("a")  # 5 ms backoff: earlier, replaces the entry
    queue.add_after("b", 0.01)
    queue.add_after("b", 0.02, retry=True)  # later: folded into the waiting entry
    assert {await asyncio.wait_for(queue.get(), 1) for _ in range(2)} == {"a", "b"}
    assert adds == [True, True]
