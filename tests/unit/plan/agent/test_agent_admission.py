"""Who a host agent admits into its memory budget, whom it evicts for whom, and in which order;
rolls in place or recreated; memory budgets and pressure."""

import pytest

from llmkube.api.model import HardwareSpec
from llmkube.plan.agent.admission import (
    Demand,
    Resident,
    admit,
    check_pressure,
    eviction_message,
    eviction_order,
    pressure_victim,
    waiting_order,
)
from llmkube.plan.agent.memory import (
    Pressure,
    PressureSettings,
    default_budget,
    evicts_under_pressure,
    model_cap,
    parse_budget,
    pressure,
)
from llmkube.plan.agent.rollout import DrainSettings, Strategy, drain_wakeup, drained, roll_plan
from llmkube.plan.inferenceservice.memory_fit import GIB

CRITICAL, HIGH, NORMAL, LOW, BATCH = 1_000_000, 100_000, 10_000, 1_000, 100


def resident(
    key: str, gib: float, priority: int = NORMAL, *, protected: bool = False, started: float = 0
) -> Resident:
    return Resident(key, int(gib * GIB), priority, protected, started)


def demand(key: str, gib: float, priority: int = NORMAL) -> Demand:
    return Demand(key, int(gib * GIB), priority)


def keys(residents: list[Resident] | tuple[Resident, ...]) -> list[str]:
    return [r.key for r in residents]


def test_eviction_order_lowest_priority_then_largest_then_oldest_never_protected() -> None:
    residents = [
        resident("a/high", 4, HIGH),
        resident("a/low-small", 1, LOW),
        resident("a/low-big", 3, LOW),
        resident("a/batch-new", 2, BATCH, started=50),
        resident("a/batch-old", 2, BATCH, started=10),
        resident("a/batch-guarded", 8, BATCH, protected=True),
    ]
    assert keys(eviction_order(residents)) == [
        "a/batch-old",
        "a/batch-new",
        "a/low-big",
        "a/low-small",
        "a/high",
    ]


def test_a_service_that_fits_is_admitted_and_evicts_nobody() -> None:
    assert admit(demand("a/new", 2), [resident("a/x", 4)], 8 * GIB).evict == ()
    assert admit(demand("a/new", 4), [resident("a/x", 4)], 8 * GIB).admitted  # exactly full


def test_a_higher_priority_service_evicts_as_few_lower_ones_as_needed() -> None:
    residents = [resident("a/low", 3, LOW), resident("a/batch", 2, BATCH), resident("a/normal", 2, NORMAL)]
    result = admit(demand("a/high", 4, HIGH), residents, 8 * GIB)
    assert result.admitted and keys(result.evict) == ["a/batch", "a/low"]
    just_one = admit(demand("a/high", 2, HIGH), residents, 8 * GIB)
    assert keys(just_one.evict) == ["a/batch"]


def test_equal_or_higher_priority_is_never_evicted() -> None:
    result = admit(demand("a/new", 4, NORMAL), [resident("a/x", 6, NORMAL)], 8 * GIB)
    assert not result.admitted and result.evict == ()
    assert result.reason == (
        "it needs ~4.0 GiB and 2.0 GiB of the agent's 8.0 GiB budget is free; services of its priority or "
        "higher, or protected from eviction, hold the rest: a/x (6.0 GiB)"
    )


def test_protected_services_are_never_evicted() -> None:
    residents = [resident("a/guarded", 6, BATCH, protected=True), resident("a/low", 1, LOW)]
    result = admit(demand("a/critical", 4, CRITICAL), residents, 8 * GIB)
    assert not result.admitted
    assert "a/guarded (6.0 GiB, protected)" in result.reason


def test_more_than_the_whole_budget_is_refused_without_evicting() -> None:
    result = admit(demand("a/huge", 9, CRITICAL), [resident("a/low", 1, LOW)], 8 * GIB)
    assert (result.admitted, result.evict) == (False, ())
    assert result.reason == "it needs ~9.0 GiB, more than the agent's whole memory budget (8.0 GiB)"


def test_its_own_old_holding_does_not_count_against_it() -> None:
    assert admit(demand("a/x", 6), [resident("a/x", 6)], 8 * GIB).admitted


def test_waiting_order_highest_priority_first_then_oldest() -> None:
    order = waiting_order(
        [
            (demand("a/low", 1, LOW), "2026-01-01T00:00:00Z"),
            (demand("a/high-new", 1, HIGH), "2026-01-03T00:00:00Z"),
            (demand("a/high-old", 1, HIGH), "2026-01-02T00:00:00Z"),
        ]
    )
    assert [d.key for d in order] == ["a/high-old", "a/high-new", "a/low"]


def test_pressure_victim_never_the_last_one_never_protected() -> None:
    assert pressure_victim([resident("a/only", 4, BATCH)]) is None
    assert (
        pressure_victim(
            [resident("a/g1", 4, BATCH, protected=True), resident("a/g2", 2, LOW, protected=True)]
        )
        is None
    )
    victim = pressure_victim([resident("a/high", 4, HIGH), resident("a/low", 1, LOW)])
    assert victim is not None and victim.key == "a/low"


@pytest.mark.parametrize(
    ("budget", "old", "new", "others", "strategy", "evicted"),
    [
        (8, 2, 3, [], Strategy.IN_PLACE, []),  # 2 + 3 fit beside each other
        (8, 4, 5, [], Strategy.RECREATE, []),  # 4 + 5 do not; 5 alone does
        (8, 4, 5, [("a/low", 2, LOW)], Strategy.RECREATE, []),  # never evicts to roll in place
        (8, 4, 7, [("a/low", 2, LOW)], Strategy.RECREATE, ["a/low"]),  # recreated as any start: evicts lower
        (8, 4, 7, [("a/peer", 2, NORMAL)], Strategy.REFUSED, []),  # keeps serving the previous spec
    ],
)
def test_roll_plan(
    budget: int,
    old: int,
    new: int,
    others: list[tuple[str, int, int]],
    strategy: Strategy,
    evicted: list[str],
) -> None:
    residents = [resident("a/svc", old), *(resident(k, g, p) for k, g, p in others)]
    plan = roll_plan(demand("a/svc", new), residents[0], residents, budget * GIB)
    assert plan.strategy is strategy and keys(plan.admission.evict) == evicted


def test_drain_waits_for_propagation_then_for_requests_in_flight() -> None:
    settings = DrainSettings(propagation=2.0, drain_timeout=30.0)
    assert not drained(10.0, 11.0, 0, settings)  # kube-proxy has not followed the slice yet
    assert drained(10.0, 12.0, 0, settings)
    assert not drained(10.0, 20.0, 1, settings) and not drained(10.0, 20.0, None, settings)
    assert drained(10.0, 40.0, 3, settings)  # at the latest after the drain timeout
    assert drain_wakeup(10.0, 10.5, settings) == 12.0
    assert drain_wakeup(10.0, 20.0, settings) == 20.5
    assert drain_wakeup(10.0, 39.8, settings) == 40.0


@pytest.mark.parametrize(
    ("text", "total", "expected"),
    [
        ("", 16 * GIB, int(16 * GIB * 0.67)),
        ("", 64 * GIB, int(64 * GIB * 0.75)),
        ("24Gi", 64 * GIB, 24 * GIB),
        ("0.5", 64 * GIB, 32 * GIB),
        ("50%", 64 * GIB, 32 * GIB),
        ("1", 8 * GIB, 8 * GIB),
        ("2", 8 * GIB, 2),  # a plain number above 1 is a quantity: bytes
    ],
)
def test_parse_budget(text: str, total: int, expected: int) -> None:
    assert parse_budget(text, total) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("lots", "'lots' is neither a quantity (24Gi) nor a fraction (0.6, 60%)"),
        ("150%", "'150%' is not a fraction of the host's memory between 0 and 1 (or 100%)"),
        ("0", "'0' is not a fraction of the host's memory between 0 and 1 (or 100%)"),
        ("-1Gi", "'-1Gi' is not a positive amount of memory"),
        ("x%", "'x%' is not a percentage"),
    ],
)
def test_parse_budget_refuses_nonsense(text: str, message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        parse_budget(text, 8 * GIB)


def test_default_budget_follows_the_reference() -> None:
    assert default_budget(36 * GIB) == int(36 * GIB * 0.67)
    assert default_budget(36 * GIB + 1) == int((36 * GIB + 1) * 0.75)


def test_model_cap() -> None:
    assert model_cap(None, 8 * GIB) == (None, "")
    cap, source = model_cap(HardwareSpec(memory_budget="2Gi"), 8 * GIB)
    assert cap == 2 * GIB and source == "its Model's hardware.memoryBudget (2Gi)"
    cap, source = model_cap(HardwareSpec(memory_fraction=0.25), 8 * GIB)
    assert cap == 2 * GIB and "memoryFraction (0.25 of this host's 8.0 GiB)" in source
    assert model_cap(HardwareSpec(memory_budget="many"), 8 * GIB) == (None, "")


@pytest.mark.parametrize(
    ("available", "level"),
    [(4.0, Pressure.NORMAL), (1.5, Pressure.WARNING), (0.7, Pressure.CRITICAL), (0.0, Pressure.CRITICAL)],
)
def test_pressure_levels(available: float, level: Pressure) -> None:
    assert pressure(int(available * GIB), 8 * GIB, PressureSettings()) is level


def test_pressure_evicts_only_when_critical_and_the_servers_hold_most_of_the_memory() -> None:
    settings = PressureSettings()
    assert evicts_under_pressure(Pressure.CRITICAL, 5 * GIB, 8 * GIB, settings)
    assert not evicts_under_pressure(Pressure.CRITICAL, 3 * GIB, 8 * GIB, settings)  # someone else's pressure
    assert not evicts_under_pressure(Pressure.WARNING, 7 * GIB, 8 * GIB, settings)


@pytest.mark.parametrize(
    ("available", "rss", "residents", "level", "victim"),
    [
        (4.0, 7.0, [resident("a/x", 2, LOW)], Pressure.NORMAL, None),
        (1.5, 7.0, [resident("a/x", 2, LOW)], Pressure.WARNING, None),  # warning: nobody evicted
        (0.5, 3.0, [resident("a/x", 2, LOW)], Pressure.CRITICAL, None),  # someone else's pressure
        (0.5, 7.0, [], Pressure.CRITICAL, None),  # nobody to evict
        (0.5, 7.0, [resident("a/x", 2, protected=True)], Pressure.CRITICAL, None),
        (0.5, 7.0, [resident("a/x", 2, HIGH), resident("a/y", 2, LOW)], Pressure.CRITICAL, "a/y"),
    ],
)
def test_check_pressure_evicts_one_service_only_for_the_servers_own_pressure(
    available: float, rss: float, residents: list[Resident], level: Pressure, victim: str | None
) -> None:
    check = check_pressure(
        int(available * GIB),
        8 * GIB,
        PressureSettings(),
        servers_rss=int(rss * GIB),
        residents=residents,
        agent="mac-1",
    )
    assert check.level is level
    assert (check.victim.key if check.victim else None) == victim
    if victim is None:
        assert check.message == ""
    else:
        assert check.message == (
            "evicted by the host agent mac-1 under memory pressure (512 MiB of the host's 8.0 GiB available)"
        )


def test_eviction_message_names_the_agent_the_service_its_priority_and_need() -> None:
    assert eviction_message("mac-1", "team/big", HIGH, 3 * GIB) == (
        "evicted by the host agent mac-1 to make room for team/big (priority 100000, needs ~3.0 GiB)"
    )
