"""The GPU queue as the cache shows it (design decision 6): which services wait, in what order.

A service is in the queue while its stored phase is WaitingForGPU; its rank comes from its stored
effectivePriority and its creationTimestamp (ordering in `llmkube.plan.queue`).
"""

from datetime import datetime

from llmkube.kube.store import Change
from llmkube.kube.types import Obj
from llmkube.plan.queue import QueueEntry

WAITING = "WaitingForGPU"


def _queue_rank(obj: Obj | None) -> tuple[bool, object]:
    status = (obj or {}).get("status") or {}
    waiting = status.get("phase") == WAITING
    return waiting, status.get("effectivePriority") if waiting else None


def queue_rank_changed(change: Change) -> bool:
    """A service entered or left the GPU queue, or its priority changed while it waits: the others'
    positions move (decision 6). Handlers run after the cache holds the change, so the services
    re-planned on it see the new queue; re-planning them right after our own status write would
    read a cache that does not have it yet, and leave their positions stale."""
    if change.initial:
        return False  # a (re)start re-plans every service anyway
    old = None if change.type == "ADDED" else change.old_obj
    new = None if change.type == "DELETED" else change.new
    return _queue_rank(old) != _queue_rank(new)


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
