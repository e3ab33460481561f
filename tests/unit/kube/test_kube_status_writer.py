"""The status writer's decisions (pure, table-driven) and the body it applies."""

from typing import Any

import pytest
from kube_fakes import RecordingTransport

from llmkube.kube.apply.applier import Applier, ApplyOutcome, ApplyResult
from llmkube.kube.cache import Informer
from llmkube.kube.control.status_writer import (
    LastWrite,
    StatusWriter,
    after_write,
    current_status,
    status_body,
    status_write_needed,
)
from llmkube.kube.resource import CONFIG_MAPS, Resource
from llmkube.kube.rest import ApiClient
from llmkube.kube.types import Obj

Status = dict[str, Any]


def differs(old: Status | None, new: Status) -> bool:
    """Like the controllers' rule: anything but the timestamp is a change."""
    if old is None:
        return True
    return {k: v for k, v in old.items() if k != "at"} != {k: v for k, v in new.items() if k != "at"}


CREATING = {"phase": "Creating", "at": 1}
READY = {"phase": "Ready", "at": 2}
FAILED = {"phase": "Failed", "at": 3}


def wrote(status: Status, *stale: str, version: str = "9") -> LastWrite[Status]:
    return LastWrite(status, frozenset(stale), version)


@pytest.mark.parametrize(
    ("cached", "cached_version", "last_write", "new", "write"),
    [
        (READY, "5", None, READY, False),  # nothing changed
        (READY, "5", None, {**READY, "at": 9}, False),  # only the timestamp moved
        (CREATING, "5", None, READY, True),  # a change, nothing written before
        (CREATING, "5", wrote(READY, "5"), READY, False),  # we wrote it; the cache has not caught up
        (CREATING, "5", wrote(READY, "5"), {**READY, "at": 9}, False),  # ...and planned it again later
        (CREATING, "5", wrote(READY, "5"), FAILED, True),  # a new change
        (CREATING, "6", wrote(READY, "5"), READY, True),  # the cache moved on (someone rewrote it): compare
        (CREATING, "5", wrote(READY, "5"), CREATING, True),  # back to the stale cached one: the API has READY
        (None, None, None, CREATING, True),
    ],
)
def test_status_write_needed(
    cached: Status | None,
    cached_version: str | None,
    last_write: LastWrite[Status] | None,
    new: Status,
    write: bool,
) -> None:
    assert status_write_needed(cached, cached_version, last_write, new, differs) is write


@pytest.mark.parametrize(
    ("cached", "cached_version", "last_write", "current"),
    [
        (CREATING, "5", None, CREATING),  # nothing written: the cache
        (CREATING, "5", wrote(READY, "5"), READY),  # the cache has not caught up with our write
        (CREATING, "4", wrote(READY, "5", "4"), READY),  # nor with the chain of writes before it
        (FAILED, "6", wrote(READY, "5"), FAILED),  # it has moved on since: the cache
        (None, None, None, None),
    ],
)
def test_the_current_status_includes_our_own_last_write(
    cached: Status | None,
    cached_version: str | None,
    last_write: LastWrite[Status] | None,
    current: Status | None,
) -> None:
    assert current_status(cached, cached_version, last_write) == current


def test_chained_writes_keep_every_version_the_cache_may_still_show() -> None:
    # Copying written onto version 4 (producing 5), then Ready onto the object that write returned.
    first = after_write(None, "4", "5", CREATING)
    second = after_write(first, "5", "6", READY)
    assert second == LastWrite(READY, frozenset({"4", "5"}), "6")
    assert current_status(None, "4", second) == READY
    # A write onto a version the cache showed after our chain starts a new chain.
    assert after_write(second, "7", "8", FAILED) == LastWrite(FAILED, frozenset({"7"}), "8")


@pytest.mark.parametrize(
    ("observed", "identity"),
    [
        (
            {"metadata": {"name": "a", "namespace": "ai", "uid": "u", "resourceVersion": "7"}},
            {"name": "a", "namespace": "ai"},
        ),
        ({"metadata": {"name": "cluster-wide"}}, {"name": "cluster-wide"}),
    ],
)
def test_status_body_keeps_only_the_identity(observed: Status, identity: Status) -> None:
    assert status_body(observed, {"phase": "Ready"}) == {"metadata": identity, "status": {"phase": "Ready"}}


class EchoApplier(Applier):
    """Applies a status as the API server would: a new resourceVersion each time."""

    def __init__(self) -> None:
        super().__init__(ApiClient("https://unused.invalid", transport=RecordingTransport([])))
        self.writes: list[Obj] = []
        self.version = 4

    async def apply_status(self, resource: Resource, desired: Obj, observed: Obj | None) -> ApplyResult:
        self.version += 1
        self.writes.append(desired["status"])
        stored = {"metadata": {**desired["metadata"], "resourceVersion": str(self.version)}}
        return ApplyResult(ApplyOutcome.UPDATED, {**stored, "status": desired["status"]})


def at(version: str, status: Status | None) -> Obj:
    return {"metadata": {"name": "m", "namespace": "ai", "resourceVersion": version}, "status": status}


async def test_the_writer_remembers_a_chain_of_writes_until_the_cache_catches_up() -> None:
    applier = EchoApplier()
    writer: StatusWriter[Status] = StatusWriter(applier, CONFIG_MAPS, differs=differs, encode=dict)
    first = await writer.write(at("4", None), None, CREATING)
    assert first is not None and first.object["metadata"]["resourceVersion"] == "5"
    second = await writer.write(first.object, CREATING, READY)  # onto what the first write returned
    assert second is not None
    # The cache still shows version 4 (or 5): the object is Ready, and Ready again is no write.
    assert writer.current(at("4", None), None) == READY
    assert writer.current(at("5", CREATING), CREATING) == READY
    assert await writer.write(at("4", None), None, {**READY, "at": 7}) is None
    # The cache caught up: from now on it is the truth, and nothing is remembered any more.
    assert writer.current(at("6", READY), READY) == READY
    assert writer.current(at("4", None), None) is None
    assert applier.writes == [CREATING, READY]


def following_writer() -> tuple[StatusWriter[Status], EchoApplier, Informer]:
    applier = EchoApplier()
    informer = Informer(applier.client, CONFIG_MAPS, compact=True)
    informer.replace([at("4", None)], "4")
    writer: StatusWriter[Status] = StatusWriter(applier, CONFIG_MAPS, differs=differs, encode=dict)
    writer.follow(informer)
    return writer, applier, informer


async def test_a_followed_write_is_forgotten_when_the_watch_delivers_it() -> None:
    # A status write wakes no reconcile: without the watch event, the write stayed remembered.
    writer, _, informer = following_writer()
    written = await writer.write(at("4", None), None, CREATING)
    assert written is not None and len(writer) == 1
    other = {"metadata": {"name": "other", "namespace": "ai", "resourceVersion": "6"}}
    informer.watch_event("ADDED", other)  # another object's news
    assert len(writer) == 1
    informer.watch_event("MODIFIED", written.object)
    assert len(writer) == 0
    assert writer.current(written.object, CREATING) == CREATING


async def test_a_followed_write_is_forgotten_when_the_object_is_deleted() -> None:
    writer, _, informer = following_writer()
    assert await writer.write(at("4", None), None, CREATING) is not None
    informer.watch_event("DELETED", at("4", None))
    assert len(writer) == 0


class WatchFirst(EchoApplier):
    """The watch event of each write reaches the informer before the apply's answer returns."""

    def __init__(self) -> None:
        super().__init__()
        self.informer = Informer(self.client, CONFIG_MAPS, compact=True)

    async def apply_status(self, resource: Resource, desired: Obj, observed: Obj | None) -> ApplyResult:
        result = await super().apply_status(resource, desired, observed)
        self.informer.watch_event("MODIFIED", result.object)
        return result


async def test_a_write_the_watch_delivered_before_its_answer_is_not_remembered() -> None:
    applier = WatchFirst()
    applier.informer.replace([at("4", None)], "4")
    writer: StatusWriter[Status] = StatusWriter(applier, CONFIG_MAPS, differs=differs, encode=dict)
    writer.follow(applier.informer)
    written = await writer.write(at("4", None), None, CREATING)
    assert written is not None
    assert len(writer) == 0  # no event is left to forget it by
    assert writer.current(written.object, CREATING) == CREATING
