"""Event series aggregation (pure) and the recorder's requests (scripted transport, fake clock)."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kube_fakes import FakeResponse, RecordingTransport, Reply, status_body
from prometheus_client import REGISTRY

from llmkube.kube.clock import FakeClock, settle
from llmkube.kube.events.backlog import EventBacklog, PendingWrite
from llmkube.kube.events.recorder import WARNING, EventRecorder, event_name
from llmkube.kube.events.series import EventKey, SeriesCache, SeriesEntry, Verdict
from llmkube.kube.rest import ApiClient, TransportError

KEY = EventKey("uid-1", "Warning", "InsufficientGPU", "Schedule", "0/3 nodes have a GPU")


def test_first_occurrence_creates_second_patches_then_coalesces() -> None:
    cache = SeriesCache()
    first = cache.record(KEY, "svc.1", "ns", 0.0)
    assert first.verdict is Verdict.CREATE
    second = cache.record(KEY, "svc.2", "ns", 1.0)
    assert second.verdict is Verdict.PATCH and second.entry is first.entry
    assert second.entry is not None and second.entry.name == "svc.1" and second.entry.count == 2
    cache.written(second.entry, 2, 1.0)
    for moment in range(2, 12):
        assert cache.record(KEY, "x", "ns", float(moment)).verdict is Verdict.COALESCED
    assert second.entry.count == 12
    assert cache.due(20.0) == []  # refreshed at most every 30 s
    assert cache.due(31.0) == [second.entry]


def test_a_different_note_is_a_different_event() -> None:
    cache = SeriesCache()
    cache.record(KEY, "a", "ns", 0.0)
    other = EventKey(KEY.regarding, KEY.type, KEY.reason, KEY.action, "0/4 nodes have a GPU")
    assert cache.record(other, "b", "ns", 0.0).verdict is Verdict.CREATE


def test_series_end_after_the_window_and_report_unwritten_counts() -> None:
    cache = SeriesCache()
    entry = cache.record(KEY, "a", "ns", 0.0).entry
    assert entry is not None
    cache.record(KEY, "b", "ns", 10.0)
    cache.written(entry, 2, 10.0)
    cache.record(KEY, "c", "ns", 20.0)  # count 3, not yet written
    assert cache.expire(300.0) == []  # still within 6 minutes of the last occurrence
    assert cache.expire(381.0) == [entry]
    assert cache.record(KEY, "d", "ns", 400.0).verdict is Verdict.CREATE  # a new Event object


def test_new_events_are_rate_limited_per_object() -> None:
    cache = SeriesCache()
    verdicts = [
        cache.record(
            EventKey("uid-1", "Warning", "Flapping", "Reconcile", f"note {n}"), f"e{n}", "ns", 0.0
        ).verdict
        for n in range(30)
    ]
    assert verdicts.count(Verdict.CREATE) == 25 and verdicts.count(Verdict.DROPPED) == 5
    assert cache.dropped == 5
    other_object = EventKey("uid-2", "Warning", "Flapping", "Reconcile", "note")
    assert cache.record(other_object, "o", "ns", 0.0).verdict is Verdict.CREATE  # buckets are per object
    late = EventKey("uid-1", "Warning", "Flapping", "Reconcile", "late")
    assert cache.record(late, "l", "ns", 299.0).verdict is Verdict.DROPPED
    assert cache.record(late, "l", "ns", 301.0).verdict is Verdict.CREATE  # one token per 5 minutes


REGARDING: dict[str, Any] = {
    "apiVersion": "inference.llmkube.dev/v1alpha1",
    "kind": "InferenceService",
    "metadata": {"name": "svc", "namespace": "team", "uid": "uid-svc", "resourceVersion": "9"},
}


DNS_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
SUFFIX = "18a4c2b5e1f3d000"


def valid_event_name(name: str) -> bool:
    return len(name) <= 253 and re.fullmatch(DNS_SUBDOMAIN, name) is not None


@pytest.mark.parametrize(
    ("regarding", "expected"),
    [
        ("svc", f"svc.{SUFFIX}"),  # client-go's <name>.<hex time>
        ("a" * 236, f"{'a' * 236}.{SUFFIX}"),  # exactly 253
        ("a" * 253, f"{'a' * 236}.{SUFFIX}"),  # the longest name an object can have
        ("a" * 235 + "-b" * 9, f"{'a' * 235}.{SUFFIX}"),  # no dash before the dot
        ("a" * 235 + ".b" * 9, f"{'a' * 235}.{SUFFIX}"),  # no empty label
    ],
)
def test_event_names_fit_whatever_the_objects_name(regarding: str, expected: str) -> None:
    assert event_name(regarding, SUFFIX) == expected


@pytest.mark.parametrize("regarding", ["system:nodes", "Upper", "a" * 300 + ":x", "x_y"])
def test_a_name_that_is_no_dns_subdomain_gets_a_uuid_as_in_client_go(regarding: str) -> None:
    name = event_name(regarding, SUFFIX)
    assert valid_event_name(name) and len(name) == 36 and name.count("-") == 4
    assert event_name(regarding, SUFFIX) != name  # unique: two Events never collide


@given(
    st.lists(st.from_regex(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", fullmatch=True), min_size=1, max_size=8),
    st.integers(1, 253),
)
def test_every_valid_object_name_gives_a_valid_event_name_with_the_suffix(
    labels: list[str], length: int
) -> None:
    joined = ".".join(labels)
    regarding = (joined * (length // len(joined) + 1))[:length].rstrip(".-")
    if not valid_event_name(regarding):
        return  # a cut that leaves no valid name (two labels glued into one longer than 63, ...)
    name = event_name(regarding, SUFFIX)
    assert valid_event_name(name)
    assert name.endswith(f".{SUFFIX}") and regarding.startswith(name.removesuffix(f".{SUFFIX}"))


async def test_a_253_character_name_gets_an_event_the_api_accepts() -> None:
    clock = FakeClock()
    transport = RecordingTransport([Reply(201, {"metadata": {"namespace": "team"}})])
    recorder = EventRecorder(
        ApiClient("https://h:1", transport=transport, clock=clock),
        reporting_controller="thing-controller",
        clock=clock,
    )
    regarding = {**REGARDING, "metadata": {**REGARDING["metadata"], "name": "n" * 253}}
    recorder.event(regarding, WARNING, "InvalidSpec", "too long")
    await recorder.drain()
    created = orjson.loads(transport.seen[0][3] or b"")
    assert valid_event_name(created["metadata"]["name"])
    assert created["regarding"]["name"] == "n" * 253  # the object is named in full where it counts


async def test_recorder_creates_then_patches_a_series() -> None:
    clock = FakeClock()
    transport = RecordingTransport(
        [Reply(201, {"metadata": {"namespace": "team"}}), Reply(200, {}), Reply(200, {})]
    )
    recorder = EventRecorder(
        ApiClient("https://h:1", transport=transport, clock=clock),
        reporting_controller="thing-controller",
        reporting_instance="pod-0",
        clock=clock,
    )
    recorder.start()
    for _ in range(2):
        recorder.event(REGARDING, WARNING, "InsufficientGPU", "0/3 nodes", action="Schedule")
    await settle()
    assert [seen[0] for seen in transport.seen] == ["POST", "PATCH"]
    for _ in range(3):  # repeats are only counted in memory ...
        recorder.event(REGARDING, WARNING, "InsufficientGPU", "0/3 nodes", action="Schedule")
    await settle()
    assert len(transport.seen) == 2
    created = orjson.loads(transport.seen[0][3] or b"")
    assert transport.seen[0][1] == "https://h:1/apis/events.k8s.io/v1/namespaces/team/events"
    assert created["regarding"] == {
        "apiVersion": "inference.llmkube.dev/v1alpha1", "kind": "InferenceService", "namespace": "team",
        "name": "svc", "uid": "uid-svc", "resourceVersion": "9",
    }  # fmt: skip
    assert (created["reportingController"], created["reportingInstance"]) == ("thing-controller", "pod-0")
    assert (created["type"], created["reason"], created["action"], created["note"]) == (
        "Warning", "InsufficientGPU", "Schedule", "0/3 nodes",
    )  # fmt: skip
    assert created["eventTime"] == "2030-01-01T00:00:00.000000Z"
    assert created["metadata"]["name"].startswith("svc.")
    patch_url = transport.seen[1][1]
    assert (
        patch_url == f"https://h:1/apis/events.k8s.io/v1/namespaces/team/events/{created['metadata']['name']}"
    )
    assert transport.seen[1][2]["Content-Type"] == "application/merge-patch+json"
    assert orjson.loads(transport.seen[1][3] or b"")["series"]["count"] == 2
    await clock.advance(30)  # ... and written by the next heartbeat
    assert orjson.loads(transport.seen[2][3] or b"")["series"] == {
        "count": 5, "lastObservedTime": "2030-01-01T00:00:30.000000Z",
    }  # fmt: skip
    await clock.advance(60)
    assert len(transport.seen) == 3  # nothing new: no more writes
    await recorder.stop()


async def test_cluster_scoped_objects_get_events_in_default_and_failures_are_swallowed() -> None:
    clock = FakeClock()
    transport = RecordingTransport([Reply(403, status_body(403, "Forbidden"))])
    recorder = EventRecorder(
        ApiClient("https://h:1", transport=transport, clock=clock), reporting_controller="thing", clock=clock
    )
    priority_class = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high"},
    }
    recorder.event(priority_class, "Normal", "Recreated", "value changed")
    await recorder.drain()
    assert transport.seen[0][1].endswith("/apis/events.k8s.io/v1/namespaces/default/events")
    assert recorder.series.entries == {}  # a failed create leaves no series behind


async def test_stop_writes_what_is_queued() -> None:
    clock = FakeClock()
    transport = RecordingTransport([Reply(201, {}), Reply(201, {})])
    recorder = EventRecorder(
        ApiClient("https://h:1", transport=transport, clock=clock), reporting_controller="thing", clock=clock
    )
    recorder.event(REGARDING, "Normal", "Created", "deployment created")
    recorder.event(REGARDING, "Normal", "Scaled", "replicas 2")
    await asyncio.wait_for(recorder.stop(), 1)
    assert [seen[0] for seen in transport.seen] == ["POST", "POST"]


async def test_drain_waits_for_the_write_the_background_writer_has_in_flight() -> None:
    """Tests assert "no write" after a drain: a drain that returned while the writer's request was
    still on its way would let such an assertion pass before that write is counted."""
    clock = FakeClock()
    transport = BlackHole(clock)
    recorder = EventRecorder(
        ApiClient("https://h:1", transport=transport, clock=clock), reporting_controller="thing", clock=clock
    )
    recorder.start()
    recorder.event(REGARDING, "Normal", "Created", "deployment created")
    await settle()
    assert transport.attempts == 1 and recorder.pending == 0  # taken by the writer, not answered yet
    draining = asyncio.create_task(recorder.drain())
    await settle()
    assert not draining.done()
    await clock.advance(60)  # the attempt times out: given up on
    await asyncio.wait_for(draining, 1)
    await recorder.stop()


def dropped_events(reason: str = "queue_full") -> float:
    return REGISTRY.get_sample_value("llmkube_events_dropped_total", {"reason": reason}) or 0.0


class BlackHole:
    """A transport to an API server that never answers: every request takes its whole timeout
    (on the fake clock) and then fails, as through a dead network path.  ``heal()`` lets the
    following requests through to ``replies``."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.healed = False
        self.attempts = 0
        self.written: list[tuple[str, dict[str, Any]]] = []

    def heal(self) -> None:
        self.healed = True

    def send(self, method: str, url: str, *, headers: Any, body: bytes | None, request_timeout: Any) -> Any:
        return self._send(method, body, request_timeout)

    @contextlib.asynccontextmanager
    async def _send(self, method: str, body: bytes | None, request_timeout: Any) -> AsyncIterator[Any]:
        self.attempts += 1
        if not self.healed:
            await self.clock.sleep(request_timeout.total)
            raise TransportError("timed out")
        self.written.append((method, orjson.loads(body or b"{}")))
        yield FakeResponse(Reply(201 if method == "POST" else 200, {}))

    async def close(self) -> None:
        return None


def regarding(index: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"cm-{index}", "namespace": "ns", "uid": f"uid-{index}"},
    }


async def test_the_backlog_stays_bounded_while_the_api_is_unreachable() -> None:
    """Repeating Warnings during a ten-minute outage: every heartbeat used to queue another refresh
    of every series, so the backlog grew with the outage; now a series has one queued refresh."""
    clock = FakeClock()
    transport = BlackHole(clock)
    recorder = EventRecorder(
        ApiClient("https://h:1", transport=transport, clock=clock),
        reporting_controller="thing-controller",
        clock=clock,
    )
    recorder.start()
    series = 40
    largest = 0
    for _ in range(60):  # every 10 s for 10 minutes, each object warns again
        for index in range(series):
            recorder.event(regarding(index), WARNING, "BackOff", "still failing")
        await clock.advance(10)
        largest = max(largest, recorder.pending)
    # At most one create and one refresh per series can be waiting, however long the outage.
    assert largest <= 2 * series
    transport.heal()
    await clock.advance(120)
    await recorder.stop()
    assert recorder.pending == 0


async def test_a_full_backlog_drops_the_oldest_write_and_counts_it() -> None:
    clock = FakeClock()
    transport = BlackHole(clock)
    recorder = EventRecorder(
        ApiClient("https://h:1", transport=transport, clock=clock),
        reporting_controller="thing-controller",
        clock=clock,
        backlog_limit=10,
    )
    before = dropped_events()
    for index in range(25):  # 25 different objects: 25 new Events, none rate-limited
        recorder.event(regarding(index), "Normal", "Created", f"object {index}")
    assert recorder.pending == 10
    assert dropped_events() == before + 15
    transport.heal()
    await recorder.drain()
    names = [body["regarding"]["name"] for method, body in transport.written if method == "POST"]
    assert names == [f"cm-{index}" for index in range(15, 25)]  # the newest, in order
    # A dropped create leaves no series behind: its next occurrence is a new Event, not a PATCH.
    recorder.event(regarding(0), "Normal", "Created", "object 0")
    await recorder.drain()
    assert transport.written[-1][0] == "POST"


def test_backlog_fifo_dedup_and_limit() -> None:
    first = SeriesEntry(KEY, "a", "ns", 0.0, 0.0)
    second = SeriesEntry(KEY, "b", "ns", 0.0, 0.0)
    backlog = EventBacklog(limit=3)
    assert backlog.push(PendingWrite(Verdict.CREATE, first, {"n": 1})) == []
    assert backlog.push(PendingWrite(Verdict.PATCH, first)) == []
    assert backlog.push(PendingWrite(Verdict.PATCH, first)) == []  # already queued: once is enough
    assert len(backlog) == 2
    assert backlog.push(PendingWrite(Verdict.CREATE, second, {"n": 2})) == []
    dropped = backlog.push(PendingWrite(Verdict.PATCH, second))
    assert [(write.verdict, write.entry.name) for write in dropped] == [(Verdict.CREATE, "a")]
    popped = [backlog.pop() for _ in range(4)]
    assert [(w.verdict, w.entry.name) for w in popped if w] == [
        (Verdict.PATCH, "a"),
        (Verdict.CREATE, "b"),
        (Verdict.PATCH, "b"),
    ]
    assert popped[-1] is None
    assert backlog.push(PendingWrite(Verdict.PATCH, first)) == []  # not queued any more: queued again
    backlog.push(PendingWrite(Verdict.CREATE, second, {"n": 2}))
    backlog.discard(first)  # a forgotten series: nothing of it stays queued
    assert [(w.verdict, w.entry.name) for w in [backlog.pop()] if w] == [(Verdict.CREATE, "b")]
    assert len(backlog) == 0
    with pytest.raises(ValueError, match="at least one"):
        EventBacklog(limit=0)
