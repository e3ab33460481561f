"""Workqueue and controller-runner throughput (prints one JSON object).

.venv/bin/python bench/bench_kube_workqueue.py [--items 50000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from llmkube.kube.clock import FakeClock
from llmkube.kube.control import Controller
from llmkube.kube.queue import LOW_PRIORITY, WorkQueue
from llmkube.kube.queue.ratelimit import default_controller_rate_limiter
from llmkube.kube.queue.state import QueueState
from llmkube.kube.types import ObjectKey
from llmkube.manager import configure_logging


def timed(run: Callable[[], int]) -> dict[str, float]:
    gc.collect()
    started = time.perf_counter()
    operations = run()
    elapsed = time.perf_counter() - started
    return {"ops": operations, "seconds": round(elapsed, 4), "ops_per_s": round(operations / elapsed),
            "us_per_op": round(elapsed / operations * 1e6, 3)}  # fmt: skip


def state_add_get_done(items: int) -> int:
    state: QueueState[int] = QueueState()
    for key in range(items):
        state.add(key, 0.0)
    while (key := state.get(0.0)) is not None:
        state.done(key, 0.0)
    return items


def state_dedup(items: int) -> int:
    state: QueueState[int] = QueueState()
    for _ in range(items):
        state.add(7, 0.0)
    assert state.get(0.0) == 7 and state.get(0.0) is None
    return items


def state_priorities(items: int) -> int:
    state: QueueState[int] = QueueState()
    for key in range(items):
        state.add(key, 0.0, LOW_PRIORITY if key % 2 else 0)
    while (key := state.get(0.0)) is not None:
        state.done(key, 0.0)
    return items


def state_delayed(items: int) -> int:
    state: QueueState[int] = QueueState()
    for key in range(items):
        state.add_after(key, float(key % 1000) / 1000.0, 0.0)
    count = 0
    while (key := state.get(1.0)) is not None:
        state.done(key, 1.0)
        count += 1
    assert count == items
    return items


async def async_queue(items: int, workers: int, with_metrics: bool) -> int:
    queue: WorkQueue[int] = WorkQueue(f"bench-{workers}-{with_metrics}", with_metrics=with_metrics)

    async def worker() -> None:
        while (key := await queue.get()) is not None:
            queue.done(key)

    tasks = [asyncio.create_task(worker()) for _ in range(workers)]
    for key in range(items):
        queue.add(key)
        if key % 1000 == 0:
            await asyncio.sleep(0)
    queue.shut_down()
    await asyncio.gather(*tasks)
    queue.close_metrics()
    return items


async def controller_noop(items: int, workers: int) -> int:
    done = asyncio.Event()
    seen = 0

    async def reconcile(key: ObjectKey) -> None:
        nonlocal seen
        seen += 1
        if seen == items:
            done.set()

    controller = Controller(f"bench-controller-{workers}", reconcile, workers=workers)
    controller.start()
    for index in range(items):
        controller.enqueue(ObjectKey("ns", f"obj-{index}"))
        if index % 1000 == 0:
            await asyncio.sleep(0)
    await done.wait()
    await controller.stop(grace=5)
    controller.close()
    return items


def rate_limited_requeues(items: int) -> int:
    """The logic cost of a failed reconcile: limiter (max-of item backoff and bucket) + delayed add."""
    limiter = default_controller_rate_limiter(FakeClock())
    state: QueueState[int] = QueueState()
    for key in range(items):
        state.add_after(key, limiter.when(key), 0.0)
    count = 0
    while (key := state.get(10_000.0)) is not None:
        state.done(key, 10_000.0)
        limiter.forget(key)
        count += 1
    assert count == items
    return items


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=50_000)
    items = parser.parse_args().items
    configure_logging("warning", "json")  # stdout carries only the JSON result

    def run_async(factory: Callable[[], Any]) -> Callable[[], int]:
        return lambda: asyncio.run(factory())

    results = {
        "python": sys.version.split()[0],
        "items": items,
        "queue_state_add_get_done": timed(lambda: state_add_get_done(items)),
        "queue_state_dedup_same_key": timed(lambda: state_dedup(items)),
        "queue_state_two_priorities": timed(lambda: state_priorities(items)),
        "queue_state_delayed_then_ready": timed(lambda: state_delayed(items)),
        "workqueue_async_1_worker_metrics": timed(run_async(lambda: async_queue(items, 1, True))),
        "workqueue_async_8_workers_metrics": timed(run_async(lambda: async_queue(items, 8, True))),
        "workqueue_async_8_workers_no_metrics": timed(run_async(lambda: async_queue(items, 8, False))),
        "rate_limited_requeue_then_forget": timed(lambda: rate_limited_requeues(items)),
        "controller_noop_reconcile_4_workers": timed(run_async(lambda: controller_noop(items // 5, 4))),
    }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
