"""Write an object's status only when it changed, and never the same status twice.

The cache lags behind our own writes: right after a status write, a reconcile woken by something
else still reads the old status from the cache. Planning from that stale copy would stamp fresh
transition times on the conditions our write already flipped and write the same status again. So
the writer remembers, per object, the resourceVersion its last write was based on and what it
wrote, and while the cache still shows that version, the object's current status is what we wrote
(`current`): callers plan from it and compare with it (read your own writes).

What "changed" means (e.g. "anything but a timestamp") is the caller's ``differs`` function; how a
status becomes JSON is its ``encode`` function. The writer itself knows nothing about the kind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from llmkube.kube.apply import Applier, ApplyResult
from llmkube.kube.resource import Resource
from llmkube.kube.types import Obj, ObjectKey

__all__ = ["StatusWriter", "current_status", "status_body", "status_write_needed"]

S = TypeVar("S")

#: (status the cache holds or None, planned status) -> True when a write is needed
Differs = Callable[[S | None, S], bool]
#: one write: the resourceVersion it was based on, and the status it wrote
LastWrite = tuple[str | None, S]


def current_status(cached: S | None, cached_version: str | None, last_write: LastWrite[S] | None) -> S | None:
    """The status the object has now: what we last wrote while the cache still shows the version
    that write was based on (it has not caught up yet), else what the cache shows."""
    if last_write is not None and last_write[0] == cached_version:
        return last_write[1]
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

    def current(self, observed: Obj, cached: S | None) -> S | None:
        """The status of ``observed`` (the cached object, whose status parses to ``cached``) as it
        is now, our own last write included: plan from this."""
        version = (observed.get("metadata") or {}).get("resourceVersion")
        return current_status(cached, version, self._written.get(ObjectKey.of(observed)))

    def needed(self, observed: Obj, cached: S | None, new: S) -> bool:
        return self._differs(self.current(observed, cached), new)

    async def write(self, observed: Obj, cached: S | None, new: S) -> ApplyResult | None:
        """Apply ``new`` as the status of ``observed`` (the cached object, whose status parses to
        ``cached``) when it is needed; None when nothing was sent."""
        if not self.needed(observed, cached, new):
            return None
        result = await self._applier.apply_status(
            self._resource, status_body(observed, self._encode(new)), observed
        )
        version = (observed.get("metadata") or {}).get("resourceVersion")
        self._written[ObjectKey.of(observed)] = (version, new)
        return result

    def forget(self, key: ObjectKey) -> None:
        """The object is gone: drop what we remember about it."""
        self._written.pop(key, None)
