"""The async workqueue shell: waiting, timers on a fake clock, shutdown, metrics."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import REGISTRY

from llmkube.kube.clock import FakeClock, settle
from llmkube.kube.queue import LOW_PRIORITY, ItemExponentialRateLimiter, WorkQueue


def sample(name: str, queue: str, **extra: str) -> float | None:
    return REGISTRY.get_sample_value(name, {"name": queue, "controller": queue, **extra})


async def test_get_blocks_until_an_add() -> None:
    queue: WorkQueue[str] = WorkQueue("wq-block", clock=FakeClock())
    getter = asyncio.create_task(queue.get())
    await settle()
    assert not getter.done()
    queue.add("a")
    assert await asyncio.wait_for(getter, 1) == "a"
    queue.done("a")
    queue.shut_down()


async def test_add_after_wakes_a_waiting_worker_at_the_fake_time() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue("wq-after", clock=clock)
    getter = asyncio.create_task(queue.get())
    queue.add_after("a", 5.0)
    await clock.advance(4.9)
    assert not getter.done()
    await clock.advance(0.1)
    assert getter.done()
    assert getter.result() == "a"
    queue.shut_down()


async def test_an_earlier_add_after_rearms_the_timer() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue("wq-rearm", clock=clock)
    getter = asyncio.create_task(queue.get())
    queue.add_after("late", 60.0)
    await settle()
    queue.add_after("early", 2.0)
    await clock.advance(2.0)
    assert getter.result() == "early"
    queue.shut_down()


async def test_two_workers_never_hold_the_same_key() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue("wq-two", clock=clock)
    held: list[str] = []
    overlaps: list[str] = []
    processed: list[str] = []

    async def worker() -> None:
        while (key := await queue.get()) is not None:
            if key in held:
                overlaps.append(key)
            held.append(key)
            await clock.sleep(1.0)
            processed.append(key)
            held.remove(key)
            queue.done(key)

    workers = [asyncio.create_task(worker()) for _ in range(2)]
    queue.add("a")
    await settle()
    queue.add("a")  # re-add while one worker holds it: the other worker must not get it
    queue.add("b")
    await clock.advance(1.0)
    await clock.advance(1.0)
    await clock.advance(1.0)
    queue.shut_down()
    await asyncio.wait_for(asyncio.gather(*workers), 1)
    assert overlaps == []
    assert sorted(processed) == ["a", "a", "b"]


async def test_shutdown_releases_blocked_getters() -> None:
    queue: WorkQueue[str] = WorkQueue("wq-shutdown", clock=FakeClock())
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await settle()
    queue.shut_down()
    assert await asyncio.wait_for(asyncio.gather(*getters), 1) == [None, None, None]
    queue.add("ignored")
    assert len(queue) == 0


async def test_shutdown_with_drain_waits_for_done() -> None:
    queue: WorkQueue[str] = WorkQueue("wq-drain", clock=FakeClock())
    queue.add("a")
    assert await queue.get() == "a"
    drain = asyncio.create_task(queue.shut_down_with_drain())
    await settle()
    assert not drain.done()
    queue.done("a")
    await asyncio.wait_for(drain, 1)


async def test_rate_limited_requeues_back_off_per_key() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(
        "wq-ratelimit", clock=clock, rate_limiter=ItemExponentialRateLimiter(1.0, 8.0)
    )
    handed_out_at: list[float] = []

    async def failing_worker() -> None:
        while (key := await queue.get()) is not None:
            handed_out_at.append(clock.monotonic() - start)
            queue.add_rate_limited(key)
            queue.done(key)

    start = clock.monotonic()
    worker = asyncio.create_task(failing_worker())
    queue.add("k")
    for _ in range(40):
        await clock.advance(1.0)
    queue.shut_down()
    await asyncio.wait_for(worker, 1)
    # 1, 2, 4, 8, then capped at 8 s between attempts.
    assert handed_out_at[:6] == [0.0, 1.0, 3.0, 7.0, 15.0, 23.0]
    assert queue.num_requeues("k") == len(handed_out_at)
    queue.forget("k")
    assert queue.num_requeues("k") == 0


async def test_low_priority_backlog_is_overtaken() -> None:
    queue: WorkQueue[str] = WorkQueue("wq-priority", clock=FakeClock())
    for index in range(5):
        queue.add(f"initial-{index}", LOW_PRIORITY)
    queue.add("changed")
    assert await queue.get() == "changed"
    assert await queue.get() == "initial-0"


async def test_cancelled_waiter_passes_its_wakeup_on() -> None:
    queue: WorkQueue[str] = WorkQueue("wq-cancel", clock=FakeClock())
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await settle()
    queue.add("a")  # wakes `first` ...
    first.cancel()  # ... which is cancelled before it can take the key
    await settle()
    assert second.done()
    assert second.result() == "a"
    queue.shut_down()


async def test_prometheus_metrics_follow_the_queue() -> None:
    clock = FakeClock()
    name = "wq-metrics"
    queue: WorkQueue[str] = WorkQueue(name, clock=clock)
    queue.add("a")
    queue.add("b", LOW_PRIORITY)
    queue.add_after("c", 1.0)
    assert sample("workqueue_adds_total", name) == 2
    assert sample("workqueue_retries_total", name) == 1
    assert sample("workqueue_depth", name, priority="0") == 1
    assert sample("workqueue_depth", name, priority="-100") == 1
    await clock.advance(0.5)
    assert await queue.get() == "a"
    assert sample("workqueue_depth", name, priority="0") == 0
    assert sample("workqueue_queue_duration_seconds_count", name) == 1
    assert sample("workqueue_queue_duration_seconds_bucket", name, le="1.0") == 1
    assert sample("workqueue_queue_duration_seconds_bucket", name, le="0.1") == 0  # waited 0.5 s
    await clock.advance(2.0)
    assert sample("workqueue_unfinished_work_seconds", name) == pytest.approx(2.0)
    assert sample("workqueue_longest_running_processor_seconds", name) == pytest.approx(2.0)
    queue.done("a")
    assert sample("workqueue_work_duration_seconds_count", name) == 1
    assert sample("workqueue_unfinished_work_seconds", name) == 0
    assert sample("workqueue_adds_total", name) == 3  # c became ready at t+1
    queue.shut_down()
    queue.close_metrics()
    assert sample("workqueue_depth", name, priority="0") is None


def test_duration_buckets_match_controller_runtime() -> None:
    from llmkube.kube.metrics import WORKQUEUE_DURATION_BUCKETS

    assert WORKQUEUE_DURATION_BUCKETS == (
        1e-8,
        1e-7,
        1e-6,
        1e-5,
        1e-4,
        1e-3,
        1e-2,
        1e-1,
        1.0,
        10.0,
        100.0,
        1000.0,
    )
