"""A semaphore shared fairly between groups (e.g. namespaces): at most `total` holders at once, at
most `per_group` of them from one group, and free slots handed round-robin to the groups that
wait (the group given one longest ago first), so one group with many slow holders delays only
itself.

The choice of who gets a freed slot is a pure function (`next_group`); `FairSlots` is the asyncio
shell around it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import Counter, deque
from collections.abc import AsyncIterator, Mapping

__all__ = ["FairSlots", "next_group"]


def next_group(
    waiting: Mapping[str, int], running: Mapping[str, int], served: Mapping[str, int], per_group: int
) -> str | None:
    """Of the groups with a waiter and fewer than `per_group` holders, the one given a slot longest
    ago (`served`: when each group last got one; never: first), or None when no waiter may have one.
    Ties go to the group that started waiting first (the order of `waiting`)."""
    eligible = [g for g, count in waiting.items() if count > 0 and running.get(g, 0) < per_group]
    return min(eligible, key=lambda group: served.get(group, -1), default=None)


class FairSlots:
    def __init__(self, total: int, per_group: int) -> None:
        if total < 1 or per_group < 1:
            raise ValueError("a pool needs at least one slot, and one per group")
        self.total = total
        self.per_group = per_group
        self._running: Counter[str] = Counter()
        self._waiters: dict[str, deque[asyncio.Future[None]]] = {}
        self._served: dict[str, int] = {}  # group -> when it last got a slot (a counter)
        self._ticks = itertools.count()

    @property
    def holders(self) -> int:
        return sum(self._running.values())

    def running(self, group: str) -> int:
        return self._running[group]

    def waiting(self, group: str) -> int:
        return len(self._waiters.get(group, ()))

    def _can_start(self, group: str) -> bool:
        return self.holders < self.total and self._running[group] < self.per_group

    def _take(self, group: str) -> None:
        self._running[group] += 1
        self._served[group] = next(self._ticks)

    def _grant(self) -> None:
        while self.holders < self.total:
            waiting = {group: len(futures) for group, futures in self._waiters.items()}
            group = next_group(waiting, self._running, self._served, self.per_group)
            if group is None:
                return
            future = self._waiters[group].popleft()
            if not self._waiters[group]:
                del self._waiters[group]
            if future.done():
                # Its task was cancelled and has not run its handler yet (the controllers stop and
                # cancel every holder and waiter at once): pass it over, the slot stays free.
                continue
            self._take(group)
            future.set_result(None)

    def _release(self, group: str) -> None:
        self._running[group] -= 1
        if self._running[group] <= 0:
            del self._running[group]
            if group not in self._waiters:
                self._served.pop(group, None)  # nothing left of it: forget it (namespaces come and go)
        self._grant()

    def _forget_waiter(self, group: str, future: asyncio.Future[None]) -> None:
        futures = self._waiters.get(group)
        if futures is not None and future in futures:
            futures.remove(future)
            if not futures:
                del self._waiters[group]

    @contextlib.asynccontextmanager
    async def slot(self, group: str) -> AsyncIterator[None]:
        """Hold one of the slots while the block runs (waiting for one first, if need be)."""
        # Every release hands its slot to a waiter that may have it, so a free slot here means no
        # waiter may: those left wait for their own group's slots, not for this one.
        if self._can_start(group):
            self._take(group)
        else:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.setdefault(group, deque()).append(future)
            try:
                await future
            except asyncio.CancelledError:
                if future.done() and not future.cancelled():
                    self._release(group)  # granted as it was cancelled: hand the slot on
                else:
                    self._forget_waiter(group, future)
                raise
        try:
            yield
        finally:
            self._release(group)
