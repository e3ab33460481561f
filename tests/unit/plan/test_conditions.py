from datetime import UTC, datetime, timedelta

import pytest

from llmkube.api.meta import Condition
from llmkube.plan.conditions.standard import (
    find_condition,
    is_true,
    keep_transition_times,
    remove_condition,
    set_condition,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


def cond(type_: str, status: str = "True", reason: str = "R", at: datetime = T0) -> Condition:
    return Condition.model_validate(
        {"type": type_, "status": status, "reason": reason, "message": "m", "lastTransitionTime": at}
    )


@pytest.mark.parametrize(
    ("existing", "status", "expected_transition"),
    [
        (None, "True", T1),  # new condition: transition is now
        (cond("Ready", "True"), "True", T0),  # same status: transition kept
        (cond("Ready", "False"), "True", T1),  # flipped: transition is now
    ],
)
def test_set_condition_moves_transition_time_only_on_flip(
    existing: Condition | None, status: str, expected_transition: datetime
) -> None:
    result = set_condition(
        [existing] if existing else [],
        type_="Ready",
        status=status,  # type: ignore[arg-type]
        reason="Now",
        message="new message",
        now=T1,
        observed_generation=7,
    )
    assert len(result) == 1
    assert result[0].last_transition_time == expected_transition
    assert (result[0].reason, result[0].message, result[0].observed_generation) == ("Now", "new message", 7)


def test_set_condition_keeps_order_and_other_conditions() -> None:
    before = [cond("A"), cond("B"), cond("C")]
    after = set_condition(before, type_="B", status="False", reason="X", message="x", now=T1)
    assert [c.type for c in after] == ["A", "B", "C"]
    assert after[0] is before[0] and after[2] is before[2]
    assert set_condition(before, type_="D", status="True", reason="X", message="", now=T1)[-1].type == "D"


def test_remove_find_and_is_true() -> None:
    conditions = [cond("A", "True"), cond("B", "False")]
    assert [c.type for c in remove_condition(conditions, "A")] == ["B"]
    assert remove_condition(None, "A") == []
    assert find_condition(conditions, "B") is conditions[1]
    assert find_condition(None, "B") is None
    assert is_true(conditions, "A") and not is_true(conditions, "B") and not is_true(conditions, "Z")


@pytest.mark.parametrize(
    ("existing", "expected"),
    [
        ([], []),  # never written: stays absent
        ([cond("A", "True")], [("A", "False", "Why", T1)]),  # flipped: transition is now
        ([cond("A", "False")], [("A", "False", "Why", T0)]),  # same status: transition kept
    ],
)
def test_update_condition_if_present(
    existing: list[Condition], expected: list[tuple[str, str, str, datetime]]
) -> None:
    from llmkube.plan.conditions.standard import update_condition_if_present

    result = update_condition_if_present(
        existing, type_="A", status="False", reason="Why", message="m", now=T1, observed_generation=3
    )
    assert [(c.type, c.status, c.reason, c.last_transition_time) for c in result] == expected
    assert update_condition_if_present(None, type_="A", status="True", reason="R", message="", now=T1) == []


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ([], [cond("A", at=T1)], [T1]),  # new: its own time
        ([cond("A")], [cond("A", at=T1)], [T0]),  # same status: the written time stays
        ([cond("A", "False")], [cond("A", at=T1)], [T1]),  # flipped: the plan's time
        ([cond("A"), cond("B", "False")], [cond("B", "False", at=T1), cond("A", at=T1)], [T0, T0]),
        ([cond("A", reason="X")], [cond("A", reason="Y", at=T1)], [T0]),  # a new reason is no flip
        ([cond("A")], [], []),
    ],
)
def test_keep_transition_times_counts_only_the_written_status(
    old: list[Condition], new: list[Condition], expected: list[datetime]
) -> None:
    kept = keep_transition_times(old, new)
    assert [c.last_transition_time for c in kept] == expected
    assert [(c.type, c.status, c.reason) for c in kept] == [(c.type, c.status, c.reason) for c in new]
