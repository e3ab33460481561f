"""Standard condition semantics (apimachinery `meta.SetStatusCondition`), as pure functions.

`lastTransitionTime` moves only when `status` flips; reason, message and observedGeneration are
always refreshed. Lists are keyed by `type` and keep their order, so an unchanged set of
conditions produces an identical list, and an unchanged status makes no write.
"""

from collections.abc import Sequence
from datetime import datetime

from llmkube.api.meta import Condition, ConditionStatus


def find_condition(conditions: Sequence[Condition] | None, type_: str) -> Condition | None:
    for condition in conditions or ():
        if condition.type == type_:
            return condition
    return None


def set_condition(
    conditions: Sequence[Condition] | None,
    *,
    type_: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    now: datetime,
    observed_generation: int | None = None,
) -> list[Condition]:
    """Return a new list with `type_` set; other conditions are untouched."""
    existing = find_condition(conditions, type_)
    transition = now if existing is None or existing.status != status else existing.last_transition_time
    updated = Condition(
        type=type_,
        status=status,
        reason=reason,
        message=message,
        last_transition_time=transition,
        observed_generation=observed_generation,
    )
    if existing is None:
        return [*(conditions or ()), updated]
    return [updated if c.type == type_ else c for c in conditions or ()]


def update_condition_if_present(
    conditions: Sequence[Condition] | None,
    *,
    type_: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    now: datetime,
    observed_generation: int | None = None,
) -> list[Condition]:
    """Like `set_condition`, but a condition never written stays absent (an object that was always
    fine never grows a condition just to say so)."""
    if find_condition(conditions, type_) is None:
        return list(conditions or ())
    return set_condition(
        conditions,
        type_=type_,
        status=status,
        reason=reason,
        message=message,
        now=now,
        observed_generation=observed_generation,
    )


def remove_condition(conditions: Sequence[Condition] | None, type_: str) -> list[Condition]:
    return [c for c in conditions or () if c.type != type_]


def is_true(conditions: Sequence[Condition] | None, type_: str) -> bool:
    condition = find_condition(conditions, type_)
    return condition is not None and condition.status == "True"
