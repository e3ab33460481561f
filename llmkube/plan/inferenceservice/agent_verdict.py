"""The controller's verdict on a metal service's spec, as the host agents read it.

A host agent runs what it serves outside the kubelet, so it must run only what the controller
accepted: the same rules (the admin's policy, the API types, what a priority may be), judged once,
by the controller, and read by every agent from the one place a tenant cannot write: the status.

The verdict is the condition `Accepted` of a metal InferenceService:

    True,  observedGeneration = metadata.generation   this spec may be served (with the status's
                                                      effectivePriority: the value of a class it
                                                      may use)
    False, observedGeneration = metadata.generation   this spec is refused (the reason and message
                                                      say why); what already runs keeps running
    missing, or of an older generation                not judged yet

Only metal services carry it (a pod's spec goes through the API server's admission, and the
controller creates nothing for a refused one, so it needs no verdict of its own).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from llmkube.api.inferenceservice import InferenceService
from llmkube.api.meta import Condition
from llmkube.plan.conditions.standard import find_condition, set_condition

ACCEPTED = "Accepted"
ACCEPTED_REASON = "Accepted"
ACCEPTED_MESSAGE = "a host agent may serve this spec"


def accepted_conditions(
    conditions: Sequence[Condition], *, generation: int | None, now: datetime
) -> list[Condition]:
    return set_condition(
        conditions,
        type_=ACCEPTED,
        status="True",
        reason=ACCEPTED_REASON,
        message=ACCEPTED_MESSAGE,
        now=now,
        observed_generation=generation,
    )


def refused_conditions(
    conditions: Sequence[Condition], *, reason: str, message: str, generation: int | None, now: datetime
) -> list[Condition]:
    return set_condition(
        conditions,
        type_=ACCEPTED,
        status="False",
        reason=reason,
        message=message,
        now=now,
        observed_generation=generation,
    )


@dataclass(frozen=True)
class Verdict:
    #: True: accepted; False: refused; None: not judged (yet) for this generation
    accepted: bool | None
    #: the effective priority the controller resolved for an accepted spec (0 otherwise)
    priority: int = 0
    reason: str = ""
    message: str = ""


def verdict_of(isvc: InferenceService) -> Verdict:
    """What the controller said about the service's current spec."""
    status = isvc.status
    condition = find_condition(status.conditions if status else None, ACCEPTED)
    if condition is None or condition.observed_generation != isvc.metadata.generation:
        return Verdict(None)
    if condition.status != "True":
        return Verdict(False, reason=condition.reason or "", message=condition.message or "")
    priority = status.effective_priority if status is not None else None
    return Verdict(True, priority=priority or 0)
