"""Standard condition semantics (apimachinery `meta.SetStatusCondition`), as pure functions.

`lastTransitionTime` moves only when `status` flips; reason, message and observedGeneration are
always refreshed. Lists are keyed by `type` and keep their order, so an unchanged set of
conditions produces an identical list, and an unchanged status makes no write.

One rule for stale conditions, for every kind (Model and InferenceService alike), after the
Kubernetes API conventions (a missing condition means Unknown, so clients such as
`kubectl wait --for=condition=Degraded=false` need it present):

* A condition, once written, is never removed because its cause went away: it turns to the status
  that says so, with a reason naming why (`update_condition_if_present`). A Model's Progressing and Degraded
  become False/Superseded; an InferenceService's Degraded becomes False/Recovered and its
  GPUAvailable True/NotWaitingForGPU.
* A condition that was never written stays absent while it would only say "all is well"
  (an object that was always fine never grows a Degraded=False).
* A condition is removed only when its subject no longer exists for the object (VLLMSpecValid once
  the runtime is not vLLM, SourceDrifted once the source changed or cannot be probed): nothing is
  known about it any more, which is what absence means.

The summary conditions follow the same rule (plan/conditions/summary.py): `Ready` and `Reconciling` are
written with the first status and always describe the present; `Stalled` appears with the first
failure and then turns False/Recovered, never removed. Every condition carries the
`observedGeneration` it was computed for.
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
    fine never grows a condition just to say so). This is how a condition whose cause is gone
    settles: an existing one turns to `status` with `reason`, never removed (the module docstring
    has the whole rule)."""
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
    """Only for a condition whose subject no longer exists for the object (see the rule above)."""
    return [c for c in conditions or () if c.type != type_]


def is_true(conditions: Sequence[Condition] | None, type_: str) -> bool:
    condition = find_condition(conditions, type_)
    return condition is not None and condition.status == "True"


def keep_transition_times(old: Sequence[Condition] | None, new: Sequence[Condition]) -> list[Condition]:
    """`new`, where every condition whose status is the one it had in `old` keeps its old
    lastTransitionTime. A plan may pass a condition through other statuses on its way (a Model's
    Ready status, then Downloading on top of it); only the written status before and after counts."""
    before = {c.type: c for c in old or ()}
    kept: list[Condition] = []
    for condition in new:
        previous = before.get(condition.type)
        if (
            previous is not None
            and previous.status == condition.status
            and previous.last_transition_time != condition.last_transition_time
        ):
            condition = condition.model_copy(update={"last_transition_time": previous.last_transition_time})
        kept.append(condition)
    return kept
