"""The GPU queue (reference §4.7, decision #6).

Services waiting for GPUs are ordered by effective priority (highest first), then by creation
time (oldest first), then by namespace/name so ties never flap. The service being planned is
ranked with its *new* phase, so its position is right on the first status write.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class QueueEntry:
    namespace: str
    name: str
    priority: int
    created: datetime | None


def queue_order_key(entry: QueueEntry) -> tuple[int, bool, float, str, str]:
    # An entry with no creation time (not yet persisted) sorts after every dated one.
    created = entry.created.timestamp() if entry.created is not None else 0.0
    return (-entry.priority, entry.created is None, created, entry.namespace, entry.name)


def ordered_queue(entries: Iterable[QueueEntry]) -> list[QueueEntry]:
    return sorted(entries, key=queue_order_key)


def queue_position(waiting: Iterable[QueueEntry], service: QueueEntry, *, waiting_now: bool) -> int:
    """1-based position of `service` among the waiting services; 0 when it is not waiting.

    `waiting` is what the cache holds (it may include a stale copy of `service`, which is replaced).
    """
    if not waiting_now:
        return 0
    key = (service.namespace, service.name)
    others = [e for e in waiting if (e.namespace, e.name) != key]
    return ordered_queue([*others, service]).index(service) + 1
