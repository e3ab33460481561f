"""The GPU queue as the cache shows it, kept in step with the cache.

A service is in the queue while its stored phase is WaitingForGPU; its rank comes from its stored
effectivePriority and its creationTimestamp (ordering in `llmkube.plan.inferenceservice.queue`).
One ordered queue follows every change of the InferenceService cache; each change reports the services whose
position moved and whose stored `queuePosition` no longer matches, and only those are re-planned.
"""

from datetime import datetime

from llmkube.kube.cache import Change
from llmkube.kube.types import Obj, ObjectKey
from llmkube.plan.inferenceservice.queue import GpuQueue, QueueEntry

WAITING = "WaitingForGPU"


def _parse_time(text: object) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def queue_entry_of(obj: Obj) -> QueueEntry:
    meta = obj.get("metadata") or {}
    priority = (obj.get("status") or {}).get("effectivePriority")
    return QueueEntry(
        namespace=meta.get("namespace") or "",
        name=meta.get("name") or "",
        priority=priority if isinstance(priority, int) else 0,
        created=_parse_time(meta.get("creationTimestamp")),
    )


def is_waiting(obj: Obj | None) -> bool:
    return ((obj or {}).get("status") or {}).get("phase") == WAITING


def _stored_position(obj: Obj) -> object:
    return (obj.get("status") or {}).get("queuePosition")


class CachedGpuQueue:
    """The waiting services in queue order, and the position each one has stored in its status.

    `follow` is a mapper for the InferenceService cache's changes (it runs right after the cache
    holds the change, so a reconcile woken by it sees the new queue)."""

    def __init__(self) -> None:
        self.queue = GpuQueue()
        self._stored: dict[tuple[str, str], object] = {}

    def __len__(self) -> int:
        return len(self.queue)

    def identities(self) -> list[tuple[str, str]]:
        """(namespace, name) of every waiting service, in queue order."""
        return [(entry.namespace, entry.name) for entry in self.queue]

    def follow(self, change: Change) -> list[ObjectKey]:
        """Apply one cache change; return the services to re-plan: those whose position moved and
        whose stored position is not their position now (the changed service included, e.g. when
        its own write was planned before another service entered ahead of it)."""
        new = None if change.type == "DELETED" else change.new
        obj = change.obj
        meta = obj.get("metadata") or {}
        identity = (meta.get("namespace") or "", meta.get("name") or "")
        if new is not None and is_waiting(new):
            moved = self.queue.put(queue_entry_of(new))
            self._stored[identity] = _stored_position(new)
            if not moved:  # it kept its place, but its own stored position may still be stale
                index = self.queue.position(*identity) - 1
                moved = range(index, index + 1)
        elif identity in self.queue:
            moved = self.queue.remove(*identity)
            self._stored.pop(identity, None)
        else:
            return []
        if change.initial:
            return []  # a (re)start reconciles every service anyway
        return self._out_of_place(moved)

    def _out_of_place(self, indexes: range) -> list[ObjectKey]:
        keys = []
        for index in indexes:
            entry = self.queue.at(index)
            if self._stored.get((entry.namespace, entry.name)) != index + 1:
                keys.append(ObjectKey(entry.namespace, entry.name))
        return keys
