"""The summary conditions that tools read without knowing llmkube: `Ready`, and kstatus's
`Reconciling` and `Stalled` (both kinds, InferenceService and Model).

* `Ready` (normal-true) is True only when the object is what its current spec asks: an
  InferenceService serves with every replica on the current Deployment template (or is scaled to
  zero, as asked), a Model is usable. `kubectl wait --for=condition=Ready`, Argo CD's and Flux's
  health checks read it; its `observedGeneration` says which spec it judged.
* `Reconciling` and `Stalled` are the "abnormal-true" conditions kstatus (sigs.k8s.io/cli-utils and
  Flux's fork of it, behind Flux's health checks) reads first: Reconciling=True is InProgress,
  Stalled=True is Failed. Flux's fork then reads Ready (True: Current, False: InProgress).
  Reconciling is written with Ready; Stalled only once something failed, then settled to False
  with reason Recovered when the failure is gone (the rule of plan/conditions/standard.py).

The kind-specific part is only the `Summary` (is it ready, why not); this module turns it into
the three conditions the same way for both kinds.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from llmkube.api.meta import Condition
from llmkube.plan.conditions.standard import set_condition, update_condition_if_present

READY, RECONCILING, STALLED = "Ready", "Reconciling", "Stalled"
READY_REASON = "Ready"
RECOVERED_REASON = "Recovered"


@dataclass(frozen=True)
class Summary:
    """Where the object stands against its current spec: ready, or why not (reason, message)."""

    ready: bool
    reason: str
    message: str
    #: failed: nothing changes until the spec or the cluster does (kstatus: Failed)
    stalled: bool = False


def summarize(
    conditions: Sequence[Condition] | None,
    summary: Summary,
    *,
    generation: int | None,
    now: datetime,
) -> list[Condition]:
    """`conditions` with Ready, Reconciling and Stalled set from `summary`."""
    ready = set_condition(
        conditions,
        type_=READY,
        status="True" if summary.ready else "False",
        reason=summary.reason,
        message=summary.message,
        now=now,
        observed_generation=generation,
    )
    working = not (summary.ready or summary.stalled)
    result = set_condition(
        ready,
        type_=RECONCILING,
        status="True" if working else "False",
        reason=summary.reason,
        message=summary.message,
        now=now,
        observed_generation=generation,
    )
    if summary.stalled:
        return set_condition(
            result,
            type_=STALLED,
            status="True",
            reason=summary.reason,
            message=summary.message,
            now=now,
            observed_generation=generation,
        )
    return update_condition_if_present(
        result,
        type_=STALLED,
        status="False",
        reason=RECOVERED_REASON,
        message=f"No longer failing: {summary.message}" if summary.message else "No longer failing",
        now=now,
        observed_generation=generation,
    )


def message_of(conditions: Sequence[Condition] | None, *types: str) -> str:
    """The message of the first of `types` that has one (the detail a summary repeats)."""
    by_type = {condition.type: condition for condition in conditions or ()}
    for type_ in types:
        condition = by_type.get(type_)
        if condition is not None and condition.message:
            return condition.message
    return ""


def reason_of(conditions: Sequence[Condition] | None, type_: str, default: str) -> str:
    for condition in conditions or ():
        if condition.type == type_:
            return condition.reason
    return default
