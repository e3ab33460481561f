"""FairSlots: a pool shared fairly between groups (the Model controller's namespaces)."""

import asyncio

import pytest

from llmkube.kube.control.fairslots import FairSlots, next_group


@pytest.mark.parametrize(
    ("waiting", "running", "served", "expected"),
    [
        ({}, {}, {}, None),
        ({"a": 3}, {"a": 2}, {"a": 5}, None),  # a has its share
        ({"a": 3, "b": 1}, {"a": 2}, {"a": 5}, "b"),  # b waits behind a, but a is full
        ({"a": 3, "b": 1}, {"a": 1}, {"a": 5, "b": 4}, "b"),  # b was served longer ago
        ({"a": 3, "b": 1}, {"a": 1}, {"a": 3, "b": 4}, "a"),
        ({"a": 3, "b": 1}, {"a": 1}, {"a": 5}, "b"),  # b never was
        ({"a": 1, "b": 1}, {}, {}, "a"),  # a tie: who waited first
        ({"a": 0, "b": 1}, {}, {}, "b"),
    ],
)
def test_who_gets_a_free_slot(
    waiting: dict[str, int], running: dict[str, int], served: dict[str, int], expected: str | None
) -> None:
    assert next_group(waiting, running, served, per_group=2) == expected


async def hold(slots: FairSlots, group: str, started: list[str], release: asyncio.Event) -> None:
    async with slots.slot(group):
        started.append(group)
        await release.wait()


async def test_a_crowded_group_waits_for_its_own_slots_only() -> None:
    slots = FairSlots(total=4, per_group=2)
    started: list[str] = []
    release = asyncio.Event()
    crowd = [asyncio.create_task(hold(slots, "busy", started, release)) for _ in range(8)]
    await asyncio.sleep(0)
    assert started == ["busy", "busy"]  # its share, not the whole pool
    assert (slots.running("busy"), slots.waiting("busy")) == (2, 6)
    other = asyncio.create_task(hold(slots, "quiet", started, release))
    await asyncio.sleep(0)
    assert started[-1] == "quiet"  # at once, with 6 of the other group's waiting
    release.set()
    await asyncio.gather(*crowd, other)
    assert slots.holders == 0 and slots.waiting("busy") == 0


async def test_freed_slots_go_round_robin() -> None:
    slots = FairSlots(total=1, per_group=1)
    started: list[str] = []
    gates = {name: asyncio.Event() for name in ("a1", "a2", "b1", "c1")}

    async def run(group: str, name: str) -> None:
        async with slots.slot(group):
            started.append(name)
            await gates[name].wait()

    tasks = [
        asyncio.create_task(run(group, name))
        for group, name in [("a", "a1"), ("a", "a2"), ("b", "b1"), ("c", "c1")]
    ]
    await asyncio.sleep(0)
    for name in ("a1", "b1", "c1", "a2"):
        assert started[-1] == name
        gates[name].set()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
    await asyncio.gather(*tasks)
    assert started == ["a1", "b1", "c1", "a2"]


async def test_a_cancelled_waiter_leaves_no_trace() -> None:
    slots = FairSlots(total=1, per_group=1)
    release = asyncio.Event()
    first = asyncio.create_task(hold(slots, "a", [], release))
    await asyncio.sleep(0)
    waiter = asyncio.create_task(hold(slots, "b", [], release))
    await asyncio.sleep(0)
    assert slots.waiting("b") == 1
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert slots.waiting("b") == 0
    release.set()
    await first
    assert slots.holders == 0


async def test_cancelling_a_holder_and_its_waiters_at_once_hands_nothing_to_a_cancelled_waiter() -> None:
    """What stopping the controllers does (BackgroundActions.close cancels every action): the holder's
    release runs before a cancelled waiter has left the line, and must pass it over, not grant it the
    slot (set_result on a cancelled future raised InvalidStateError inside the holder's exit)."""
    slots = FairSlots(total=1, per_group=1)
    release = asyncio.Event()
    holder = asyncio.create_task(hold(slots, "a", [], release))
    await asyncio.sleep(0)
    waiters = [asyncio.create_task(hold(slots, "a", [], release)) for _ in range(2)]
    await asyncio.sleep(0)
    assert slots.waiting("a") == 2
    for task in (holder, *waiters):  # the holder runs its exit first, the waiters' futures cancelled
        task.cancel()
    outcomes = await asyncio.gather(holder, *waiters, return_exceptions=True)
    assert all(isinstance(outcome, asyncio.CancelledError) for outcome in outcomes), outcomes
    assert (slots.holders, slots.waiting("a")) == (0, 0)
    async with asyncio.timeout(1), slots.slot("a"):  # the slot is free again
        assert slots.holders == 1
