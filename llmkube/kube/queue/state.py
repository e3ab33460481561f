"""The workqueue's bookkeeping as a synchronous state machine, driven by explicit times.

This is the client-go workqueue contract (``util/workqueue``) merged with the delaying
queue and controller-runtime's priority queue, with no I/O and no clock of its own, so every rule
is a table-driven test:

* a key is *pending* (waiting for a ready time, or ready), *processing* (handed to a worker), or
  both (re-added while a worker holds it: it stays pending and is handed out only after ``done``);
* adding a pending key again merges: the higher priority and the earlier ready time win, so N adds
  before a ``get`` give one processing;
* ``get`` hands out the highest priority ready key, first-added first among equals, never a key
  that is already being processed;
* after ``shut_down`` adds are ignored, waiting (delayed) keys are dropped, and ``get`` keeps
  handing out what is already ready until nothing is left.

The async :class:`~llmkube.kube.queue.workqueue.WorkQueue` wraps this with waiting and timers.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

__all__ = ["NULL_QUEUE_METRICS", "QueueMetricsSink", "QueueState"]

K = TypeVar("K", bound=Hashable)


class QueueMetricsSink(Protocol):
    """Where the queue reports adds, hand-outs and completions (Prometheus in production)."""

    def added(self, priority: int) -> None: ...

    def reprioritised(self, old: int, new: int) -> None: ...

    def handed_out(self, priority: int, waited: float) -> None: ...

    def finished(self, worked: float) -> None: ...

    def retried(self) -> None: ...


class _NullMetrics:
    def added(self, priority: int) -> None:
        pass

    def reprioritised(self, old: int, new: int) -> None:
        pass

    def handed_out(self, priority: int, waited: float) -> None:
        pass

    def finished(self, worked: float) -> None:
        pass

    def retried(self) -> None:
        pass


NULL_QUEUE_METRICS: QueueMetricsSink = _NullMetrics()


@dataclass(slots=True)
class _Entry(Generic[K]):
    key: K
    priority: int
    seq: int
    ready_at: float | None  # None: ready (dirty); a time: waiting in the delay heap
    queued_at: float  # when it became ready, for the queue-latency histogram
    token: int  # bumps whenever its place in the ready heap changes (older heap rows are stale)


class QueueState(Generic[K]):
    def __init__(self, metrics: QueueMetricsSink = NULL_QUEUE_METRICS) -> None:
        self._metrics = metrics
        self._pending: dict[K, _Entry[K]] = {}
        self._ready_heap: list[tuple[int, int, int, K]] = []  # (-priority, seq, token, key)
        self._delay_heap: list[tuple[float, int, K]] = []  # (ready_at, seq, key)
        self._processing: dict[K, float] = {}  # key -> when it was handed out
        self._ready_count = 0
        self._shutting_down = False
        self._seq = itertools.count()
        self._tokens = itertools.count()

    # -- adding ---------------------------------------------------------------------------------

    def add(self, key: K, now: float, priority: int = 0) -> bool:
        """Make ``key`` ready now.  Returns True when a new ready entry appeared (wake a worker)."""
        if self._shutting_down:
            return False
        entry = self._pending.get(key)
        if entry is None:
            entry = _Entry(key, priority, next(self._seq), None, now, 0)
            self._pending[key] = entry
            self._make_ready(entry, now)
            return True
        if entry.ready_at is not None:  # it was waiting for a delay: an immediate add wins
            entry.priority = max(entry.priority, priority)
            self._make_ready(entry, now)
            return True
        if priority > entry.priority:
            self._metrics.reprioritised(entry.priority, priority)
            entry.priority = priority
            self._push_ready(entry)
        return False

    def add_after(self, key: K, delay: float, now: float, priority: int = 0) -> bool:
        """Make ``key`` ready after ``delay`` seconds; an earlier pending ready time is kept.

        Counts as a retry even when ``delay <= 0`` (client-go's ``AddAfter`` does the same).
        Returns True when a new ready entry appeared right away."""
        if self._shutting_down:
            return False
        self._metrics.retried()
        if delay <= 0:
            return self.add(key, now, priority)
        ready_at = now + delay
        entry = self._pending.get(key)
        if entry is None:
            self._pending[key] = _Entry(key, priority, next(self._seq), ready_at, ready_at, 0)
            heapq.heappush(self._delay_heap, (ready_at, next(self._seq), key))
            return False
        if priority > entry.priority:
            if entry.ready_at is None:
                self._metrics.reprioritised(entry.priority, priority)
                entry.priority = priority
                self._push_ready(entry)
            else:
                entry.priority = priority
        if entry.ready_at is not None and ready_at < entry.ready_at:
            entry.ready_at = ready_at
            heapq.heappush(self._delay_heap, (ready_at, next(self._seq), key))
        return False

    def promote(self, now: float) -> int:
        """Move every waiting key whose time has come to ready; returns how many moved."""
        moved = 0
        while self._delay_heap and self._delay_heap[0][0] <= now:
            ready_at, _, key = heapq.heappop(self._delay_heap)
            entry = self._pending.get(key)
            if entry is None or entry.ready_at != ready_at:
                continue  # superseded by an earlier time or by an immediate add
            self._make_ready(entry, ready_at)
            moved += 1
        return moved

    # -- handing out ----------------------------------------------------------------------------

    def get(self, now: float) -> K | None:
        """Hand out the best ready key that nobody is processing, or None."""
        self.promote(now)
        while self._ready_heap:
            _, _, token, key = heapq.heappop(self._ready_heap)
            entry = self._pending.get(key)
            if entry is None or entry.ready_at is not None or entry.token != token:
                continue  # stale row
            if key in self._processing:
                continue  # re-pushed by done()
            del self._pending[key]
            self._ready_count -= 1
            self._processing[key] = now
            self._metrics.handed_out(entry.priority, now - entry.queued_at)
            return key
        return None

    def done(self, key: K, now: float) -> bool:
        """Mark ``key`` finished.  Returns True when it was re-added meanwhile and is ready again."""
        started = self._processing.pop(key, None)
        if started is None:
            return False
        self._metrics.finished(now - started)
        entry = self._pending.get(key)
        if entry is not None and entry.ready_at is None:
            self._push_ready(entry)
            return True
        return False

    def shut_down(self) -> None:
        """Stop accepting adds and drop delayed keys; ready keys are still handed out."""
        self._shutting_down = True
        for key in [key for key, entry in self._pending.items() if entry.ready_at is not None]:
            del self._pending[key]
        self._delay_heap.clear()

    # -- inspection -----------------------------------------------------------------------------

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def __len__(self) -> int:
        """Ready keys (the client-go ``Len``: waiting and processing keys are not counted)."""
        return self._ready_count

    def waiting(self) -> int:
        return sum(1 for entry in self._pending.values() if entry.ready_at is not None)

    def is_processing(self, key: K) -> bool:
        return key in self._processing

    def processing_count(self) -> int:
        return len(self._processing)

    def processing_started(self) -> list[float]:
        return list(self._processing.values())

    def next_ready_at(self) -> float | None:
        """When the earliest waiting key becomes ready (stale heap rows are discarded)."""
        while self._delay_heap:
            ready_at, _, key = self._delay_heap[0]
            entry = self._pending.get(key)
            if entry is not None and entry.ready_at == ready_at:
                return ready_at
            heapq.heappop(self._delay_heap)
        return None

    def priority_of(self, key: K) -> int | None:
        entry = self._pending.get(key)
        return None if entry is None else entry.priority

    # -- internals ------------------------------------------------------------------------------

    def _make_ready(self, entry: _Entry[K], now: float) -> None:
        entry.ready_at = None
        entry.queued_at = now
        self._ready_count += 1
        self._metrics.added(entry.priority)
        self._push_ready(entry)

    def _push_ready(self, entry: _Entry[K]) -> None:
        entry.token = next(self._tokens)
        if entry.key not in self._processing:
            heapq.heappush(self._ready_heap, (-entry.priority, entry.seq, entry.token, entry.key))
