"""Read your own applies: after we apply an object, the cache shows the version from before that
write until the watch delivers ours, and a reconcile in between would compare the plan with the old
copy and apply the same body again, a write nobody needs. So the applier remembers, per object, the
body it last applied and the resourceVersions older than that write; while the cache still shows one
of them and the plan asks for the very same body, there is nothing to send.

The memory of an object ends as soon as the cache shows any other version (ours has arrived, or
someone changed the object since): from then on the usual compare decides.

A create is remembered too, with the object it made, but only where an informer tells us what the
cache sees (`follow`): the cache showing no object is the same whether ours has not arrived yet or
someone deleted it, and a deleted object must be created again. So the informer ends the memory on
any event of the object (`seen`: ADDED, MODIFIED, DELETED), and a deadline ends it in any case (an
object created outside every informer's selector is never seen: it must not stay skipped).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import orjson

from llmkube.kube.types import Obj

__all__ = ["RecentApplies", "body_digest", "recent_key"]

Key = tuple[str, str, str]  # (resource, namespace, name)


def recent_key(resource: str, store_key: str) -> Key:
    """The memory's key of a cache's ``namespace/name`` (or ``name``) store key."""
    namespace, _, name = store_key.rpartition("/")
    return (resource, namespace, name)


@dataclass(frozen=True)
class _Applied:
    digest: bytes
    #: resourceVersions of the object from before our apply
    stale: frozenset[str]
    #: the resourceVersion our apply produced
    version: str | None


@dataclass(frozen=True)
class _Created:
    digest: bytes
    #: the object as the create returned it
    stored: Obj
    deadline: float


#: how long a create is remembered at most (the watch delivers ours in milliseconds)
CREATE_MEMORY_SECONDS = 30.0


def body_digest(body: Obj) -> bytes:
    return hashlib.blake2b(orjson.dumps(body, option=orjson.OPT_SORT_KEYS), digest_size=16).digest()


class RecentApplies:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._applied: dict[Key, _Applied] = {}
        self._created: dict[Key, _Created] = {}
        #: the resources an informer reports events of (see `seen`)
        self._followed: set[str] = set()
        self._clock = clock

    def __len__(self) -> int:
        return len(self._applied) + len(self._created)

    def follow(self, resource: str) -> None:
        """An informer of `resource` calls `seen` for each event: its creates can be remembered."""
        self._followed.add(resource)

    def seen(self, key: Key) -> None:
        """The cache shows an event of the object: a create of ours has arrived, or the object has
        changed or gone since; either way the cache now tells the truth of it."""
        self._created.pop(key, None)

    def created(self, key: Key, digest: bytes) -> Obj | None:
        """The object our create of this very body made, while the cache has not shown it yet."""
        created = self._created.get(key)
        if created is None:
            return None
        if self._clock() >= created.deadline:
            del self._created[key]
            return None
        return created.stored if created.digest == digest else None

    def record_create(self, key: Key, digest: bytes, stored: Obj) -> None:
        if key[0] in self._followed:
            self._created[key] = _Created(digest, stored, self._clock() + CREATE_MEMORY_SECONDS)

    def already_applied(self, key: Key, digest: bytes, cached_version: str | None) -> bool:
        """True when our last apply of `key` sent this very body and the cache still shows a
        version from before it."""
        applied = self._applied.get(key)
        if applied is None:
            return False
        if cached_version not in applied.stale:
            del self._applied[key]  # the cache caught up, or the object changed since: compare as usual
            return False
        return applied.digest == digest

    def record(self, key: Key, digest: bytes, based_on: Iterable[str | None], produced: str | None) -> None:
        """We applied a body with `digest` over the versions `based_on`, producing `produced`."""
        stale = {version for version in based_on if version}
        if not stale:
            self._applied.pop(key, None)  # a create: remembered by `record_create` alone
            return
        previous = self._applied.get(key)
        if previous is not None and stale & (previous.stale | {previous.version or ""}):
            # A chain of our applies: the cache may still be before all of them.
            stale |= previous.stale | ({previous.version} if previous.version else set())
        self._applied[key] = _Applied(digest, frozenset(stale), produced)

    def forget(self, key: Key) -> None:
        self._applied.pop(key, None)
        self._created.pop(key, None)
