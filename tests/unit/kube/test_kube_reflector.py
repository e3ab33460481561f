"""Reflector and informer behaviour against the in-memory API server, on a fake clock."""

from __future__ import annotations

import itertools
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass

import orjson
import pytest
from kube_fakes import (
    CONNECTION_REFUSED,
    FakeApiServer,
    Reply,
    Request,
    fail_once,
    is_list,
    is_watch,
    make_client,
    status_body,
)
from structlog.testing import capture_logs

from llmkube.kube.backoff import Backoff
from llmkube.kube.cache import Informer
from llmkube.kube.cache.reflector import advance_rv, list_page_size, relist_rv, resource_version_unavailable
from llmkube.kube.cache.store import Change, Tombstone
from llmkube.kube.clock import FakeClock, settle
from llmkube.kube.errors import error_from_status
from llmkube.kube.managed_fields import owned_fields
from llmkube.kube.resource import CONFIG_MAPS


@dataclass
class Harness:
    server: FakeApiServer
    clock: FakeClock
    informer: Informer
    changes: list[Change]

    def names(self) -> list[str]:
        return sorted(obj["metadata"]["name"] for obj in self.informer.store.objects())

    def lists(self) -> list[str | None]:
        return [request.params.get("resourceVersion") for request in self.server.requests if is_list(request)]

    def watches(self) -> list[dict[str, str]]:
        return [request.params for request in self.server.requests if is_watch(request)]


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    server = FakeApiServer()
    clock = FakeClock()
    informer = Informer(
        make_client(server, clock),
        CONFIG_MAPS,
        namespace="ns",
        clock=clock,
        rng=random.Random(7),
        page_size=2,
    )
    changes: list[Change] = []
    informer.add_handler(changes.append)
    yield Harness(server, clock, informer, changes)
    await informer.stop()


async def test_lists_in_pages_with_a_consistent_read_then_watches_from_the_list_rv(harness: Harness) -> None:
    for index in range(5):
        harness.server.put("ns", f"cm-{index}")
    harness.informer.start()
    await settle()
    assert harness.informer.has_synced()
    assert harness.names() == [f"cm-{index}" for index in range(5)]
    assert harness.lists() == ["", None, None]  # continue pages carry no RV
    assert [request.params.get("limit") for request in harness.server.requests if is_list(request)] == [
        "2"
    ] * 3
    (watch,) = harness.watches()
    assert watch["resourceVersion"] == "105"
    assert watch["allowWatchBookmarks"] == "true"
    assert 300 <= int(watch["timeoutSeconds"]) <= 600
    assert all(change.type == "ADDED" and change.initial for change in harness.changes)
    assert all(change.new is not None and change.new["kind"] == "ConfigMap" for change in harness.changes)


async def test_watch_events_update_the_store_and_reach_handlers_in_order(harness: Harness) -> None:
    harness.informer.start()
    await settle()
    harness.server.put("ns", "a", {"k": "1"})
    harness.server.put("ns", "a", {"k": "2"})
    harness.server.remove("ns", "a")
    await settle()
    assert [(change.type, change.initial) for change in harness.changes] == [
        ("ADDED", False),
        ("MODIFIED", False),
        ("DELETED", False),
    ]
    modified = harness.changes[1]
    assert modified.old_obj is not None and modified.old_obj["data"] == {"k": "1"}
    assert modified.obj["data"] == {"k": "2"}
    assert harness.names() == []
    assert harness.informer.reflector.last_sync_rv == "103"


async def test_bookmarks_move_the_rv_without_events(harness: Harness) -> None:
    harness.informer.start()
    await settle()
    harness.server.put("other", "elsewhere")  # not in our namespace: only the RV moves on the server
    harness.server.bookmark()
    await settle()
    assert harness.changes == []
    assert harness.informer.reflector.last_sync_rv == "101"
    assert harness.informer.reflector.stats.bookmarks == 1


async def test_normal_watch_end_rewatches_from_the_last_rv_without_listing(harness: Harness) -> None:
    harness.informer.start()
    await settle()
    harness.server.put("ns", "a")
    await harness.clock.advance(5)
    harness.server.end_watches()
    await settle()
    assert harness.lists() == [""]
    assert [watch["resourceVersion"] for watch in harness.watches()] == ["100", "101"]


async def test_expired_watch_relists_with_the_last_rv_and_synthesises_deletes(harness: Harness) -> None:
    harness.server.put("ns", "keep")
    harness.server.put("ns", "gone")
    harness.informer.start()
    await harness.clock.advance(5)
    # Disconnected: "gone" is deleted, "new" created, and the history compacted away.
    harness.server.faults.append(fail_once(exception=CONNECTION_REFUSED, when=is_watch))
    harness.server.end_watches()
    harness.server.remove("ns", "gone")
    harness.server.put("ns", "new")
    harness.server.compact()
    harness.changes.clear()
    await harness.clock.advance(60)
    assert harness.names() == ["keep", "new"]
    deleted = [change for change in harness.changes if change.type == "DELETED"]
    assert len(deleted) == 1 and isinstance(deleted[0].old, Tombstone)
    assert deleted[0].obj["metadata"]["name"] == "gone"
    assert [change.type for change in harness.changes] == ["DELETED", "ADDED"]
    assert not any(change.initial for change in harness.changes)
    # The relist asked for the last synced RV first (not a consistent read).
    assert harness.lists() == ["", "102"]
    assert harness.informer.reflector.stats.relists_after_expired == 1


async def test_an_expired_relist_falls_back_to_a_quorum_read(harness: Harness) -> None:
    harness.server.put("ns", "a")
    harness.informer.start()
    await settle()
    harness.server.put("ns", "b")
    await harness.clock.advance(5)
    harness.server.faults.append(fail_once(exception=CONNECTION_REFUSED, when=is_watch))
    harness.server.end_watches()
    harness.server.put("ns", "c")
    harness.server.compact(lists_too=True)  # both the watch RV and a relist at that RV are too old
    await harness.clock.advance(60)
    assert harness.lists()[:3] == ["", "102", ""]  # then a continue page (no RV)
    assert harness.names() == ["a", "b", "c"]
    assert harness.informer.reflector.stats.quorum_relists == 1


def too_large(rv: str = "999999") -> dict[str, object]:
    """The API server's answer to a resourceVersion newer than it knows (storage
    NewTooLargeResourceVersionError): 504, reason Timeout, and a ResourceVersionTooLarge cause."""
    body = status_body(504, "Timeout", f"Too large resource version: {rv}, current: 150")
    body["details"] = {
        "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
        "retryAfterSeconds": 1,
    }
    return body


async def test_a_too_large_rv_on_relist_falls_back_to_a_quorum_read(harness: Harness) -> None:
    harness.server.put("ns", "a")
    harness.informer.start()
    await settle()
    harness.server.put("ns", "b")
    await harness.clock.advance(5)
    harness.server.faults.append(fail_once(exception=CONNECTION_REFUSED, when=is_watch))

    def too_large_at_the_last_rv(request: Request) -> Reply | None:
        if is_list(request) and request.params.get("resourceVersion") not in (None, "", "0"):
            return Reply(504, too_large(request.params["resourceVersion"]))
        return None

    harness.server.faults.append(too_large_at_the_last_rv)
    harness.server.end_watches()
    harness.server.put("ns", "c")
    harness.server.compact()
    await harness.clock.advance(60)
    # The LIST at the last RV was refused as too large: at once a quorum read, not a retry of it.
    assert harness.lists()[:3] == ["", "102", ""]
    assert harness.names() == ["a", "b", "c"]
    assert harness.informer.reflector.stats.quorum_relists == 1


async def test_a_too_large_rv_on_watch_relists_from_a_quorum_read(harness: Harness) -> None:
    harness.server.put("ns", "a")
    harness.informer.start()
    await settle()
    assert harness.lists() == [""]
    harness.server.send_raw(orjson.dumps({"type": "ERROR", "object": too_large()}) + b"\n")
    harness.server.put("ns", "b")
    await harness.clock.advance(60)
    # Not "101" again (the RV the server just called too large) but a consistent read.
    assert harness.lists()[:2] == ["", ""]
    assert harness.names() == ["a", "b"]
    assert harness.informer.reflector.stats.quorum_relists == 1


async def test_a_too_large_rv_when_opening_the_watch_relists_from_a_quorum_read(harness: Harness) -> None:
    harness.server.put("ns", "a")
    harness.server.faults.append(lambda request: Reply(504, too_large()) if is_watch(request) else None)
    harness.informer.start()
    await harness.clock.advance(60)
    assert harness.lists()[:2] == ["", ""]
    assert harness.server.open_watches == 1
    assert harness.informer.reflector.stats.quorum_relists == 1


async def test_a_timeout_without_the_too_large_cause_keeps_the_last_rv(harness: Harness) -> None:
    """Decided from the cause, not from the reason or the message: a plain 504 is an ordinary failure."""
    harness.server.put("ns", "a")
    harness.informer.start()
    await settle()
    plain = status_body(504, "Timeout", "Too large resource version: 999999, current: 150")
    harness.server.send_raw(orjson.dumps({"type": "ERROR", "object": plain}) + b"\n")
    await harness.clock.advance(60)
    assert harness.lists()[:2] == ["", "101"]
    assert harness.informer.reflector.stats.quorum_relists == 0


async def test_429_on_watch_waits_and_rewatches_without_relisting(harness: Harness) -> None:
    harness.server.faults.append(
        fail_once(429, reason="TooManyRequests", when=is_watch, headers={"Retry-After": "7"})
    )
    harness.server.faults.append(
        fail_once(429, reason="TooManyRequests", when=is_watch, headers={"Retry-After": "7"})
    )
    harness.informer.start()
    await settle()
    # The client itself honours Retry-After (twice), then the watch opens.
    await harness.clock.advance(6.9)
    assert harness.server.open_watches == 0
    await harness.clock.advance(7.2)
    assert harness.server.open_watches == 1
    assert harness.lists() == [""]


async def test_very_short_watches_are_failures_that_back_off_and_relist(harness: Harness) -> None:
    harness.informer.start()
    await settle()
    harness.server.end_watches()  # closes at once, no events, < 1 s
    await settle()
    reflector = harness.informer.reflector
    assert reflector.stats.failures == 1
    assert reflector.failing_since == harness.clock.monotonic()
    assert harness.server.open_watches == 0
    await harness.clock.advance(1.7)  # first backoff step is in [0.8, 1.6)
    assert harness.lists() == ["", "100"]
    assert harness.server.open_watches == 1


async def test_connection_failures_back_off_exponentially_then_recover(harness: Harness) -> None:
    harness.informer.start()
    await harness.clock.advance(5)
    refused_at: list[float] = []

    def refuse(request: Request) -> bool:
        if is_watch(request):
            refused_at.append(harness.clock.monotonic())
            return True
        return False

    for _ in range(6):
        harness.server.faults.append(fail_once(exception=CONNECTION_REFUSED, when=refuse))
    harness.server.end_watches()  # a normal close after 5 s: re-watch at once, which is refused
    for _ in range(2000):
        await harness.clock.advance(0.25)
        if harness.server.open_watches:
            break
    gaps = [later - earlier for earlier, later in itertools.pairwise(refused_at)]
    steps = [0.8, 1.6, 3.2, 6.4, 12.8]
    assert len(gaps) == len(steps)
    for gap, step in zip(gaps, steps, strict=True):
        assert step <= gap < 2 * step + 0.25  # jittered step (plus the test's 0.25 s granularity)
    assert harness.server.open_watches == 1
    assert harness.lists() == [""]  # refused connections only re-watch, they never relist
    assert harness.informer.reflector.stats.failures == 6
    assert harness.informer.reflector.stats.watching  # the watch is open again


async def test_a_resource_that_is_not_served_is_asked_for_every_second_or_two(harness: Harness) -> None:
    """A CRD deleted and applied again: 404s on LIST and WATCH are retried every 1-2 s, not backed
    off to 30 s like other failures, so the informer serves the resource soon after it is back."""
    harness.informer.start()
    await harness.clock.advance(5)
    absent_at: list[float] = []

    def absent(request: Request) -> bool:
        absent_at.append(harness.clock.monotonic())
        return True

    for _ in range(8):
        harness.server.faults.append(fail_once(404, reason="NotFound", when=absent))
    with capture_logs() as logs:
        harness.server.end_watches()  # the CRD is gone: its watches end, and the next request is a 404
        for _ in range(400):
            await harness.clock.advance(0.25)
            if harness.server.open_watches:
                break
    gaps = [later - earlier for earlier, later in itertools.pairwise(absent_at)]
    assert len(gaps) == 7
    assert 0.8 <= gaps[0] < 1.6 + 0.25
    for gap in gaps[1:]:
        assert 1.0 <= gap < 2.0 + 0.25  # every 1-2 s however long it lasts (plus 0.25 s granularity)
    assert harness.server.open_watches == 1  # served again: listed and watching
    assert harness.lists()[-1] == "100"
    failures = [entry for entry in logs if entry["event"] == "list/watch failed"]
    assert [entry["log_level"] for entry in failures] == ["warning"] + ["debug"] * 7  # said once

    # Other failures still back off from 0.8 s up: the 404s did not use up their steps.
    refused_at: list[float] = []

    def refuse(request: Request) -> bool:
        if is_watch(request):
            refused_at.append(harness.clock.monotonic())
            return True
        return False

    await harness.clock.advance(5)
    for _ in range(3):
        harness.server.faults.append(fail_once(exception=CONNECTION_REFUSED, when=refuse))
    harness.server.end_watches()
    for _ in range(400):
        await harness.clock.advance(0.25)
        if harness.server.open_watches:
            break
    gaps = [later - earlier for earlier, later in itertools.pairwise(refused_at)]
    assert len(gaps) == 2 and 0.8 <= gaps[0] < 1.6 + 0.25 and 1.6 <= gaps[1] < 3.2 + 0.25


async def test_watching_says_whether_a_watch_is_open(harness: Harness) -> None:
    harness.informer.start()
    await settle()
    assert harness.informer.reflector.stats.watching
    await harness.clock.advance(5)
    harness.server.faults.append(fail_once(exception=CONNECTION_REFUSED, when=is_watch))
    harness.server.end_watches()  # a normal end: re-watch at once, which is refused
    await settle()
    assert not harness.informer.reflector.stats.watching  # backing off
    await harness.clock.advance(2)  # the first retry comes within 0.8..1.6 s
    assert harness.informer.reflector.stats.watching


async def test_inactivity_watchdog_reconnects_a_silent_watch(harness: Harness) -> None:
    harness.informer.start()
    await settle()
    harness.server.put("ns", "a")  # one event, then silence
    await settle()
    await harness.clock.advance(119)
    assert len(harness.watches()) == 1
    await harness.clock.advance(2)
    assert len(harness.watches()) == 2
    assert harness.watches()[1]["resourceVersion"] == "101"


async def test_long_lines_split_across_chunks(harness: Harness) -> None:
    harness.informer.start()
    await settle()
    big = {"blob": "x" * 300_000}
    line = (
        orjson.dumps(
            {
                "type": "ADDED",
                "object": {
                    "kind": "ConfigMap",
                    "metadata": {"name": "big", "namespace": "ns", "resourceVersion": "150"},
                    "data": big,
                },
            }
        )
        + b"\n"
    )
    for offset in range(0, len(line), 4096):
        harness.server.send_raw(line[offset : offset + 4096])
    await settle()
    cached = harness.informer.store.get("ns/big")
    assert cached is not None and cached["data"] == big


async def test_error_event_other_than_expired_fails_backs_off_and_relists(harness: Harness) -> None:
    harness.informer.start()
    await settle()
    error = status_body(500, "InternalError", "etcd down")
    harness.server.send_raw(orjson.dumps({"type": "ERROR", "object": error}) + b"\n")
    await settle()
    assert harness.informer.reflector.stats.failures == 1
    await harness.clock.advance(0.5)
    assert harness.informer.failing_for() == 0.5
    assert harness.lists() == [""]
    await harness.clock.advance(1.5)  # past the first backoff step
    assert harness.lists() == ["", "100"]


async def test_forbidden_watch_keeps_failing_and_reports_it(harness: Harness) -> None:
    harness.server.faults.extend(fail_once(403, reason="Forbidden", when=is_watch) for _ in range(50))
    harness.informer.start()
    await settle()
    assert harness.informer.has_synced()  # LIST is allowed, WATCH is not
    for _ in range(12):
        await harness.clock.advance(10)
    assert harness.informer.failing_for() >= 100
    assert len(harness.lists()) > 3  # each failure relists after backing off


async def test_continue_token_expiry_falls_back_to_one_unpaged_list(harness: Harness) -> None:
    for index in range(5):
        harness.server.put("ns", f"cm-{index}")

    def expire_second_page(request: Request) -> Reply | None:
        if request.params.get("continue"):
            return Reply(410, status_body(410, "Expired", "continue token expired"))
        return None

    harness.server.faults.append(expire_second_page)
    harness.informer.start()
    await settle()
    assert harness.names() == [f"cm-{index}" for index in range(5)]
    limits = [request.params.get("limit") for request in harness.server.requests if is_list(request)]
    assert limits == ["2", "2", None]


async def test_transform_strips_other_managers_fields(harness: Harness) -> None:
    harness.server.put(
        "ns",
        "a",
        managedFields=[
            {"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:data": {}}},
            {"manager": "llmkube-controller", "operation": "Apply", "fieldsV1": {"f:data": {"f:k": {}}}},
        ],
        annotations={"kubectl.kubernetes.io/last-applied-configuration": "{...}", "keep": "me"},
    )
    harness.informer.start()
    await settle()
    cached = harness.informer.store.get("ns/a")
    assert cached is not None
    assert cached["metadata"]["managedFields"] == [
        {"manager": "kubectl", "operation": "Update"},  # who else wrote it, without the field set
        # ours whole, its field set kept as JSON text (compact); the compare reads it parsed
        {"manager": "llmkube-controller", "operation": "Apply", "fieldsV1": '{"f:data":{"f:k":{}}}'},
    ]
    assert owned_fields(cached, "llmkube-controller") == {"f:data": {"f:k": {}}}
    assert cached["metadata"]["annotations"] == {"keep": "me"}


async def test_a_failing_handler_does_not_stop_the_others(harness: Harness) -> None:
    def broken(change: Change) -> None:
        raise RuntimeError("bug")

    seen: list[str] = []
    harness.informer.add_handler(broken)
    harness.informer.add_handler(lambda change: seen.append(change.obj["metadata"]["name"]))
    harness.informer.start()
    await settle()
    harness.server.put("ns", "a")
    await settle()
    assert seen == ["a"]


async def test_late_handlers_get_the_cache_replayed_as_initial(harness: Harness) -> None:
    harness.server.put("ns", "a")
    harness.informer.start()
    await settle()
    late: list[Change] = []
    harness.informer.add_handler(late.append)
    assert [(change.type, change.initial, change.obj["metadata"]["name"]) for change in late] == [
        ("ADDED", True, "a")
    ]


@pytest.mark.parametrize(
    ("status", "body", "unavailable"),
    [
        (504, too_large(), True),
        (410, status_body(410, "Expired", "too old resource version: 1 (5)"), True),
        (410, status_body(410, "Gone"), True),  # old servers
        (200, too_large() | {"code": 504}, True),  # an ERROR watch event: the code is in the body
        (504, status_body(504, "Timeout", "Too large resource version: 9, current: 5"), False),  # no cause
        (500, status_body(500, "InternalError", "etcd down"), False),
        (429, status_body(429, "TooManyRequests"), False),
    ],
)
def test_resource_version_unavailable_is_decided_from_reason_and_causes(
    status: int, body: dict[str, object], unavailable: bool
) -> None:
    assert resource_version_unavailable(error_from_status(status, body)) is unavailable


@pytest.mark.parametrize(
    ("last", "unavailable", "expected"),
    [(None, False, ""), ("42", False, "42"), ("42", True, ""), (None, True, "")],
)
def test_relist_rv(last: str | None, unavailable: bool, expected: str) -> None:
    assert relist_rv(last, unavailable) == expected


@pytest.mark.parametrize(
    ("rv", "paginated", "expected"),
    [("0", False, 500), ("", False, 500), ("42", False, 0), ("42", True, 500)],
)
def test_list_page_size(rv: str, paginated: bool, expected: int) -> None:
    assert list_page_size(rv, paginated, 500) == expected


ADVANCE_TABLE = [
    # (current, event, event_rv, started_from, seen_before) -> (rv, seen_after)
    (("10", "ADDED", "12", "10", False), ("12", False)),  # watch from a real RV: always advance
    (("0", "ADDED", "12", "0", False), ("0", False)),  # synthetic initial ADDED: hold the RV
    (("0", "ADDED", "9", "", False), ("0", False)),
    (("0", "MODIFIED", "15", "0", False), ("15", True)),  # something else arrived: advance
    (("15", "ADDED", "16", "0", True), ("16", True)),  # ... and from then on
    (("15", "BOOKMARK", "20", "0", False), ("20", True)),
    (("15", "ADDED", None, "10", False), ("15", False)),
]


@pytest.mark.parametrize(("given", "expected"), ADVANCE_TABLE)
def test_advance_rv(given: tuple[str, str, str | None, str, bool], expected: tuple[str, bool]) -> None:
    current, event, event_rv, started_from, seen = given
    assert advance_rv(current, event, event_rv, started_from=started_from, seen_non_added=seen) == expected


def test_backoff_grows_with_jitter_caps_and_resets_after_two_healthy_minutes() -> None:
    backoff = Backoff(rng=random.Random(3))
    now = 0.0
    delays = []
    for _ in range(10):
        delays.append(backoff.next_delay(now))
        now += delays[-1]
    steps = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0, 30.0, 30.0]
    for delay, step in zip(delays, steps, strict=True):
        assert step <= delay < 2 * step
    assert backoff.next_delay(now + 121) < 1.6  # two healthy minutes: back to the first step


def test_backoff_without_jitter_is_exact() -> None:
    backoff = Backoff(initial=1.0, cap=4.0, jitter=0.0)
    assert [backoff.next_delay(0.0) for _ in range(4)] == [1.0, 2.0, 4.0, 4.0]
