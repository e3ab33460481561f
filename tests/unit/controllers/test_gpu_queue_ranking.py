"""The GPU queue as the cache shows it: entries read from stored status, and which changes move it."""

from datetime import UTC, datetime
from typing import Any

import pytest
from isvc_objects import isvc

from llmkube.controllers.gpu_queue import queue_entry_of, queue_rank_changed
from llmkube.kube.store import Change
from llmkube.plan.queue import QueueEntry


def test_queue_entry_reads_stored_priority_and_creation_time() -> None:
    entry = queue_entry_of(isvc("a", status={"effectivePriority": 100000, "phase": "WaitingForGPU"}))
    assert entry == QueueEntry("ai", "a", 100000, datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    bare = queue_entry_of({"metadata": {"name": "b", "namespace": "ai", "creationTimestamp": "not a time"}})
    assert bare == QueueEntry("ai", "b", 0, None)


def waiting(priority: int = 10000) -> dict[str, Any]:
    return isvc("a", status={"phase": "WaitingForGPU", "effectivePriority": priority})


@pytest.mark.parametrize(
    ("change", "passes"),
    [
        (Change("ADDED", None, waiting()), True),
        (Change("ADDED", None, waiting(), initial=True), False),  # a restart re-plans everybody anyway
        (Change("ADDED", None, isvc("a", status={"phase": "Creating"})), False),
        (Change("MODIFIED", isvc("a", status={"phase": "Creating"}), waiting()), True),  # enters
        (Change("MODIFIED", waiting(), isvc("a", status={"phase": "Ready"})), True),  # leaves
        (Change("MODIFIED", waiting(10000), waiting(100000)), True),  # re-ranked while waiting
        (Change("MODIFIED", waiting(), waiting()), False),  # e.g. its own position changed
        (
            Change("MODIFIED", isvc("a", status={"phase": "Creating"}), isvc("a", status={"phase": "Ready"})),
            False,
        ),
        (Change("DELETED", waiting(), None), True),
        (Change("DELETED", isvc("a", status={"phase": "Ready"}), None), False),
    ],
)
def test_gpu_queue_moves_when_a_service_enters_leaves_or_is_re_ranked(change: Change, passes: bool) -> None:
    assert queue_rank_changed(change) is passes
