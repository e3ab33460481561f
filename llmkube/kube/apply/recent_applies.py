"""Read your own applies: after we apply an object, the cache shows the version from before that
write until the watch delivers ours, and a reconcile in between would compare the plan with the old
copy and apply the same body again, a write nobody needs. So the applier remembers, per object, the
body it last applied and the resourceVersions older than that write; while the cache still shows one
of them and the plan asks for the very same body, there is nothing to send.

The memory of an object ends as soon as the cache shows any other version (ours has arrived, or
someone changed the object since): from then on the usual compare decides. A create is never
remembered: the cache showing no object is the same whether ours has not arrived yet or someone
deleted it, and a deleted object must be created again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

import orjson

from llmkube.kube.types import Obj

__all__ = ["RecentApplies", "body_digest"]

Key = tuple[str, str, str]  # (resource, namespace, name)


@dataclass(frozen=True)
class _Applied:
    digest: bytes
    #: resourceVersions of the object from before our apply
    stale: frozenset[str]
    #: the resourceVersion our apply produced
    version: str | None


def body_digest(body: Obj) -> bytes:
    return hashlib.blake2b(orjson.dumps(body, option=orjson.OPT_SORT_KEYS), digest_size=16).digest()


class RecentApplies:
    def __init__(self) -> None:
        self._applied: dict[Key, _Applied] = {}

    def __len__(self) -> int:
        return len(self._applied)

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
            self._applied.pop(key, None)  # a create: never remembered (see the module docstring)
            return
        previous = self._applied.get(key)
        if previous is not None and stale & (previous.stale | {previous.version or ""}):
            # A chain of our applies: the cache may still be before all of them.
            stale |= previous.stale | ({previous.version} if previous.version else set())
        self._applied[key] = _Applied(digest, frozenset(stale), produced)

    def forget(self, key: Key) -> None:
        self._applied.pop(key, None)
