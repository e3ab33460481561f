"""The controller runner: N workers take keys from a workqueue and call ``reconcile(key)``.

Semantics follow controller-runtime's ``reconcileHandler`` (``pkg/internal/controller``):

* an exception -> rate-limited requeue (per-key exponential backoff); counted as an error;
  unexpected exception types (bugs, not API or network failures) also count as panics;
* :class:`TerminalError` -> no requeue, counted as a terminal error;
* ``Result(requeue_after=s)`` -> backoff forgotten, key re-added after ``s`` seconds;
* ``Result(requeue=True)`` -> rate-limited requeue; otherwise success -> backoff forgotten;
* an optional per-reconcile timeout counts in ``controller_runtime_reconcile_timeouts_total``.

Every reconcile logs with controller-runtime's keys bound in structlog's context variables, so
anything the reconcile logs carries them too: ``controller``, ``controllerKind`` (the kind it is
for), ``namespace`` (left out for a cluster-scoped object), ``name`` and ``reconcileID``.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import structlog

from llmkube.kube import metrics
from llmkube.kube.blocking import StopRequested
from llmkube.kube.cache import Change
from llmkube.kube.clock import Clock, RealClock
from llmkube.kube.control.handlers import Mapper
from llmkube.kube.control.predicates import Predicate
from llmkube.kube.errors import ApiError, namespace_terminating
from llmkube.kube.leader import NotLeader
from llmkube.kube.queue import LOW_PRIORITY, RateLimiter, WorkQueue
from llmkube.kube.rest import TransportError
from llmkube.kube.types import ObjectKey

__all__ = ["Controller", "ReconcileTimeout", "Reconciler", "Result", "TerminalError"]

log = structlog.get_logger("llmkube.kube.control.controller")

RESULT_LABELS = ("success", "error", "requeue", "requeue_after")

#: Failures that are part of normal operation (the API server said no, the network hiccupped, a
#: timeout fired, the leader lease is gone, blocking work was stopped); anything else escaping a
#: reconcile is a bug and is also counted as a panic.
EXPECTED_FAILURES: tuple[type[BaseException], ...] = (
    ApiError,
    TransportError,
    TimeoutError,
    NotLeader,
    StopRequested,
)


@dataclass(frozen=True, slots=True)
class Result:
    """What a reconcile asks for next.  ``requeue_after`` polls (e.g. waiting for a rollout);
    ``requeue`` is the deprecated rate-limited retry without an error."""

    requeue_after: float | None = None
    requeue: bool = False


class TerminalError(Exception):
    """A failure that retrying cannot fix (invalid input): logged and counted, never requeued."""


class ReconcileTimeout(TimeoutError):
    """The controller's per-reconcile timeout fired."""


Reconciler = Callable[[ObjectKey], Awaitable[Result | None]]


class Controller:
    def __init__(
        self,
        name: str,
        reconcile: Reconciler,
        *,
        workers: int = 1,
        clock: Clock | None = None,
        rate_limiter: RateLimiter | None = None,
        reconcile_timeout: float | None = None,
        kind: str = "",
    ) -> None:
        if workers < 1:
            raise ValueError("a controller needs at least one worker")
        self.name = name
        self.kind = kind  # what it reconciles (controller-runtime's For), for the logs
        self.workers = workers
        self._reconcile = reconcile
        self._clock = clock or RealClock()
        self._timeout = reconcile_timeout
        self.queue: WorkQueue[ObjectKey] = WorkQueue(name, clock=self._clock, rate_limiter=rate_limiter)
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self._log = log.bind(controller=name)
        self._init_metrics()

    def _init_metrics(self) -> None:
        # Every series exists at 0 from the start so rate() works (controller-runtime's initMetrics).
        for result in RESULT_LABELS:
            metrics.RECONCILE_RESULTS.labels(self.name, result).inc(0)
        for counter in (
            metrics.RECONCILE_ERRORS,
            metrics.TERMINAL_RECONCILE_ERRORS,
            metrics.RECONCILE_PANICS,
            metrics.RECONCILE_TIMEOUTS,
        ):
            counter.labels(self.name).inc(0)
        metrics.MAX_CONCURRENT_RECONCILES.labels(self.name).set(self.workers)
        metrics.ACTIVE_WORKERS.labels(self.name).set(0)

    # -- feeding the queue ----------------------------------------------------------------------

    def enqueue(self, key: ObjectKey, priority: int = 0) -> None:
        self.queue.add(key, priority)

    def handler(self, mapper: Mapper, predicates: Sequence[Predicate] = ()) -> Callable[[Change], None]:
        """An informer handler: filter by predicates, map to keys, enqueue.

        Changes from an informer's initial LIST, and updates that did not change the object's
        resourceVersion, go in with low priority so real changes overtake a restart's backlog."""

        def handle(change: Change) -> None:
            if not all(predicate(change) for predicate in predicates):
                return
            priority = LOW_PRIORITY if change.initial or _unchanged(change) else 0
            for key in mapper(change):
                self.queue.add(key, priority)

        return handle

    # -- running --------------------------------------------------------------------------------

    def start(self) -> None:
        if self._tasks:
            return
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._worker(), name=f"controller:{self.name}:worker-{index}")
            for index in range(self.workers)
        ]
        self._log.info("workers started", workers=self.workers)

    @property
    def running(self) -> bool:
        return any(not task.done() for task in self._tasks)

    async def stop(self, grace: float | None = None) -> None:
        """Stop taking keys, let in-flight reconciles finish (up to ``grace`` seconds), then cancel."""
        self._stopping = True
        self.queue.shut_down()
        if self._tasks:
            _, pending = await asyncio.wait(self._tasks, timeout=grace)
            for task in pending:
                task.cancel()
            for task in pending:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._tasks = []
        self._log.info("workers stopped")

    def abort(self) -> None:
        """Stop taking keys and cancel in-flight reconciles now (e.g. the leader lease is gone:
        nothing they still do may count).  ``stop()`` then only collects the workers."""
        self._stopping = True
        self.queue.shut_down()
        for task in self._tasks:
            task.cancel()

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            if key is None:
                return
            try:
                if self._stopping:
                    return
                await self.process(key)
            finally:
                self.queue.done(key)
            # A reconcile that found nothing to do never waited for anything: without this, one
            # worker would run a whole backlog (a restart's every object) without letting the loop
            # serve /readyz, read a watch or renew the lease. asyncio has no preemption.
            await asyncio.sleep(0)

    async def process(self, key: ObjectKey) -> None:
        """Reconcile one key and act on the outcome (public for tests driving a single step)."""
        keys: dict[str, str] = {"controller": self.name}
        if self.kind:
            keys["controllerKind"] = self.kind
        if key.namespace:
            keys["namespace"] = key.namespace
        keys["name"] = key.name
        keys["reconcileID"] = str(uuid.uuid4())
        with structlog.contextvars.bound_contextvars(**keys):
            active = metrics.ACTIVE_WORKERS.labels(self.name)
            active.inc()
            started = self._clock.monotonic()
            try:
                result = await self._run_reconcile(key)
            except asyncio.CancelledError:
                raise
            except TerminalError as error:
                self.queue.forget(key)
                metrics.TERMINAL_RECONCILE_ERRORS.labels(self.name).inc()
                self._count_error()
                log.error("terminal reconcile error, not retrying", error=str(error))
            except Exception as error:  # a reconcile must never kill its worker
                if isinstance(error, ApiError) and namespace_terminating(error):
                    # The namespace is being deleted, and the object with it: nothing can be created
                    # there again and a retry cannot change that (the object's deletion ends it).
                    self.queue.forget(key)
                    log.info("namespace is terminating: nothing written, not retried", error=str(error))
                    return
                if isinstance(error, ReconcileTimeout):
                    metrics.RECONCILE_TIMEOUTS.labels(self.name).inc()
                if not isinstance(error, EXPECTED_FAILURES):
                    metrics.RECONCILE_PANICS.labels(self.name).inc()
                self.queue.add_rate_limited(key)
                self._count_error()
                log.error(
                    "reconcile failed",
                    error=repr(error),
                    requeues=self.queue.num_requeues(key),
                    exc_info=not isinstance(error, EXPECTED_FAILURES),
                )
            else:
                self._handle_result(key, result or Result())
            finally:
                active.dec()
                metrics.RECONCILE_TIME.labels(self.name).observe(self._clock.monotonic() - started)

    async def _run_reconcile(self, key: ObjectKey) -> Result | None:
        if self._timeout is None:
            return await self._reconcile(key)
        scope = asyncio.timeout(self._timeout)
        try:
            async with scope:
                return await self._reconcile(key)
        except TimeoutError:
            if scope.expired():  # ours, not a timeout raised inside the reconcile
                raise ReconcileTimeout(f"reconcile took longer than {self._timeout}s") from None
            raise

    def _handle_result(self, key: ObjectKey, result: Result) -> None:
        if result.requeue_after is not None and result.requeue_after > 0:
            self.queue.forget(key)
            self.queue.add_after(key, result.requeue_after)
            metrics.RECONCILE_RESULTS.labels(self.name, "requeue_after").inc()
        elif result.requeue:
            self.queue.add_rate_limited(key)
            metrics.RECONCILE_RESULTS.labels(self.name, "requeue").inc()
        else:
            self.queue.forget(key)
            metrics.RECONCILE_RESULTS.labels(self.name, "success").inc()

    def _count_error(self) -> None:
        metrics.RECONCILE_ERRORS.labels(self.name).inc()
        metrics.RECONCILE_RESULTS.labels(self.name, "error").inc()

    def close(self) -> None:
        """Remove this controller's queue series (call when discarding the controller)."""
        self.queue.close_metrics()


def _unchanged(change: Change) -> bool:
    if change.type != "MODIFIED":
        return False
    old = change.old_obj or {}
    new = change.new or {}
    old_rv = (old.get("metadata") or {}).get("resourceVersion")
    return old_rv is not None and old_rv == (new.get("metadata") or {}).get("resourceVersion")
