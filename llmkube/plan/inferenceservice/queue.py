"""The GPU queue (the reference operator's was first come, first served, whatever the priority).

Services waiting for GPUs are ordered by effective priority (highest first), then by creation
time (oldest first), then by namespace/name so ties never flap. The service being planned is
ranked with its *new* phase, so its position is right on the first status write.

:class:`GpuQueue` keeps the waiting services in that order as they come and go, one at a time:
a change costs a binary search and a list move, and says which positions it moved, so only those
services need a new status (at W waiting services, re-sorting everything for every service on
every change costs O(W² log W) per change).
"""

from bisect import bisect_left
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class QueueEntry:
    namespace: str
    name: str
    priority: int
    created: datetime | None


OrderKey = tuple[int, bool, float, str, str]


def queue_order_key(entry: QueueEntry) -> OrderKey:
    # An entry with no creation time (not yet persisted) sorts after every dated one.
    created = entry.created.timestamp() if entry.created is not None else 0.0
    return (-entry.priority, entry.created is None, created, entry.namespace, entry.name)


def ordered_queue(entries: Iterable[QueueEntry]) -> list[QueueEntry]:
    return sorted(entries, key=queue_order_key)


class GpuQueue:
    """The waiting services in queue order. Positions are 1-based; indexes (in the ranges that
    `put` and `remove` return) are 0-based: position = index + 1."""

    def __init__(self, entries: Iterable[QueueEntry] = ()) -> None:
        self._keys: list[OrderKey] = []  # sorted; the last two fields identify the entry
        self._entries: dict[tuple[str, str], QueueEntry] = {}
        for entry in entries:
            self.put(entry)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, identity: object) -> bool:
        return identity in self._entries

    def __iter__(self) -> Iterator[QueueEntry]:
        return (self.at(index) for index in range(len(self._keys)))

    def at(self, index: int) -> QueueEntry:
        key = self._keys[index]
        return self._entries[(key[3], key[4])]

    def position(self, namespace: str, name: str) -> int:
        """1-based position of a waiting service; 0 when it does not wait."""
        entry = self._entries.get((namespace, name))
        if entry is None:
            return 0
        return bisect_left(self._keys, queue_order_key(entry)) + 1

    def rank_of(self, entry: QueueEntry) -> int:
        """The position `entry` would have if it waited with these values (its own stored entry,
        possibly stale, does not count)."""
        key = queue_order_key(entry)
        ahead = bisect_left(self._keys, key)
        stale = self._entries.get((entry.namespace, entry.name))
        if stale is not None and queue_order_key(stale) < key:
            ahead -= 1
        return ahead + 1

    def put(self, entry: QueueEntry) -> range:
        """Add or update a waiting service; returns the indexes whose occupant changed position
        (the entry's own included)."""
        identity = (entry.namespace, entry.name)
        key = queue_order_key(entry)
        old = self._entries.get(identity)
        self._entries[identity] = entry
        if old is not None:
            old_key = queue_order_key(old)
            if old_key == key:
                return range(0)
            left = bisect_left(self._keys, old_key)
            del self._keys[left]
        index = bisect_left(self._keys, key)
        self._keys.insert(index, key)
        if old is None:
            return range(index, len(self._keys))
        return range(min(index, left), max(index, left) + 1)

    def remove(self, namespace: str, name: str) -> range:
        """A service stopped waiting; returns the indexes whose occupant moved up."""
        old = self._entries.pop((namespace, name), None)
        if old is None:
            return range(0)
        index = bisect_left(self._keys, queue_order_key(old))
        del self._keys[index]
        return range(index, len(self._keys))


def queue_position(waiting: GpuQueue, service: QueueEntry, *, waiting_now: bool) -> int:
    """1-based position of `service` among the waiting services; 0 when it is not waiting.

    `waiting` is what the cache holds (it may include a stale copy of `service`, which is replaced).
    """
    if not waiting_now:
        return 0
    return waiting.rank_of(service)
