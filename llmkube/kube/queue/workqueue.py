"""The rate-limited, delaying, priority workqueue (async shell around :class:`QueueState`).

Usage from a worker (the client-go canonical loop)::

    key = await queue.get()          # None once the queue is shut down and empty
    try:
        ...
        queue.forget(key)            # success: clear the key's backoff history
    except Exception:
        queue.add_rate_limited(key)  # failure: retry with per-key exponential backoff
    finally:
        queue.done(key)

Time comes from an injected :class:`~llmkube.kube.clock.Clock`, so tests drive delays with a
``FakeClock`` instead of sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from prometheus_client import Gauge

from llmkube.kube import metrics
from llmkube.kube.clock import Clock, RealClock
from llmkube.kube.queue.ratelimit import RateLimiter, default_controller_rate_limiter
from llmkube.kube.queue.state import NULL_QUEUE_METRICS, QueueMetricsSink, QueueState

__all__ = ["LOW_PRIORITY", "PrometheusQueueMetrics", "WorkQueue"]

K = TypeVar("K", bound=Hashable)

#: controller-runtime's ``handler.LowPriority``: initial-list and resync events use it so that
#: real changes overtake a restart's "reconcile everything" backlog.
LOW_PRIORITY = -100

_MAX_PRIORITY_LABELS = 25


class PrometheusQueueMetrics:
    """Reports to the ``workqueue_*`` metrics, labelled ``name`` = ``controller`` = the queue name."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._labels = (name, name)
        self._adds = metrics.WORKQUEUE_ADDS.labels(*self._labels)
        self._retries = metrics.WORKQUEUE_RETRIES.labels(*self._labels)
        self._queue_duration = metrics.WORKQUEUE_QUEUE_DURATION.labels(*self._labels)
        self._work_duration = metrics.WORKQUEUE_WORK_DURATION.labels(*self._labels)
        self._priority_labels: set[str] = set()
        self._depth_children: dict[int, Gauge] = {}
        self._depth(0)  # the default-priority series exists from the start, at 0

    def _depth(self, priority: int) -> Gauge:
        child = self._depth_children.get(priority)
        if child is None:
            label = str(priority)
            if len(self._priority_labels) >= _MAX_PRIORITY_LABELS:
                label = "exceeded_cardinality_limit"
            self._priority_labels.add(label)
            # labels() takes a lock and builds a key on every call: resolve each child once.
            child = self._depth_children[priority] = metrics.WORKQUEUE_DEPTH.labels(*self._labels, label)
        return child

    def added(self, priority: int) -> None:
        self._adds.inc()
        self._depth(priority).inc()

    def reprioritised(self, old: int, new: int) -> None:
        self._depth(old).dec()
        self._depth(new).inc()

    def handed_out(self, priority: int, waited: float) -> None:
        self._depth(priority).dec()
        self._queue_duration.observe(max(0.0, waited))

    def finished(self, worked: float) -> None:
        self._work_duration.observe(max(0.0, worked))

    def retried(self) -> None:
        self._retries.inc()

    def bind_processing_gauges(self, state: QueueState[K], clock: Clock) -> None:
        """Unfinished-work gauges are computed at scrape time from the processing start times."""

        def unfinished() -> float:
            now = clock.monotonic()
            return sum(now - started for started in state.processing_started())

        def longest() -> float:
            now = clock.monotonic()
            return max((now - started for started in state.processing_started()), default=0.0)

        metrics.WORKQUEUE_UNFINISHED_WORK.labels(*self._labels).set_function(unfinished)
        metrics.WORKQUEUE_LONGEST_RUNNING.labels(*self._labels).set_function(longest)

    def unregister(self) -> None:
        """Drop this queue's series (a controller that goes away must not leave stale gauges)."""
        for gauge in (metrics.WORKQUEUE_UNFINISHED_WORK, metrics.WORKQUEUE_LONGEST_RUNNING):
            with contextlib.suppress(KeyError):
                gauge.remove(*self._labels)
        for label in self._priority_labels:
            with contextlib.suppress(KeyError):
                metrics.WORKQUEUE_DEPTH.remove(*self._labels, label)


class WorkQueue(Generic[K]):
    def __init__(
        self,
        name: str,
        *,
        clock: Clock | None = None,
        rate_limiter: RateLimiter | None = None,
        with_metrics: bool = True,
    ) -> None:
        self.name = name
        self._clock = clock or RealClock()
        self._limiter = rate_limiter or default_controller_rate_limiter(self._clock)
        self._metrics: PrometheusQueueMetrics | None = PrometheusQueueMetrics(name) if with_metrics else None
        sink: QueueMetricsSink = self._metrics or NULL_QUEUE_METRICS
        self._state: QueueState[K] = QueueState(sink)
        if self._metrics is not None:
            self._metrics.bind_processing_gauges(self._state, self._clock)
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._timer: asyncio.Task[None] | None = None
        self._timer_deadline: float | None = None
        self._idle: asyncio.Event | None = None

    # -- producers ------------------------------------------------------------------------------

    def add(self, key: K, priority: int = 0) -> None:
        if self._state.add(key, self._clock.monotonic(), priority):
            self._wake(1)

    def add_after(self, key: K, delay: float, priority: int = 0) -> None:
        if self._state.add_after(key, delay, self._clock.monotonic(), priority):
            self._wake(1)
        else:
            self._arm_timer()

    def add_rate_limited(self, key: K, priority: int = 0) -> None:
        self.add_after(key, self._limiter.when(key), priority)

    def forget(self, key: K) -> None:
        self._limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        return self._limiter.num_requeues(key)

    # -- consumers ------------------------------------------------------------------------------

    async def get(self) -> K | None:
        """Wait for a ready key and mark it processing; None once shut down with nothing ready."""
        while True:
            key = self._state.get(self._clock.monotonic())
            if key is not None:
                return key
            if self._state.shutting_down:
                return None
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            self._arm_timer()
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake(1)  # we were woken for an item we will not take: pass it on
                raise
            finally:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)

    def done(self, key: K) -> None:
        if self._state.done(key, self._clock.monotonic()):
            self._wake(1)
        if self._idle is not None and self._state.processing_count() == 0:
            self._idle.set()

    # -- shutdown -------------------------------------------------------------------------------

    def shut_down(self) -> None:
        """Ignore further adds, drop delayed keys, and let blocked ``get`` calls return."""
        self._state.shut_down()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._wake(len(self._waiters))

    async def shut_down_with_drain(self) -> None:
        """Shut down, then wait until every handed-out key has been marked ``done``."""
        self.shut_down()
        if self._state.processing_count():
            self._idle = asyncio.Event()
            await self._idle.wait()

    def close_metrics(self) -> None:
        if self._metrics is not None:
            self._metrics.unregister()

    # -- inspection -----------------------------------------------------------------------------

    @property
    def shutting_down(self) -> bool:
        return self._state.shutting_down

    def __len__(self) -> int:
        return len(self._state)

    def waiting(self) -> int:
        return self._state.waiting()

    def processing(self) -> int:
        return self._state.processing_count()

    def priority_of(self, key: K) -> int | None:
        """The priority a pending key will be handed out with (None when not pending)."""
        return self._state.priority_of(key)

    # -- internals ------------------------------------------------------------------------------

    def _wake(self, count: int) -> None:
        for waiter in list(self._waiters):
            if count <= 0:
                break
            if not waiter.done():
                waiter.set_result(None)
                count -= 1

    def _arm_timer(self) -> None:
        deadline = self._state.next_ready_at()
        if deadline is None:
            return
        if self._timer is not None and self._timer_deadline is not None and self._timer_deadline <= deadline:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_deadline = deadline
        self._timer = asyncio.get_running_loop().create_task(self._fire_at(deadline))

    async def _fire_at(self, deadline: float) -> None:
        await self._clock.sleep(deadline - self._clock.monotonic())
        self._timer = None
        self._timer_deadline = None
        moved = self._state.promote(self._clock.monotonic())
        if moved:
            self._wake(moved)
        self._arm_timer()
