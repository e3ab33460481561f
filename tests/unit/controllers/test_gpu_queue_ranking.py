"""The GPU queue as the cache shows it: entries read from stored status, and which services a
cache change sends back to planning (only those whose stored position is no longer right)."""

from datetime import UTC, datetime
from typing import Any

import pytest
from isvc_objects import isvc

from llmkube.controllers.gpu_queue import CachedGpuQueue, queue_entry_of
from llmkube.kube.cache.store import Change, Tombstone
from llmkube.kube.types import ObjectKey
from llmkube.plan.inferenceservice.queue import QueueEntry


def test_queue_entry_reads_stored_priority_and_creation_time() -> None:
    entry = queue_entry_of(isvc("a", status={"effectivePriority": 100000, "phase": "WaitingForGPU"}))
    assert entry == QueueEntry("ai", "a", 100000, datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    bare = queue_entry_of({"metadata": {"name": "b", "namespace": "ai", "creationTimestamp": "not a time"}})
    assert bare == QueueEntry("ai", "b", 0, None)


def svc(name: str, position: int | None, priority: int = 10_000, *, second: int = 0) -> dict[str, Any]:
    """A service as stored: waiting at `position` (None: not waiting), created at `second`."""
    obj = isvc(name)
    obj["metadata"]["creationTimestamp"] = f"2026-01-02T03:04:{second:02d}Z"
    if position is None:
        obj["status"] = {"phase": "Ready", "effectivePriority": priority, "queuePosition": 0}
    else:
        obj["status"] = {"phase": "WaitingForGPU", "effectivePriority": priority, "queuePosition": position}
    return obj


def three_waiting() -> CachedGpuQueue:
    """a, b, c waiting (created in that order) with their positions stored, as after a restart."""
    queue = CachedGpuQueue()
    for position, name in enumerate("abc", 1):
        assert queue.follow(Change("ADDED", None, svc(name, position, second=position), initial=True)) == []
    return queue


def keys(*names: str) -> list[ObjectKey]:
    return [ObjectKey("ai", name) for name in names]


A, B, C = svc("a", 1, second=1), svc("b", 2, second=2), svc("c", 3, second=3)

FOLLOW = {
    # A new service's own write already holds its right position: nobody else moves.
    "enters at the back": (Change("MODIFIED", svc("d", None, second=4), svc("d", 4, second=4)), [], "abcd"),
    # Ahead of everybody: a, b and c must be re-planned (their stored positions are one short).
    "enters at the front": (
        Change("MODIFIED", svc("d", None, 100_000, second=4), svc("d", 1, 100_000, second=4)),
        keys("a", "b", "c"),
        "dabc",
    ),
    "leaves the middle": (Change("MODIFIED", B, svc("b", None, second=2)), keys("c"), "ac"),
    "deleted from the front": (Change("DELETED", A, None), keys("b", "c"), "bc"),
    "deleted, seen on a relist": (Change("DELETED", Tombstone("ai/a", A), None), keys("b", "c"), "bc"),
    "leaves the back": (Change("MODIFIED", C, svc("c", None, second=3)), [], "ab"),
    "re-ranked while waiting": (
        Change("MODIFIED", C, svc("c", 1, 100_000, second=3)), keys("a", "b"), "cab"
    ),
    # Its own write was planned before the queue changed: it is sent back too.
    "writes a stale position of its own": (Change("MODIFIED", B, svc("b", 3, second=2)), keys("b"), "abc"),
    "an unrelated status write": (Change("MODIFIED", B, B), [], "abc"),
    "a service that never waited": (Change("ADDED", None, svc("x", None)), [], "abc"),
    "a restart's initial list changes nothing": (
        Change("ADDED", None, svc("d", 1, 100_000, second=4), initial=True), [], "dabc"
    ),
}  # fmt: skip


@pytest.mark.parametrize(("change", "replan", "order"), list(FOLLOW.values()), ids=list(FOLLOW))
def test_a_cache_change_replans_only_the_services_whose_stored_position_is_wrong(
    change: Change, replan: list[ObjectKey], order: str
) -> None:
    queue = three_waiting()
    assert queue.follow(change) == replan
    assert "".join(entry.name for entry in queue.queue) == order
    assert len(queue) == len(order)


def test_a_replanned_service_writing_its_new_position_settles_the_queue() -> None:
    queue = three_waiting()
    assert queue.follow(Change("DELETED", A, None)) == keys("b", "c")
    assert queue.follow(Change("MODIFIED", B, svc("b", 1, second=2))) == []
    assert queue.follow(Change("MODIFIED", C, svc("c", 2, second=3))) == []
