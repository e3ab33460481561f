"""GPU queue order (decision #6): priority first, then age, then namespace/name."""

from datetime import UTC, datetime, timedelta

import pytest

from llmkube.plan.queue import QueueEntry, ordered_queue, queue_position

T = datetime(2026, 3, 1, tzinfo=UTC)


def entry(name: str, priority: int = 10_000, minutes: int | None = 0, namespace: str = "ai") -> QueueEntry:
    return QueueEntry(
        namespace, name, priority, T + timedelta(minutes=minutes) if minutes is not None else None
    )


def test_order_is_priority_then_age_then_name() -> None:
    entries = [
        entry("old-low", 1_000, 0),
        entry("new-high", 100_000, 30),
        entry("b-same", 10_000, 10),
        entry("a-same", 10_000, 10),
        entry("old-normal", 10_000, 5),
        entry("a-same", 10_000, 10, namespace="other"),
        entry("undated", 10_000, None),
    ]
    assert [(e.namespace, e.name) for e in ordered_queue(entries)] == [
        ("ai", "new-high"),
        ("ai", "old-normal"),
        ("ai", "a-same"),
        ("ai", "b-same"),
        ("other", "a-same"),
        ("ai", "undated"),  # no creation time yet: after every dated entry of its priority
        ("ai", "old-low"),
    ]


@pytest.mark.parametrize(
    ("waiting", "me", "expected"),
    [
        ([], entry("me"), 1),  # first write: counts itself although the cache does not list it yet
        ([entry("a", minutes=-10)], entry("me"), 2),
        ([entry("a", minutes=-10), entry("b", 100_000, 60)], entry("me"), 3),
        ([entry("a", minutes=-10)], entry("me", 1_000_000), 1),  # critical jumps the queue
        ([entry("me", 100, 0), entry("a", minutes=-10)], entry("me", 1_000_000), 1),  # stale copy replaced
        ([entry("a", minutes=10)], entry("me"), 1),
    ],
)
def test_queue_position_while_waiting(waiting: list[QueueEntry], me: QueueEntry, expected: int) -> None:
    assert queue_position(waiting, me, waiting_now=True) == expected


def test_queue_position_is_zero_when_not_waiting() -> None:
    assert queue_position([entry("me"), entry("a")], entry("me"), waiting_now=False) == 0
