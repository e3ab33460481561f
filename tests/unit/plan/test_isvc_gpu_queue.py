"""GPU queue order: priority first, then age, then namespace/name."""

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmkube.plan.inferenceservice.queue import GpuQueue, QueueEntry, ordered_queue, queue_position

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
    assert queue_position(GpuQueue(waiting), me, waiting_now=True) == expected


def test_queue_position_is_zero_when_not_waiting() -> None:
    assert queue_position(GpuQueue([entry("me"), entry("a")]), entry("me"), waiting_now=False) == 0


def names(queue: GpuQueue) -> list[str]:
    return [e.name for e in queue]


# (queue before, change, queue after, indexes whose occupant changed position)
CHANGES = {
    "enter at the back": (["a", "b"], ("put", entry("c", minutes=5)), ["a", "b", "c"], [2]),
    "enter at the front": (["a", "b"], ("put", entry("c", 100_000, 5)), ["c", "a", "b"], [0, 1, 2]),
    "enter in the middle": (
        ["a", "c"], ("put", entry("b", minutes=1)), ["a", "b", "c"], [1, 2]
    ),
    "leave the front": (["a", "b", "c"], ("remove", "a"), ["b", "c"], [0, 1]),
    "leave the middle": (["a", "b", "c"], ("remove", "b"), ["a", "c"], [1]),
    "leave the back": (["a", "b", "c"], ("remove", "c"), ["a", "b"], []),
    "not waiting leaves": (["a"], ("remove", "zz"), ["a"], []),
    "same entry again": (["a", "b"], ("put", entry("b", minutes=1)), ["a", "b"], []),
    "priority up": (["a", "b", "c"], ("put", entry("c", 100_000, 2)), ["c", "a", "b"], [0, 1, 2]),
    "priority down": (["a", "b", "c"], ("put", entry("a", 100)), ["b", "c", "a"], [0, 1, 2]),
    "priority up by one place": (
        ["a", "b", "c", "d"], ("put", entry("c", 10_000, 0)), ["a", "c", "b", "d"], [1, 2]
    ),
}  # fmt: skip


@pytest.mark.parametrize(("before", "change", "after", "moved"), list(CHANGES.values()), ids=list(CHANGES))
def test_queue_changes_report_exactly_the_positions_that_moved(
    before: list[str], change: tuple[str, object], after: list[str], moved: list[int]
) -> None:
    queue = GpuQueue(entry(name, minutes=index) for index, name in enumerate(before))
    old = {e.name: queue.position("ai", e.name) for e in queue}
    operation, argument = change
    if operation == "put":
        assert isinstance(argument, QueueEntry)
        span = queue.put(argument)
    else:
        span = queue.remove("ai", str(argument))
    assert names(queue) == after
    assert list(span) == moved
    # Every occupant outside the span kept its position; every one inside it moved (or is new).
    for index, e in enumerate(queue):
        assert queue.position("ai", e.name) == index + 1
        assert (index in span) == (old.get(e.name) != index + 1)


priorities = st.sampled_from([100, 10_000, 100_000])
identities = st.sampled_from([f"s{i}" for i in range(12)])
operations = st.lists(
    st.tuples(st.booleans(), identities, priorities, st.integers(0, 5)), min_size=1, max_size=60
)


@given(operations)
def test_the_queue_always_equals_a_full_sort_and_reports_every_move(
    ops: list[tuple[bool, str, int, int]],
) -> None:
    queue = GpuQueue()
    model: dict[str, QueueEntry] = {}
    for add, name, priority, minutes in ops:
        before = {e.name: i for i, e in enumerate(queue)}
        if add:
            model[name] = entry(name, priority, minutes)
            span = queue.put(model[name])
        else:
            model.pop(name, None)
            span = queue.remove("ai", name)
        expected = ordered_queue(model.values())
        assert list(queue) == expected
        assert len(queue) == len(expected)
        for index, e in enumerate(expected):
            assert queue.position("ai", e.name) == index + 1
            if before.get(e.name) != index:
                assert index in span  # a moved or new occupant is always reported
        # Ranking a copy of any member with its own values gives its position (its stale self ignored).
        for e in expected:
            assert queue.rank_of(e) == queue.position("ai", e.name)
