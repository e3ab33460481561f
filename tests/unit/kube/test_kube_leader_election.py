"""Leader election: the pure state machine, and two electors sharing a lease on a fake clock."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime

import pytest
from kube_fakes import FakeLeaseServer, LeaseView, RecordingTransport, Reply
from prometheus_client import REGISTRY

from llmkube.kube.clock import FakeClock, settle
from llmkube.kube.leader import LeaderElector, LeadershipLost, NotLeader
from llmkube.kube.leader.state import Action, ElectionState, LeaderElectionTiming, LeaseRecord
from llmkube.kube.resource import CONFIG_MAPS
from llmkube.kube.rest import ApiClient

WALL = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("lease", "renew", "retry", "problem"),
    [
        (15, 10, 2, None),
        (10, 10, 2, "greater than the renew deadline"),
        (15, 2.4, 2, "retry period x 1.2"),
        (15, 10, 0.5, "at least 1s"),
    ],
)
def test_timing_follows_client_go_validation(
    lease: float, renew: float, retry: float, problem: str | None
) -> None:
    if problem is None:
        LeaderElectionTiming(lease, renew, retry)
    else:
        with pytest.raises(ValueError, match=problem):
            LeaderElectionTiming(lease, renew, retry)


def record(holder: str, duration: int = 15, transitions: int = 0) -> LeaseRecord:
    return LeaseRecord(holder, duration, WALL, WALL, transitions)


def test_state_machine_decisions() -> None:
    state = ElectionState("me", LeaderElectionTiming())
    step = state.decide(None, 0.0, WALL)
    assert step.action is Action.CREATE and step.record is not None
    assert (step.record.holder, step.record.transitions, step.record.lease_duration_seconds) == ("me", 0, 15)

    other = record("other", transitions=3)
    assert state.decide(other, 100.0, WALL).action is Action.WAIT  # just observed: valid for 15 s
    assert state.decide(other, 114.9, WALL).action is Action.WAIT  # unchanged record, still valid
    takeover = state.decide(other, 115.0, WALL)  # expired by our own clock: take it
    assert takeover.action is Action.UPDATE and takeover.record is not None
    assert (takeover.record.holder, takeover.record.transitions) == ("me", 4)

    renewed = (
        record("other", transitions=3)._replace()
        if False
        else LeaseRecord("other", 15, WALL, datetime(2030, 1, 2, tzinfo=UTC), 3)
    )
    assert state.decide(renewed, 116.0, WALL).action is Action.WAIT  # a changed record is a heartbeat
    assert state.decide(renewed, 130.9, WALL).action is Action.WAIT
    assert state.decide(record(""), 131.0, WALL).action is Action.UPDATE  # released: no holder


def test_leader_paths_and_release() -> None:
    state = ElectionState("me", LeaderElectionTiming())
    mine = record("me", transitions=2)
    state.observe(mine, 0.0)
    assert state.is_leader()
    fast = state.fast_path(5.0, WALL)
    assert fast is not None and fast.transitions == 2 and fast.acquire_time == mine.acquire_time
    assert state.fast_path(15.0, WALL) is None  # our own lease ran out: no optimistic renew
    slow = state.decide(mine, 15.0, WALL)
    assert slow.action is Action.UPDATE and slow.slow_path
    released = state.release(WALL)
    assert released is not None
    assert (released.holder, released.lease_duration_seconds, released.transitions) == ("", 1, 2)
    assert ElectionState("not-leader", LeaderElectionTiming()).release(WALL) is None


def test_lease_record_round_trips_through_the_api_shape() -> None:
    lease = {
        "spec": {
            "holderIdentity": "pod-a_1",
            "leaseDurationSeconds": 15,
            "acquireTime": "2030-01-01T00:00:00.000000Z",
            "renewTime": "2030-01-01T00:00:10.123456Z",
            "leaseTransitions": 4,
            "strategy": "OldestEmulationVersion",
        }
    }
    parsed = LeaseRecord.from_lease(lease)
    assert parsed.renew_time == datetime(2030, 1, 1, 0, 0, 10, 123456, tzinfo=UTC)
    assert parsed.to_spec() == lease["spec"]
    assert LeaseRecord.from_lease({"spec": {}}) == LeaseRecord("", 0, None, None, 0)


def test_an_empty_identity_is_refused() -> None:
    with pytest.raises(ValueError, match="identity"):
        ElectionState("", LeaderElectionTiming())


def elector(view: LeaseView, clock: FakeClock, identity: str) -> LeaderElector:
    client = ApiClient("https://fake:6443", transport=view, clock=clock)
    name = f"lease-{id(view.server)}"
    return LeaderElector(
        client, namespace="sys", name=name, identity=identity, clock=clock, rng=random.Random(identity)
    )


async def test_one_leader_at_a_time_and_failover_after_a_partition() -> None:
    server = FakeLeaseServer()
    clock = FakeClock()
    view_a, view_b = server.view(), server.view()
    a, b = elector(view_a, clock, "a"), elector(view_b, clock, "b")
    await a.acquire()
    b_acquired = asyncio.create_task(b.acquire())
    a_holding = asyncio.create_task(a.hold())
    for _ in range(30):  # a minute of steady state: a renews every 2 s, b keeps waiting
        await clock.advance(2)
        assert a.is_leader and not b.is_leader
    assert not b_acquired.done()
    assert server.leases[("sys", a.name)]["spec"]["leaseTransitions"] == 0

    view_a.partitioned = True  # a can no longer renew
    partitioned_at = clock.monotonic()
    lost_at = acquired_at = None
    for _ in range(400):
        await clock.advance(0.1)
        if lost_at is None and a_holding.done():
            lost_at = clock.monotonic() - partitioned_at
        if acquired_at is None and b_acquired.done():
            acquired_at = clock.monotonic() - partitioned_at
    assert isinstance(a_holding.exception(), LeadershipLost)
    assert lost_at is not None and acquired_at is not None
    assert 10 <= lost_at <= 12.5  # gave up after the renew deadline (plus one retry period)
    # b first had to see a's last renewal (it looks every 2..4.4 s), then wait out 15 s of lease.
    assert 13 <= acquired_at <= 15 + 2 * 4.4
    assert lost_at < acquired_at  # the old leader stopped before the new one started
    spec = server.leases[("sys", a.name)]["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("b", 1)
    assert (
        REGISTRY.get_sample_value("leader_election_master_status", {"name": a.name}) == 1
    )  # b's gauge, same name


async def test_release_hands_over_within_one_retry() -> None:
    server = FakeLeaseServer()
    clock = FakeClock()
    a, b = elector(server.view(), clock, "a"), elector(server.view(), clock, "b")
    await a.acquire()
    b_acquired = asyncio.create_task(b.acquire())
    await clock.advance(3)
    assert not b_acquired.done()
    assert await a.release()
    assert server.writes[-1][0] == ""  # the released record has no holder
    assert server.writes[-1][1]["leaseDurationSeconds"] == 1
    await clock.advance(4.5)  # b's next jittered retry (at most 2 s x 2.2)
    assert b_acquired.done()
    assert b.is_leader and not a.is_leader
    assert not await a.release()  # not leader any more: nothing written
    await settle()


async def test_a_leader_that_sees_someone_else_in_the_lease_steps_down() -> None:
    server = FakeLeaseServer()
    clock = FakeClock()
    a = elector(server.view(), clock, "a")
    await a.acquire()
    holding = asyncio.create_task(a.hold())
    lease = server.leases[("sys", a.name)]
    lease["spec"]["holderIdentity"] = "intruder"  # e.g. an operator edited the lease
    lease["metadata"]["resourceVersion"] = "999"
    await clock.advance(13)
    assert holding.done() and isinstance(holding.exception(), LeadershipLost)


async def steady_leader(server: FakeLeaseServer, clock: FakeClock) -> tuple[LeaderElector, LeaseView]:
    view = server.view()
    leader = elector(view, clock, "a")
    await leader.acquire()
    return leader, view


async def test_a_leader_whose_requests_hang_stops_within_the_renew_deadline() -> None:
    """Each renewal round is bounded as a whole, not only checked between attempts: one attempt
    of three hanging 5 s requests used to carry the leader 12 s past its last renewal."""
    server = FakeLeaseServer()
    clock = FakeClock()
    a, view_a = await steady_leader(server, clock)
    b = elector(server.view(), clock, "b")
    b_acquired = asyncio.create_task(b.acquire())
    a_holding = asyncio.create_task(a.hold())
    for _ in range(10):
        await clock.advance(2)
    last_renewal = clock.monotonic()  # a renews every 2 s on the fake clock: it just did
    assert server.writes[-1][0] == "a"
    view_a.stalled_on = clock  # every request of a now hangs for its whole timeout
    writes_before = len(server.writes)
    lost_at = acquired_at = None
    for _ in range(300):
        await clock.advance(0.1)
        if lost_at is None and a_holding.done():
            lost_at = clock.monotonic() - last_renewal
            assert not a.is_leader and not a.leadership.held
        if acquired_at is None and b_acquired.done():
            acquired_at = clock.monotonic() - last_renewal
    assert isinstance(a_holding.exception(), LeadershipLost)
    assert lost_at is not None and acquired_at is not None
    assert lost_at <= a.timing.renew_deadline + 0.1
    assert acquired_at >= a.timing.lease_duration  # b waits out the whole lease ...
    assert lost_at < acquired_at  # ... so the old leader had stopped before the new one began
    assert server.writes[writes_before][0] == "b"


async def test_a_leader_that_sees_another_holder_steps_down_at_once() -> None:
    server = FakeLeaseServer()
    clock = FakeClock()
    a, _ = await steady_leader(server, clock)
    holding = asyncio.create_task(a.hold())
    await clock.advance(4)
    lease = server.leases[("sys", a.name)]
    lease["spec"]["holderIdentity"] = "thief"  # someone else wrote the lease
    lease["metadata"]["resourceVersion"] = "999"
    await clock.advance(a.timing.retry_period + 0.1)  # the next renewal sees it
    assert holding.done() and isinstance(holding.exception(), LeadershipLost)
    assert not a.leadership.held
    assert server.leases[("sys", a.name)]["spec"]["holderIdentity"] == "thief"  # not fought over


async def test_the_write_guard_refuses_writes_once_the_lease_is_lost() -> None:
    server = FakeLeaseServer()
    clock = FakeClock()
    a, view = await steady_leader(server, clock)
    workload = RecordingTransport([Reply(201, {}), Reply(201, {})])
    client = ApiClient("https://fake:6443", transport=workload, clock=clock)
    client.write_guard = a.leadership
    body = {"metadata": {"name": "x", "namespace": "ns"}}
    await client.create(CONFIG_MAPS, body)  # leader: allowed
    holding = asyncio.create_task(a.hold())
    view.stalled_on = clock
    # A stalled event loop must not be able to write past the deadline either: the guard carries
    # its own deadline, whether or not the renew loop has run yet.
    clock._now += a.timing.renew_deadline + 1  # time passes without the loop running
    with pytest.raises(NotLeader):
        await client.create(CONFIG_MAPS, body)
    await clock.advance(20)
    assert holding.done()
    with pytest.raises(NotLeader):
        await client.delete(CONFIG_MAPS, "x", "ns")
    assert [seen[0] for seen in workload.seen] == ["POST"]  # nothing else reached the server


async def test_release_after_a_renewal_that_landed_unseen() -> None:
    """Shutdown cancels the renew loop; a renewal in flight may still be stored by the server, so
    the release (guarded by the resourceVersion) conflicts: it re-reads and releases anyway."""
    server = FakeLeaseServer()
    clock = FakeClock()
    a, _ = await steady_leader(server, clock)
    lease = server.leases[("sys", a.name)]
    lease["metadata"]["resourceVersion"] = "777"  # our renewal, stored after we stopped waiting
    assert await a.release()
    assert server.writes[-1][0] == ""

    thief_server = FakeLeaseServer()
    b, _ = await steady_leader(thief_server, clock)
    stolen = thief_server.leases[("sys", b.name)]
    stolen["spec"]["holderIdentity"] = "thief"
    stolen["metadata"]["resourceVersion"] = "778"
    writes = len(thief_server.writes)
    assert not await b.release()  # not ours any more: left alone
    assert len(thief_server.writes) == writes
