"""An ``events.k8s.io/v1`` Event recorder with series aggregation (see event_series.py).

``recorder.event(obj, "Warning", "InsufficientGPU", "0/3 nodes have nvidia.com/gpu")`` never
blocks and never fails the caller: Events are written by a background task, best effort, from a
bounded backlog (event_backlog.py) that drops its oldest write when full, counted in
``llmkube_events_dropped_total{reason="queue_full"}``; the spam filter's refusals are counted with
``reason="rate_limited"``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import socket
import uuid

import structlog

from llmkube.kube import metrics
from llmkube.kube.clock import Clock, RealClock, format_micro_time
from llmkube.kube.errors import ApiError, NotFound
from llmkube.kube.events.backlog import DEFAULT_BACKLOG_LIMIT, EventBacklog, PendingWrite
from llmkube.kube.events.series import EventKey, SeriesCache, SeriesEntry, Verdict
from llmkube.kube.leader import NotLeader
from llmkube.kube.resource import EVENTS
from llmkube.kube.rest import MERGE_PATCH, ApiClient, TransportError
from llmkube.kube.types import Obj

__all__ = ["NORMAL", "WARNING", "EventRecorder", "event_name", "object_reference"]

log = structlog.get_logger("llmkube.kube.events.recorder")

NORMAL = "Normal"
WARNING = "Warning"
_NOTE_LIMIT = 1024  # the API rejects longer notes
_FIELD_LIMIT = 128  # reason, action, reportingController, reportingInstance
_NAME_LIMIT = 253  # an Event's name is a DNS subdomain (RFC 1123)
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _is_dns_subdomain(name: str) -> bool:
    return len(name) <= _NAME_LIMIT and _DNS_SUBDOMAIN.fullmatch(name) is not None


def event_name(regarding: str, suffix: str) -> str:
    """``<regarding>.<suffix>`` as client-go names Events, when that is a valid name. The object's
    own name may already use all 253 characters: then as much of it as leaves room for the suffix
    (a prefix of a valid name is valid once trailing dots and dashes are cut). A name that is no DNS
    subdomain at all (a path-segment name such as ``system:nodes``) gets a UUID, as client-go does."""
    name = f"{regarding}.{suffix}"
    if _is_dns_subdomain(name):
        return name
    if _is_dns_subdomain(regarding):
        prefix = regarding[: _NAME_LIMIT - len(suffix) - 1].rstrip(".-")
        if prefix and _is_dns_subdomain(f"{prefix}.{suffix}"):
            return f"{prefix}.{suffix}"
    return str(uuid.uuid4())


def object_reference(obj: Obj) -> Obj:
    meta = obj.get("metadata") or {}
    reference = {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "resourceVersion": meta.get("resourceVersion"),
    }
    return {key: value for key, value in reference.items() if value}


class EventRecorder:
    def __init__(
        self,
        client: ApiClient,
        *,
        reporting_controller: str,
        reporting_instance: str | None = None,
        clock: Clock | None = None,
        series: SeriesCache | None = None,
        backlog_limit: int = DEFAULT_BACKLOG_LIMIT,
    ) -> None:
        self.client = client
        self.reporting_controller = reporting_controller[:_FIELD_LIMIT]
        self.reporting_instance = (reporting_instance or os.environ.get("POD_NAME") or socket.gethostname())[
            :_FIELD_LIMIT
        ]
        self._clock = clock or RealClock()
        self.series = series or SeriesCache()
        self._backlog = EventBacklog(backlog_limit)
        self._queued = asyncio.Event()  # set while the backlog may hold something
        self._writing = asyncio.Lock()  # held by the background writer while a write is in flight
        self._sequence = itertools.count()
        self._task: asyncio.Task[None] | None = None
        self._ticker: asyncio.Task[None] | None = None

    @property
    def pending(self) -> int:
        """How many writes wait for the API server."""
        return len(self._backlog)

    # -- recording ------------------------------------------------------------------------------

    def event(
        self,
        regarding: Obj,
        type: str,
        reason: str,
        note: str,
        *,
        action: str = "Reconcile",
        related: Obj | None = None,
    ) -> None:
        """Record an occurrence; the write happens in the background (or is aggregated/dropped)."""
        reference = object_reference(regarding)
        note = note[:_NOTE_LIMIT]
        key = EventKey(
            regarding=reference.get("uid")
            or f"{reference.get('kind')}/{reference.get('namespace')}/{reference.get('name')}",
            type=type,
            reason=reason[:_FIELD_LIMIT],
            action=action[:_FIELD_LIMIT],
            note=note,
        )
        now = self._clock.monotonic()
        name = event_name(str(reference.get("name") or "object"), self._unique_suffix())
        # Events of cluster-scoped objects go to "default", as client-go does.
        namespace = reference.get("namespace") or "default"
        decision = self.series.record(key, name, namespace, now)
        if decision.verdict is Verdict.DROPPED:
            metrics.EVENTS_DROPPED.labels("rate_limited").inc()
            log.debug("event rate-limited", reason=reason, regarding=reference.get("name"))
            return
        assert decision.entry is not None
        if decision.verdict is Verdict.CREATE:
            body = self._event_object(decision.entry, reference, related)
            self._enqueue(PendingWrite(Verdict.CREATE, decision.entry, body))
        elif decision.verdict is Verdict.PATCH:
            self._enqueue(PendingWrite(Verdict.PATCH, decision.entry))

    def _enqueue(self, write: PendingWrite) -> None:
        for dropped in self._backlog.push(write):
            metrics.EVENTS_DROPPED.labels("queue_full").inc()
            if dropped.verdict is Verdict.CREATE:
                # Never created: the next occurrence must create it, not patch a missing Event.
                self._forget(dropped.entry)
            log.debug("event backlog full, dropped the oldest write", reason=dropped.entry.key.reason)
        self._queued.set()

    def _unique_suffix(self) -> str:
        nanos = int(self._clock.now().timestamp() * 1e9)
        return f"{nanos + next(self._sequence):x}"

    def _event_object(self, entry: SeriesEntry, reference: Obj, related: Obj | None) -> Obj:
        body: Obj = {
            "apiVersion": EVENTS.api_version,
            "kind": EVENTS.kind,
            "metadata": {"name": entry.name, "namespace": entry.namespace},
            "eventTime": format_micro_time(self._clock.now()),
            "reportingController": self.reporting_controller,
            "reportingInstance": self.reporting_instance,
            "action": entry.key.action,
            "reason": entry.key.reason,
            "note": entry.key.note,
            "type": entry.key.type,
            "regarding": reference,
        }
        if related is not None:
            body["related"] = object_reference(related)
        return body

    # -- writing --------------------------------------------------------------------------------

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        if self._task is None:
            self._task = loop.create_task(self._writer(), name="events:writer")
            self._ticker = loop.create_task(self._heartbeat(), name="events:heartbeat")

    async def stop(self, grace: float = 2.0) -> None:
        """Write what is queued (for up to ``grace`` seconds), then stop."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                await self.drain()
        for task in (self._task, self._ticker):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._task = self._ticker = None

    async def drain(self) -> None:
        """Write everything queued so far, and wait for the background writer's write in flight
        (used by tests and at shutdown): on return, every Event recorded before has been answered
        or given up on."""
        while (write := self._backlog.pop()) is not None:
            await self._write(write)
        async with self._writing:
            pass

    async def _writer(self) -> None:
        while True:
            write = self._backlog.pop()
            if write is None:
                self._queued.clear()
                await self._queued.wait()
                continue
            async with self._writing:  # taken at once: nothing else holds it across an await
                await self._write(write)

    async def _heartbeat(self) -> None:
        while True:
            await self._clock.sleep(self.series.refresh)
            now = self._clock.monotonic()
            for entry in [*self.series.due(now), *self.series.expire(now)]:
                self._enqueue(PendingWrite(Verdict.PATCH, entry))

    async def _write(self, write: PendingWrite) -> None:
        verdict, entry = write.verdict, write.entry
        try:
            if verdict is Verdict.CREATE:
                assert write.body is not None
                await self.client.create(EVENTS, write.body)
                return
            count = entry.count
            patch = {"series": {"count": count, "lastObservedTime": format_micro_time(self._clock.now())}}
            await self.client.patch(EVENTS, entry.name, patch, entry.namespace, patch_type=MERGE_PATCH)
            self.series.written(entry, count, self._clock.monotonic())
        except NotLeader:
            self._forget(entry)  # not ours to write any more (the next leader reports what it sees)
        except NotFound:
            self._forget(entry)  # the Event expired on the server: the next occurrence starts anew
        except (ApiError, TransportError) as error:
            log.warning("could not write event", reason=entry.key.reason, error=repr(error))
            if verdict is Verdict.CREATE:
                self._forget(entry)

    def _forget(self, entry: SeriesEntry) -> None:
        """A series whose Event does not exist: later occurrences start a new one, and refreshes
        still queued for it would only fail."""
        self.series.forget(entry)
        self._backlog.discard(entry)
