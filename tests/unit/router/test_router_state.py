"""The router's state machines with fake time: quarantine and its half-open probe, budgets over
rolling windows (Retry-After, teams, memory bound, a new spec), the rolling p95."""

import pytest

from llmkube.plan.router.budgets import OVERFLOW_TEAM, Budgets, scope_key
from llmkube.plan.router.config import Budget
from llmkube.plan.router.latency import RollingP95
from llmkube.plan.router.quarantine import Quarantine, State

# (event, time, state after, would a request go?)
QUARANTINE_STEPS: list[tuple[str, float, State, bool]] = [
    ("acquire", 0.0, State.HEALTHY, True),
    ("failed", 1.0, State.QUARANTINED, False),
    ("acquire", 5.0, State.QUARANTINED, False),  # still in quarantine (15 s)
    ("acquire", 16.0, State.PROBING, False),  # due: this request is the half-open probe...
    ("acquire", 16.5, State.PROBING, False),  # ...and nobody else goes while it is out
    ("failed", 17.0, State.QUARANTINED, False),  # the probe failed: quarantined again, from now
    ("acquire", 31.0, State.QUARANTINED, False),
    ("acquire", 32.0, State.PROBING, False),
    ("succeeded", 33.0, State.HEALTHY, True),
    ("acquire", 33.1, State.HEALTHY, True),
]


def test_quarantine_state_machine() -> None:
    machine = Quarantine(15.0)
    for event, now, state, usable in QUARANTINE_STEPS:
        if event == "acquire":
            machine.acquire("pod", now)
        else:
            getattr(machine, event)("pod", now)
        assert (machine.state("pod", now), machine.usable("pod", now)) == (state, usable), (event, now)


def test_acquire_lets_exactly_one_probe_through() -> None:
    machine = Quarantine(10.0)
    machine.failed("pod", 0.0)
    assert [machine.acquire("pod", 10.0) for _ in range(3)] == [True, False, False]


def test_an_abandoned_probe_lets_the_next_request_probe() -> None:
    machine = Quarantine(10.0)
    machine.failed("pod", 0.0)
    assert machine.acquire("pod", 10.0)
    machine.abandoned("pod", 11.0)  # the client left before an answer: no verdict
    assert machine.acquire("pod", 11.0)


def test_a_silent_probe_is_given_up_on() -> None:
    machine = Quarantine(10.0, probe_grace=5.0)
    machine.failed("pod", 0.0)
    assert machine.acquire("pod", 10.0)
    assert not machine.acquire("pod", 14.9)
    assert machine.state("pod", 15.0) is State.QUARANTINED and machine.acquire("pod", 15.0)


def test_zero_quarantine_probes_at_once() -> None:
    machine = Quarantine(0.0)
    machine.failed("pod", 3.0)
    assert machine.acquire("pod", 3.0)


def test_each_endpoint_has_its_own_state_and_gone_ones_are_forgotten() -> None:
    machine = Quarantine(10.0)
    machine.failed("a", 0.0)
    assert machine.usable("b", 1.0) and not machine.usable("a", 1.0)
    assert machine.quarantined(1.0) == ["a"]
    machine.forget("a")
    assert machine.usable("a", 1.0) and machine.quarantined(1.0) == []


def _budget(**extra: object) -> Budget:
    return Budget(**{"name": "b", "scope": "router", "window": 60.0, "max_tokens": 100, **extra})  # type: ignore[arg-type]


def test_tokens_over_a_rolling_window() -> None:
    budget = _budget()
    budgets = Budgets([budget])
    use = budgets.applicable(rule=None, headers={})
    assert budgets.check(use, 0.0) is None
    budgets.record(use, 60, 0.0, 0.0)
    assert budgets.check(use, 1.0) is None  # 60 < 100
    budgets.record(use, 50, 0.0, 10.0)  # 110: over (the request that crossed it was let through)
    refusal = budgets.check(use, 20.0)
    assert refusal is not None and refusal.budget == "b"
    assert "110 of 100 tokens in the last 60s" in refusal.message
    # The first 60 tokens leave the window at 61 s (bucket 0..1 s + 60 s): 41 s from t=20.
    assert refusal.retry_after == pytest.approx(41.0)
    assert budgets.check(use, 60.9) is not None
    assert budgets.check(use, 61.0) is None
    assert budgets.remaining(budget, 61.0) == (50.0, None)
    assert budgets.check(use, 200.0) is None and budgets.remaining(budget, 200.0) == (100.0, None)


def test_usd_budget() -> None:
    budget = _budget(max_tokens=None, max_usd=1.0)
    budgets = Budgets([budget])
    use = budgets.applicable(rule=None, headers={})
    budgets.record(use, 10, 0.6, 0.0)
    assert budgets.check(use, 1.0) is None
    budgets.record(use, 10, 0.5, 2.0)
    refusal = budgets.check(use, 3.0)
    assert refusal is not None and "$1.1000 of $1" in refusal.message
    assert budgets.remaining(budget, 3.0) == (None, 0.0)


def test_scopes() -> None:
    router, rule, team = (
        _budget(name="all"),
        _budget(name="r", scope="rule", rule_name="hard"),
        _budget(name="t", scope="team", header_key="x-team"),
    )
    assert scope_key(router, rule=None, headers={}) == ""
    assert scope_key(rule, rule="hard", headers={}) == "" and scope_key(rule, rule="easy", headers={}) is None
    assert scope_key(team, rule=None, headers={"x-team": "blue"}) == "blue"
    # Leaving the header out does not escape a team budget: it is the team "".
    assert scope_key(team, rule=None, headers={}) == ""


def test_teams_are_counted_apart() -> None:
    budget = _budget(scope="team", header_key="x-team")
    budgets = Budgets([budget])
    blue = budgets.applicable(rule=None, headers={"x-team": "blue"})
    red = budgets.applicable(rule=None, headers={"x-team": "red"})
    budgets.record(blue, 100, 0.0, 0.0)
    blue_refused = budgets.check(blue, 1.0)
    assert blue_refused is not None and 'for team "blue"' in blue_refused.message
    assert budgets.check(red, 1.0) is None


def test_invented_team_names_cannot_grow_memory() -> None:
    budget = _budget(scope="team", header_key="x-team")
    budgets = Budgets([budget], max_teams=3)
    for i in range(50):
        budgets.record(budgets.applicable(rule=None, headers={"x-team": f"t{i}"}), 40, 0.0, float(i) / 100)
    assert budgets.teams("b") == 4  # three teams, and the overflow counter the others share
    overflow = budgets.applicable(rule=None, headers={"x-team": "t49"})
    assert budgets.check(overflow, 1.0) is not None  # 47 teams of 40 tokens in one counter
    assert OVERFLOW_TEAM not in {"t0", "t1", "t2"}
    # Once the known teams' windows are empty, new teams get counters of their own again.
    budgets.record(budgets.applicable(rule=None, headers={"x-team": "late"}), 1, 0.0, 500.0)
    assert budgets.check(budgets.applicable(rule=None, headers={"x-team": "late"}), 500.0) is None
    assert budgets.teams("b") <= 3


def test_a_new_spec_keeps_counters_of_unchanged_budgets() -> None:
    same, changed = _budget(name="same"), _budget(name="changed")
    budgets = Budgets([same, changed])
    use = budgets.applicable(rule=None, headers={})
    budgets.record(use, 100, 0.0, 0.0)
    budgets.reconfigure([same, _budget(name="changed", window=30.0), _budget(name="new")])
    use = budgets.applicable(rule=None, headers={})
    refusal = budgets.check(use, 1.0)
    assert refusal is not None and refusal.budget == "same"
    assert budgets.remaining(_budget(name="changed", window=30.0), 1.0) == (100.0, None)


def test_nothing_used_nothing_counted() -> None:
    budgets = Budgets([_budget()])
    budgets.record(budgets.applicable(rule=None, headers={}), 0, 0.0, 0.0)
    assert budgets.teams("b") == 0


def test_long_windows_use_few_buckets() -> None:
    budget = _budget(window=86400.0, max_tokens=10**9)
    budgets = Budgets([budget])
    use = budgets.applicable(rule=None, headers={})
    for second in range(0, 86400, 7):
        budgets.record(use, 1, 0.0, float(second))
    window = budgets._windows["b"][""]
    assert len(window._buckets) <= 121


def test_rolling_p95() -> None:
    p95 = RollingP95(samples=100, window=60.0)
    assert p95.value(0.0) is None
    for i in range(100):
        p95.add(0.01 * (i + 1), float(i) / 10)
    assert p95.value(10.0) == pytest.approx(0.95)
    assert p95.value(200.0) is None  # every sample older than the window
