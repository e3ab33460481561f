"""The controller runner: result handling, metrics, logging context, concurrency, shutdown."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import structlog
from prometheus_client import REGISTRY

from llmkube.kube.cache import Change
from llmkube.kube.clock import FakeClock, settle
from llmkube.kube.control import Controller, Result, TerminalError, enqueue_object, generation_changed
from llmkube.kube.errors import Conflict, error_from_status
from llmkube.kube.queue import LOW_PRIORITY
from llmkube.kube.types import ObjectKey

KEY = ObjectKey("ns", "a")


def value(metric: str, controller: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(metric, {"controller": controller, **labels})


def make(
    name: str, reconcile: Callable[[ObjectKey], Awaitable[Result | None]], **kwargs: Any
) -> tuple[Controller, FakeClock]:
    clock = FakeClock()
    return Controller(name, reconcile, clock=clock, **kwargs), clock


async def test_metrics_exist_at_zero_before_any_reconcile() -> None:
    async def reconcile(key: ObjectKey) -> None:
        return None

    Controller("ctl-init", reconcile, workers=3)
    for result in ("success", "error", "requeue", "requeue_after"):
        assert value("controller_runtime_reconcile_total", "ctl-init", result=result) == 0
    for name in ("errors", "terminal_reconcile_errors", "panics", "timeouts"):
        metric = (
            f"controller_runtime_reconcile_{name}_total"
            if name != "terminal_reconcile_errors"
            else ("controller_runtime_terminal_reconcile_errors_total")
        )
        assert value(metric, "ctl-init") == 0, metric
    assert value("controller_runtime_max_concurrent_reconciles", "ctl-init") == 3
    assert value("controller_runtime_active_workers", "ctl-init") == 0


async def test_success_forgets_and_counts() -> None:
    calls: list[ObjectKey] = []

    async def reconcile(key: ObjectKey) -> None:
        calls.append(key)

    controller, _ = make("ctl-success", reconcile)
    controller.queue.add_rate_limited(KEY)  # some failure history
    await controller.process(KEY)
    assert calls == [KEY]
    assert controller.queue.num_requeues(KEY) == 0
    assert value("controller_runtime_reconcile_total", "ctl-success", result="success") == 1
    assert value("controller_runtime_reconcile_time_seconds_count", "ctl-success") == 1


async def test_errors_requeue_with_per_key_backoff_and_bugs_count_as_panics() -> None:
    failures: list[BaseException] = [Conflict(409, "stale"), KeyError("spec"), Conflict(409, "stale")]

    async def reconcile(key: ObjectKey) -> None:
        raise failures.pop(0)

    controller, clock = make("ctl-errors", reconcile)
    controller.start()
    controller.enqueue(KEY)
    await settle()
    assert controller.queue.num_requeues(KEY) == 1
    await clock.advance(0.005)  # 5 ms: the first retry
    assert controller.queue.num_requeues(KEY) == 2
    await clock.advance(0.009)
    assert controller.queue.num_requeues(KEY) == 2  # the second retry waits 10 ms
    await clock.advance(0.001)
    assert controller.queue.num_requeues(KEY) == 3
    assert value("controller_runtime_reconcile_errors_total", "ctl-errors") == 3
    assert value("controller_runtime_reconcile_total", "ctl-errors", result="error") == 3
    assert value("controller_runtime_reconcile_panics_total", "ctl-errors") == 1  # only the KeyError
    assert value("workqueue_retries_total", "ctl-errors", name="ctl-errors") == 3
    await controller.stop(grace=1)


async def test_terminal_errors_are_not_retried() -> None:
    calls = 0

    async def reconcile(key: ObjectKey) -> None:
        nonlocal calls
        calls += 1
        raise TerminalError("spec.replicas must be >= 0")

    controller, clock = make("ctl-terminal", reconcile)
    controller.start()
    controller.enqueue(KEY)
    await clock.advance(3600)
    assert calls == 1
    assert value("controller_runtime_terminal_reconcile_errors_total", "ctl-terminal") == 1
    assert value("controller_runtime_reconcile_errors_total", "ctl-terminal") == 1
    assert controller.queue.waiting() == 0
    await controller.stop(grace=1)


@pytest.mark.parametrize(
    ("causes", "retried"),
    [
        ([{"reason": "NamespaceTerminating", "message": "namespace ns is being terminated"}], False),
        ([], True),  # a Forbidden of RBAC: an error, retried with backoff
        ([{"reason": "FieldValueInvalid", "field": "spec"}], True),
    ],
)
async def test_a_write_refused_because_the_namespace_is_going_is_not_retried(
    causes: list[dict[str, str]], retried: bool
) -> None:
    calls = 0
    body = {"kind": "Status", "code": 403, "reason": "Forbidden", "details": {"causes": causes}}

    async def reconcile(key: ObjectKey) -> None:
        nonlocal calls
        calls += 1
        raise error_from_status(403, body)

    name = f"ctl-ns-terminating-{len(causes)}-{retried}"
    controller, clock = make(name, reconcile)
    controller.start()
    controller.enqueue(KEY)
    await clock.advance(60)
    assert (calls > 1) is retried, calls
    errors = value("controller_runtime_reconcile_errors_total", name) or 0
    assert (errors > 0) is retried
    await controller.stop(grace=1)


async def test_requeue_after_polls_and_resets_backoff() -> None:
    times: list[float] = []

    async def reconcile(key: ObjectKey) -> Result:
        times.append(clock.monotonic())
        return Result(requeue_after=30)

    controller, clock = make("ctl-poll", reconcile)
    start = clock.monotonic()
    controller.start()
    controller.queue.add_rate_limited(KEY)  # history that requeue_after must forget
    await clock.advance(0.005)
    await clock.advance(61)
    assert [round(moment - start, 3) for moment in times] == [0.005, 30.005, 60.005]
    assert controller.queue.num_requeues(KEY) == 0
    assert value("controller_runtime_reconcile_total", "ctl-poll", result="requeue_after") == 3
    await controller.stop(grace=1)


async def test_requeue_flag_is_rate_limited() -> None:
    async def reconcile(key: ObjectKey) -> Result:
        return Result(requeue=True)

    controller, _ = make("ctl-requeue", reconcile)
    await controller.process(KEY)
    assert controller.queue.num_requeues(KEY) == 1
    assert controller.queue.waiting() == 1
    assert value("controller_runtime_reconcile_total", "ctl-requeue", result="requeue") == 1


async def test_timeouts_are_counted_and_retried() -> None:
    async def reconcile(key: ObjectKey) -> None:
        await asyncio.Event().wait()  # hangs

    controller, _ = make("ctl-timeout", reconcile, reconcile_timeout=0.01)
    await controller.process(KEY)
    assert value("controller_runtime_reconcile_timeouts_total", "ctl-timeout") == 1
    assert value("controller_runtime_reconcile_errors_total", "ctl-timeout") == 1
    assert value("controller_runtime_reconcile_panics_total", "ctl-timeout") == 0
    assert controller.queue.num_requeues(KEY) == 1


async def test_a_timeout_raised_inside_the_reconcile_is_not_ours() -> None:
    async def reconcile(key: ObjectKey) -> None:
        raise TimeoutError("the API request timed out")

    controller, _ = make("ctl-inner-timeout", reconcile, reconcile_timeout=60)
    await controller.process(KEY)
    assert value("controller_runtime_reconcile_timeouts_total", "ctl-inner-timeout") == 0
    assert value("controller_runtime_reconcile_errors_total", "ctl-inner-timeout") == 1


async def test_log_context_carries_controller_runtimes_keys() -> None:
    """controller, controllerKind, namespace, name and reconcileID, as controller-runtime names them;
    a cluster-scoped object has no namespace key (controller-runtime logs none), not an empty one."""
    seen: list[dict[str, Any]] = []

    async def reconcile(key: ObjectKey) -> None:
        seen.append(structlog.contextvars.get_contextvars())

    controller, _ = make("ctl-logs", reconcile, kind="InferenceService")
    await controller.process(KEY)
    await controller.process(KEY)
    await controller.process(ObjectKey("", "cluster-wide"))
    assert [
        (ctx["controller"], ctx["controllerKind"], ctx.get("namespace"), ctx["name"]) for ctx in seen
    ] == [
        ("ctl-logs", "InferenceService", "ns", "a"),
        ("ctl-logs", "InferenceService", "ns", "a"),
        ("ctl-logs", "InferenceService", None, "cluster-wide"),
    ]
    assert "namespace" not in seen[2]
    assert len({ctx["reconcileID"] for ctx in seen}) == 3
    assert not any("reconcile_id" in ctx for ctx in seen)
    assert "reconcileID" not in structlog.contextvars.get_contextvars()


async def test_workers_never_reconcile_one_key_concurrently() -> None:
    running: set[ObjectKey] = set()
    overlaps = 0
    done: list[ObjectKey] = []

    async def reconcile(key: ObjectKey) -> None:
        nonlocal overlaps
        overlaps += key in running
        running.add(key)
        await clock.sleep(1)
        running.discard(key)
        done.append(key)

    controller, clock = make("ctl-concurrency", reconcile, workers=4)
    controller.start()
    for _ in range(3):
        for name in ("a", "b"):
            controller.enqueue(ObjectKey("ns", name))
        await clock.advance(0.4)
    await clock.advance(5)
    assert overlaps == 0
    assert sorted(key.name for key in done) == ["a", "a", "b", "b"]  # one run, then one for the re-adds
    await controller.stop(grace=1)


async def test_stop_lets_in_flight_reconciles_finish_and_takes_no_new_keys() -> None:
    release = asyncio.Event()
    finished: list[str] = []

    async def reconcile(key: ObjectKey) -> None:
        await release.wait()
        finished.append(key.name)

    controller, _ = make("ctl-stop", reconcile, workers=1)
    controller.start()
    controller.enqueue(ObjectKey("ns", "in-flight"))
    await settle()
    controller.enqueue(ObjectKey("ns", "backlog"))
    stopping = asyncio.create_task(controller.stop(grace=5))
    await settle()
    release.set()
    await asyncio.wait_for(stopping, 1)
    assert finished == ["in-flight"]
    assert not controller.running


async def test_stop_cancels_reconciles_that_outlive_the_grace_period() -> None:
    async def reconcile(key: ObjectKey) -> None:
        await asyncio.Event().wait()

    controller, _ = make("ctl-stop-hard", reconcile)
    controller.start()
    controller.enqueue(KEY)
    await settle()
    await asyncio.wait_for(controller.stop(grace=0.01), 1)
    assert not controller.running


def change(
    kind: str, old: dict[str, Any] | None, new: dict[str, Any] | None, initial: bool = False
) -> Change:
    return Change(kind, old, new, initial)  # type: ignore[arg-type]


def cm(name: str, rv: str, generation: int = 1) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv, "generation": generation}}


async def test_handler_filters_maps_and_prioritises() -> None:
    async def reconcile(key: ObjectKey) -> None:
        return None

    controller, _ = make("ctl-handler", reconcile)
    handle = controller.handler(enqueue_object, [generation_changed])
    handle(change("ADDED", None, cm("initial", "1"), initial=True))
    handle(change("MODIFIED", cm("status-only", "1"), cm("status-only", "2")))  # filtered out
    handle(change("MODIFIED", cm("resync", "5", 1), cm("resync", "5", 2)))  # same RV: low priority
    handle(change("MODIFIED", cm("spec", "1", 1), cm("spec", "2", 2)))
    assert controller.queue.priority_of(ObjectKey("ns", "initial")) == LOW_PRIORITY
    assert controller.queue.priority_of(ObjectKey("ns", "resync")) == LOW_PRIORITY
    assert controller.queue.priority_of(ObjectKey("ns", "spec")) == 0
    assert controller.queue.priority_of(ObjectKey("ns", "status-only")) is None
    assert await controller.queue.get() == ObjectKey("ns", "spec")


def test_zero_workers_is_refused() -> None:
    async def reconcile(key: ObjectKey) -> None:
        return None

    with pytest.raises(ValueError, match="worker"):
        Controller("ctl-zero", reconcile, workers=0)


@pytest.mark.parametrize("workers", [1, 4])
async def test_a_backlog_of_reconciles_without_io_never_starves_the_event_loop(workers: int) -> None:
    # A restart enqueues every object; most reconciles find nothing to do and never wait for I/O.
    # Run back to back they would hold the loop for the whole backlog (at 10,000 services: seconds
    # without answering /readyz, reading a watch or renewing the lease).
    done: list[ObjectKey] = []

    async def reconcile(key: ObjectKey) -> None:
        done.append(key)

    controller, _ = make(f"ctl-fair-{workers}", reconcile, workers=workers)
    for index in range(200):
        controller.enqueue(ObjectKey("ns", f"s-{index}"))
    seen_by_other_task: list[int] = []

    async def other_task() -> None:
        while len(done) < 200:
            seen_by_other_task.append(len(done))
            await asyncio.sleep(0)

    controller.start()
    watcher = asyncio.get_running_loop().create_task(other_task())
    try:
        async with asyncio.timeout(10):
            await watcher
    finally:
        await controller.stop(grace=1.0)
    assert len(done) == 200
    # The other task ran between (at most a round of ``workers``) reconciles all along.
    assert len(seen_by_other_task) >= 200 // workers - 1, seen_by_other_task
    gaps = [later - earlier for earlier, later in itertools.pairwise(seen_by_other_task)]
    assert max(gaps) <= workers, gaps
