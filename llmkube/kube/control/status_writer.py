"""Write an object's status only when it changed, and never the same status twice.

The cache lags behind our own writes: right after a status write, a reconcile woken by something
else still reads the old status from the cache. Planning from that stale copy would stamp fresh
transition times on the conditions our write already flipped and write the same status again. So
the writer remembers, per object, the resourceVersion its last write was based on and what it
wrote, and while the cache still shows that version, the object's current status is what we wrote
(`current`): callers plan from it and compare with it (read your own writes).

The memory of a write ends as soon as the cache shows any other version. A status write wakes no
reconcile (the controllers watch for spec, label and annotation changes), so the writer follows the
informer itself (`follow`) and forgets on the watch event: at 10,000 services each remembered
status was about 6 KB held until the object's next reconcile, if it ever came.

What "changed" means (e.g. "anything but a timestamp") is the caller's ``differs`` function; how a
status becomes JSON is its ``encode`` function. The writer itself knows nothing about the kind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from llmkube.kube.apply import Applier, ApplyResult
from llmkube.kube.cache import Change, Informer, Store, resource_version
from llmkube.kube.resource import Resource
from llmkube.kube.types import Obj, ObjectKey

__all__ = ["LastWrite", "StatusWriter", "after_write", "current_status", "status_body", "status_write_needed"]

S = TypeVar("S")

#: (status the cache holds or None, planned status) -> True when a write is needed
Differs = Callable[[S | None, S], bool]


@dataclass(frozen=True)
class LastWrite(Generic[S]):
    """Our last status write of an object, while the cache may not show it yet."""

    status: S
    #: resourceVersions older than the write: the one it was based on, and those of our own earlier
    #: writes in the same chain (e.g. Copying, then Ready, in one reconcile)
    stale: frozenset[str | None]
    #: the resourceVersion the write produced
    version: str | None


def after_write(
    previous: LastWrite[S] | None, based_on: str | None, produced: str | None, status: S
) -> LastWrite[S]:
    """What to remember after writing ``status`` onto version ``based_on``, producing ``produced``."""
    stale = {based_on}
    if previous is not None and based_on in previous.stale | {previous.version}:
        stale |= previous.stale | {previous.version}  # a chain: the cache may still be before all of it
    return LastWrite(status, frozenset(stale), produced)


def current_status(cached: S | None, cached_version: str | None, last_write: LastWrite[S] | None) -> S | None:
    """The status the object has now: what we last wrote while the cache still shows a version from
    before that write (it has not caught up yet), else what the cache shows."""
    if last_write is not None and cached_version in last_write.stale:
        return last_write.status
    return cached


def status_write_needed(
    cached: S | None,
    cached_version: str | None,
    last_write: LastWrite[S] | None,
    new: S,
    differs: Differs[S],
) -> bool:
    """Write when ``new`` differs from the object's current status (`current_status`)."""
    return differs(current_status(cached, cached_version, last_write), new)


def status_body(observed: Obj, status: Obj) -> Obj:
    """The status apply for ``observed``: its identity and the status, nothing else."""
    meta = observed.get("metadata") or {}
    identity = {key: meta[key] for key in ("name", "namespace") if meta.get(key)}
    return {"metadata": identity, "status": status}


class StatusWriter(Generic[S]):
    def __init__(
        self,
        applier: Applier,
        resource: Resource,
        *,
        differs: Differs[S],
        encode: Callable[[S], Obj],
    ) -> None:
        self._applier = applier
        self._resource = resource
        self._differs = differs
        self._encode = encode
        self._written: dict[ObjectKey, LastWrite[S]] = {}
        self._store: Store | None = None

    def __len__(self) -> int:
        """How many writes are remembered (the cache has not shown them yet)."""
        return len(self._written)

    def follow(self, informer: Informer) -> None:
        """Forget each write when ``informer`` (of this writer's resource) shows the object at any
        version not older than it, or the object is gone."""
        self._store = informer.store
        informer.add_handler(self._cache_changed)

    def _cache_changed(self, change: Change) -> None:
        key = ObjectKey.of(change.obj)
        written = self._written.get(key)
        if written is not None and (change.new is None or resource_version(change.new) not in written.stale):
            del self._written[key]

    def _cached_version(self, key: ObjectKey) -> str | None:
        cached = None if self._store is None else self._store.get_object(key.namespace, key.name)
        return None if cached is None else resource_version(cached)

    def current(self, observed: Obj, cached: S | None) -> S | None:
        """The status of ``observed`` (the cached object, whose status parses to ``cached``) as it
        is now, our own last write included: plan from this."""
        key = ObjectKey.of(observed)
        version = (observed.get("metadata") or {}).get("resourceVersion")
        written = self._written.get(key)
        if written is not None and version not in written.stale:
            del self._written[key]  # the cache has caught up (versions only move forward)
            written = None
        return current_status(cached, version, written)

    def needed(self, observed: Obj, cached: S | None, new: S) -> bool:
        return self._differs(self.current(observed, cached), new)

    async def write(self, observed: Obj, cached: S | None, new: S) -> ApplyResult | None:
        """Apply ``new`` as the status of ``observed`` (the cached object, or the one our previous
        write returned; its status parses to ``cached``) when it is needed; None when nothing was
        sent."""
        key = ObjectKey.of(observed)
        previous = self._written.get(key)  # before `needed` forgets it: `observed` may be our own write
        if not self.needed(observed, cached, new):
            return None
        result = await self._applier.apply_status(
            self._resource, status_body(observed, self._encode(new)), observed
        )
        based_on = (observed.get("metadata") or {}).get("resourceVersion")
        produced = (result.object.get("metadata") or {}).get("resourceVersion")
        written = after_write(previous, based_on, produced, new)
        if self._store is None or self._cached_version(key) in written.stale:
            self._written[key] = written
        else:
            # The watch delivered our write (or a later version) while the apply's answer was on
            # its way: the cache is already past it, and no event is left to forget it by.
            self._written.pop(key, None)
        return result

    def forget(self, key: ObjectKey) -> None:
        """The object is gone: drop what we remember about it."""
        self._written.pop(key, None)
