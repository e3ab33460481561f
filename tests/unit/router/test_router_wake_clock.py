"""Scale to zero's router half as state machines on a fake clock (llmkube.plan.router.wake): the
wake queue (the first request held wakes, the others wait, one beyond the bound is refused, the
queue is forgotten once empty) and the idle clock the routers share (one write per interval per
service at most, none without traffic, an in-flight stream counts, another router's write counts)."""

from typing import Any

import pytest

from llmkube.api import constants as c
from llmkube.plan.router.wake import ActivityClock, Join, Sleeper, WakeQueue, sleeper_of


def test_the_first_request_held_wakes_the_others_wait_and_one_beyond_the_bound_is_refused() -> None:
    queue = WakeQueue(bound=3)
    assert [queue.join("llama", 10.0) for _ in range(4)] == [Join.WAKE, Join.WAIT, Join.WAIT, Join.FULL]
    assert queue.held("llama") == 3 and not queue.room("llama")
    assert queue.room("other") and queue.join("other", 11.0) is Join.WAKE  # each service its own
    assert queue.waking_for("llama", 12.5) == 2.5
    queue.leave("llama")  # a client left, or was served
    assert queue.room("llama") and queue.join("llama", 13.0) is Join.WAIT


def test_an_empty_queue_is_forgotten_so_a_failed_wake_is_tried_again() -> None:
    queue = WakeQueue(bound=2)
    assert queue.join("llama", 0.0) is Join.WAKE
    queue.leave("llama")
    assert queue.held("llama") == 0 and queue.waking_for("llama", 1.0) is None
    assert queue.join("llama", 5.0) is Join.WAKE
    queue.leave("never-held")  # nothing to forget: no harm


# (case, events as (time, what, service)) -> writes due at each `due` event: what `due` returns
# events: ("began"|"ended"|"shared"|"due"|"wrote", at, service)
CLOCK_CASES: list[tuple[str, list[tuple[Any, ...]], list[list[tuple[str, float]]]]] = [
    ("no traffic, no write", [("due", 0.0), ("due", 500.0)], [[], []]),
    (
        "the first request is written at once, the next ones a minute later at most",
        [
            ("began", 10.0, "a"),
            ("ended", 11.0, "a"),
            ("due", 11.0),
            ("wrote", 11.0, "a", 11.0),
            ("began", 20.0, "a"),
            ("ended", 21.0, "a"),
            ("due", 30.0),
            ("due", 71.0),
        ],
        [[("a", 11.0)], [], [("a", 21.0)]],
    ),
    (
        "a stream in flight is activity until it ends",
        [
            ("began", 0.0, "a"),
            ("due", 0.0),
            ("wrote", 0.0, "a", 0.0),
            ("due", 30.0),
            ("due", 60.0),
            ("wrote", 60.0, "a", 60.0),
            ("due", 125.0),
        ],
        [[("a", 0.0)], [], [("a", 60.0)], [("a", 125.0)]],
    ),
    (
        "another router's newer write counts as ours",
        [("began", 10.0, "a"), ("ended", 10.0, "a"), ("shared", 10.0, "a"), ("due", 15.0), ("due", 100.0)],
        [[], []],
    ),
    (
        "another router wrote recently: ours waits for the interval since that write",
        [("shared", 50.0, "a"), ("began", 60.0, "a"), ("ended", 60.0, "a"), ("due", 70.0), ("due", 110.0)],
        [[], [("a", 60.0)]],
    ),
    (
        "services are apart",
        [("began", 1.0, "a"), ("began", 2.0, "b"), ("ended", 3.0, "b"), ("due", 3.0)],
        [[("a", 3.0), ("b", 3.0)]],
    ),
]


@pytest.mark.parametrize(
    ("events", "expected"), [case[1:] for case in CLOCK_CASES], ids=[case[0] for case in CLOCK_CASES]
)
def test_the_idle_clock_writes_at_most_once_an_interval(
    events: list[tuple[Any, ...]], expected: list[list[tuple[str, float]]]
) -> None:
    clock = ActivityClock(interval=60.0)
    found = []
    for event in events:
        what, at = event[0], event[1]
        if what == "began":
            clock.began(event[2], at)
        elif what == "ended":
            clock.ended(event[2], at)
        elif what == "shared":
            clock.shared(event[2], at)
        elif what == "wrote":
            clock.written(event[2], event[3], at)
        else:
            found.append(clock.due(at))
    assert found == expected


def test_the_next_write_is_due_when_the_interval_ends() -> None:
    clock = ActivityClock(interval=60.0)
    assert clock.next_due(0.0) is None
    clock.began("a", 5.0)
    clock.ended("a", 5.0)
    assert clock.next_due(5.0) == 0.0
    clock.written("a", 5.0, 5.0)
    assert clock.next_due(6.0) is None  # nothing new since
    clock.began("a", 30.0)
    assert clock.next_due(30.0) == 35.0
    clock.forget("a")
    assert clock.next_due(30.0) is None


def _isvc(annotations: dict[str, str], conditions: list[dict[str, str]]) -> dict[str, Any]:
    return {"metadata": {"annotations": annotations}, "status": {"conditions": conditions}}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({}, Sleeper(False, False)),
        (_isvc({c.ANNOTATION_SCALE_TO_ZERO_AFTER: "10m"}, []), Sleeper(True, False)),
        (
            _isvc(
                {c.ANNOTATION_SCALE_TO_ZERO_AFTER: "10m", c.ANNOTATION_LAST_REQUEST: "1970-01-01T00:01:00Z"},
                [{"type": "ScaledToZero", "status": "True"}],
            ),
            Sleeper(True, True, 60.0),
        ),
        (
            _isvc({c.ANNOTATION_LAST_REQUEST: "noon"}, [{"type": "ScaledToZero", "status": "False"}]),
            Sleeper(False, False),
        ),
        (
            _isvc(
                {c.ANNOTATION_SCALE_TO_ZERO_AFTER: "1m"},
                [{"type": "ScaledToZero", "status": "False", "reason": "Waking"}],
            ),
            Sleeper(True, True),
        ),
    ],
    ids=["nothing", "marked", "asleep", "awake, a time that is not one", "waking counts as asleep"],
)
def test_what_the_router_reads_of_a_backend(obj: dict[str, Any], expected: Sleeper) -> None:
    assert sleeper_of(obj) == expected
