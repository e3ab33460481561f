"""An ``events.k8s.io/v1`` Event recorder with series aggregation (see event_series.py).

``recorder.event(obj, "Warning", "InsufficientGPU", "0/3 nodes have nvidia.com/gpu")`` never
blocks and never fails the caller: Events are written by a background task, best effort.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import socket

import structlog

from llmkube.kube.client import MERGE_PATCH, ApiClient
from llmkube.kube.clock import Clock, RealClock, format_micro_time
from llmkube.kube.errors import ApiError, NotFound
from llmkube.kube.event_series import EventKey, SeriesCache, SeriesEntry, Verdict
from llmkube.kube.resource import EVENTS
from llmkube.kube.transport import TransportError
from llmkube.kube.types import Obj

__all__ = ["NORMAL", "WARNING", "EventRecorder", "object_reference"]

log = structlog.get_logger("llmkube.kube.events")

NORMAL = "Normal"
WARNING = "Warning"
_NOTE_LIMIT = 1024  # the API rejects longer notes
_FIELD_LIMIT = 128  # reason, action, reportingController, reportingInstance


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
    ) -> None:
        self.client = client
        self.reporting_controller = reporting_controller[:_FIELD_LIMIT]
        self.reporting_instance = (reporting_instance or os.environ.get("POD_NAME") or socket.gethostname())[
            :_FIELD_LIMIT
        ]
        self._clock = clock or RealClock()
        self.series = series or SeriesCache()
        self._pending: asyncio.Queue[tuple[Verdict, SeriesEntry, Obj | None]] = asyncio.Queue()
        self._sequence = itertools.count()
        self._task: asyncio.Task[None] | None = None
        self._ticker: asyncio.Task[None] | None = None

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
        name = f"{reference.get('name', 'object')}.{self._unique_suffix()}"
        # Events of cluster-scoped objects go to "default", as client-go does.
        namespace = reference.get("namespace") or "default"
        decision = self.series.record(key, name, namespace, now)
        if decision.verdict is Verdict.DROPPED:
            log.debug("event rate-limited", reason=reason, regarding=reference.get("name"))
            return
        assert decision.entry is not None
        if decision.verdict is Verdict.CREATE:
            body = self._event_object(decision.entry, reference, related)
            self._pending.put_nowait((Verdict.CREATE, decision.entry, body))
        elif decision.verdict is Verdict.PATCH:
            self._pending.put_nowait((Verdict.PATCH, decision.entry, None))

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
        """Write everything queued so far (used by tests and at shutdown)."""
        while not self._pending.empty():
            await self._write(*self._pending.get_nowait())

    async def _writer(self) -> None:
        while True:
            item = await self._pending.get()
            await self._write(*item)

    async def _heartbeat(self) -> None:
        while True:
            await self._clock.sleep(self.series.refresh)
            now = self._clock.monotonic()
            for entry in [*self.series.due(now), *self.series.expire(now)]:
                self._pending.put_nowait((Verdict.PATCH, entry, None))

    async def _write(self, verdict: Verdict, entry: SeriesEntry, body: Obj | None) -> None:
        try:
            if verdict is Verdict.CREATE:
                assert body is not None
                await self.client.create(EVENTS, body)
                return
            count = entry.count
            patch = {"series": {"count": count, "lastObservedTime": format_micro_time(self._clock.now())}}
            await self.client.patch(EVENTS, entry.name, patch, entry.namespace, patch_type=MERGE_PATCH)
            self.series.written(entry, count, self._clock.monotonic())
        except NotFound:
            self.series.forget(entry)  # the Event expired on the server: the next occurrence starts anew
        except (ApiError, TransportError) as error:
            log.warning("could not write event", reason=entry.key.reason, error=repr(error))
            if verdict is Verdict.CREATE:
                self.series.forget(entry)
