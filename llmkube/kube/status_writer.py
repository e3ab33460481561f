"""Write an object's status only when it changed, and never the same status twice.

The cache lags behind our own writes: right after a status write, a reconcile woken by something
else still reads the old status from the cache, plans the same new status, and would write it
again. The writer remembers, per object, the resourceVersion its last write was based on and what
it wrote; while the cache still shows that version, a plan equal to that write is not sent again.

What "changed" means (e.g. "anything but a timestamp") is the caller's ``differs`` function; how a
status becomes JSON is its ``encode`` function. The writer itself knows nothing about the kind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from llmkube.kube.apply import Applier, ApplyResult
from llmkube.kube.resource import Resource
from llmkube.kube.types import Obj, ObjectKey

__all__ = ["StatusWriter", "status_body", "status_write_needed"]

S = TypeVar("S")

#: (status the cache holds or None, planned status) -> True when a write is needed
Differs = Callable[[S | None, S], bool]
#: one write: the resourceVersion it was based on, and the status it wrote
LastWrite = tuple[str | None, S]


def status_write_needed(
    cached: S | None,
    cached_version: str | None,
    last_write: LastWrite[S] | None,
    new: S,
    differs: Differs[S],
) -> bool:
    """Write when ``new`` differs from the cached status, unless the cache still shows the version
    our last write was based on and ``new`` is exactly what that write sent: the cache has simply
    not caught up with our own write yet."""
    if not differs(cached, new):
        return False
    if last_write is not None and last_write[0] == cached_version:
        return differs(last_write[1], new)
    return True


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

    def needed(self, observed: Obj, cached: S | None, new: S) -> bool:
        key = ObjectKey.of(observed)
        version = (observed.get("metadata") or {}).get("resourceVersion")
        return status_write_needed(cached, version, self._written.get(key), new, self._differs)

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
