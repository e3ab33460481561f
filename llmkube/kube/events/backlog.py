"""The Event writes waiting for the API server, as a bounded, de-duplicated FIFO (pure logic).

While the API server is unreachable the recorder keeps producing: new Events from reconciles, and
series refreshes from its heartbeat every 30 s.  Unbounded, that backlog grows for as long as the
outage lasts.  Here it is bounded like client-go's event broadcaster (1000 queued Events), with two
differences: the *oldest* write is dropped when it is full (the newest say most about the present),
and a series has at most one refresh queued at a time (the PATCH sends the count current when it is
written, so a second queued copy would only repeat it).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from llmkube.kube.events.series import SeriesEntry, Verdict
from llmkube.kube.types import Obj

__all__ = ["DEFAULT_BACKLOG_LIMIT", "EventBacklog", "PendingWrite"]

DEFAULT_BACKLOG_LIMIT = 1000  # client-go tools/events: maxQueuedEvents


@dataclass(frozen=True, slots=True)
class PendingWrite:
    verdict: Verdict  # CREATE (with the Event body) or PATCH (a series refresh)
    entry: SeriesEntry
    body: Obj | None = None


class EventBacklog:
    def __init__(self, limit: int = DEFAULT_BACKLOG_LIMIT) -> None:
        if limit < 1:
            raise ValueError("the event backlog must hold at least one write")
        self.limit = limit
        # Keyed by (verdict, the series entry's identity): the queued write keeps its entry alive,
        # so the identity cannot be reused while the key is in here.
        self._writes: OrderedDict[tuple[Verdict, int], PendingWrite] = OrderedDict()

    def __len__(self) -> int:
        return len(self._writes)

    def push(self, write: PendingWrite) -> list[PendingWrite]:
        """Queue ``write`` (a refresh already queued for the same series is not queued twice);
        returns the writes dropped to make room, oldest first."""
        key = (write.verdict, id(write.entry))
        if key in self._writes:
            return []
        self._writes[key] = write
        dropped = []
        while len(self._writes) > self.limit:
            dropped.append(self._writes.popitem(last=False)[1])
        return dropped

    def discard(self, entry: SeriesEntry) -> None:
        """Forget every queued write of a series (it was forgotten: its writes would only fail)."""
        for verdict in (Verdict.CREATE, Verdict.PATCH):
            self._writes.pop((verdict, id(entry)), None)

    def pop(self) -> PendingWrite | None:
        """The oldest queued write, or None when there is none."""
        if not self._writes:
            return None
        return self._writes.popitem(last=False)[1]
