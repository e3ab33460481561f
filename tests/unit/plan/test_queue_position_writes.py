"""Coalesced queue-position writes: a position that only moved is written at most once per
interval with the newest value; entering the queue, leaving it and any other change are written at
once (plan/inferenceservice/queue_writes.py)."""

from datetime import datetime, timedelta
from typing import Any

import pytest
from isvc_factories import CREATED, NOW, gpu_model, live_deployment, make_isvc, observe, pod
from isvc_planning import condition, plan

from llmkube.api.inferenceservice import InferenceServiceStatus
from llmkube.plan.inferenceservice.queue import GpuQueue, QueueEntry
from llmkube.plan.inferenceservice.queue_writes import POSITION_WRITE_INTERVAL, held_position
from llmkube.plan.inferenceservice.status import status_changed

GPU_POD = pod("demo-1", "Pending", unschedulable="0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")


def stored(phase: str = "WaitingForGPU", position: int | None = 3, written: datetime | None = NOW) -> Any:
    return InferenceServiceStatus.model_validate(
        {
            "phase": phase,
            **({"queuePosition": position} if position is not None else {}),
            **({"lastUpdated": written} if written is not None else {}),
        }
    )


SECOND = timedelta(seconds=1)

# (stored status, new position, waiting now, seconds since the last write, (planned, hold))
CASES: dict[str, tuple[Any, int, bool, float, tuple[int, float | None]]] = {
    "moved 1 s after the last write": (stored(), 2, True, 1, (3, 4.0)),
    "moved just before the interval ends": (stored(), 2, True, 4.5, (3, 0.5)),
    "moved once the interval is over": (stored(), 2, True, 5, (2, None)),
    "did not move": (stored(), 3, True, 1, (3, None)),
    "enters the queue": (stored("Creating", None), 2, True, 1, (2, None)),
    "leaves the queue": (stored(), 0, False, 1, (0, None)),
    "never written": (None, 2, True, 0, (2, None)),
    "no stored position (an older writer)": (stored(position=None), 2, True, 1, (2, None)),
    "no stored time": (stored(written=None), 2, True, 1, (2, None)),
    # Written by a replica whose clock is ahead: never held longer than the interval.
    "written in the future": (stored(), 2, True, -30, (3, POSITION_WRITE_INTERVAL)),
}


@pytest.mark.parametrize("case", CASES)
def test_held_position(case: str) -> None:
    status, position, waiting, since, expected = CASES[case]
    assert held_position(status, position, waiting=waiting, now=NOW + since * SECOND) == expected


def queue_with(*ahead: int) -> GpuQueue:
    """Services ahead of `demo` (created before it), at the given priorities."""
    return GpuQueue(
        QueueEntry("ai", f"ahead-{i}", priority, CREATED - (i + 1) * SECOND)
        for i, priority in enumerate(ahead)
    )


def waiting_at(position: int, written: datetime, priority: int = 10_000) -> dict[str, Any]:
    """A stored status as planned for demo waiting at `position`, written at `written`."""
    first = plan(
        model=gpu_model(1),
        observed=observe(pods=(GPU_POD,), gpu_queue=queue_with(*[priority] * (position - 1)), now=written),
    )
    assert first.status.queue_position == position
    return first.status.model_dump(by_alias=True, exclude_none=True, mode="json")


def test_a_moving_position_waits_for_the_interval_then_the_newest_is_written() -> None:
    isvc = make_isvc(status=waiting_at(3, NOW))
    # Two services ahead leave within the interval: nothing to write, come back when it ends.
    for since, ahead in ((1, 1), (2, 0)):
        moved = plan(
            model=gpu_model(1),
            isvc=isvc,
            observed=observe(
                pods=(GPU_POD,), gpu_queue=queue_with(*[10_000] * ahead), now=NOW + since * SECOND
            ),
        )
        assert moved.status.queue_position == 3
        assert not status_changed(isvc.status, moved.status)  # no write
        assert moved.requeue_after == pytest.approx(POSITION_WRITE_INTERVAL - since)
    # The interval is over: the newest position, in one write.
    late = plan(
        model=gpu_model(1),
        isvc=isvc,
        observed=observe(pods=(GPU_POD,), gpu_queue=queue_with(), now=NOW + 5 * SECOND),
    )
    assert late.status.queue_position == 1 and late.requeue_after is None
    assert status_changed(isvc.status, late.status)
    assert condition(late, "Progressing") == ("True", "WaitingForGPU", "Queued at position 1 waiting for GPU")


def test_a_write_that_changes_more_than_the_position_carries_the_newest_one_at_once() -> None:
    isvc = make_isvc({"priority": "high"}, status=waiting_at(3, NOW))  # its priority went up since
    result = plan(
        model=gpu_model(1),
        isvc=isvc,
        observed=observe(pods=(GPU_POD,), gpu_queue=queue_with(10_000, 10_000), now=NOW + SECOND),
    )
    assert (result.status.effective_priority, result.status.queue_position) == (100_000, 1)
    assert result.requeue_after is None


def test_entering_and_leaving_the_queue_are_written_at_once() -> None:
    creating = make_isvc(
        status=plan(model=gpu_model(1), observed=observe(now=NOW)).status.model_dump(
            by_alias=True, exclude_none=True, mode="json"
        )
    )
    entered = plan(
        model=gpu_model(1),
        isvc=creating,
        observed=observe(pods=(GPU_POD,), gpu_queue=queue_with(10_000), now=NOW + SECOND),
    )
    assert (entered.status.phase, entered.status.queue_position, entered.requeue_after) == (
        "WaitingForGPU",
        2,
        None,
    )
    waiting = make_isvc(status=waiting_at(2, NOW))
    left = plan(
        model=gpu_model(1),
        isvc=waiting,
        observed=observe(deployment=live_deployment(ready=1), now=NOW + SECOND),
    )
    assert (left.status.phase, left.status.queue_position, left.requeue_after) == ("Ready", None, None)
