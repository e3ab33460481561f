"""The `Preempted` condition: a pod of the service was preempted by the scheduler, when, and by what.

kube-scheduler (v1.37, `framework/preemption/executor.go`) preempts a victim in three steps: it
adds the pod condition `DisruptionTarget` True, reason `PreemptionByScheduler`, message "<scheduler>:
preempting to accommodate a higher priority pod"; it deletes the pod; and it records an Event on the
victim, reason `Preempted`, action `Preempting`, note "Preempted by pod <uid> on node <node>". The
condition says that it happened and when (a tenant cannot write a pod's status); the Event says for
whom, while it exists. Its `related` field would name the preemptor, but v1.37 leaves it empty (the
scheduler hands the recorder its own wrapper of the pod, which has no API kind), so the preemptor's
UID in the note, in exactly the scheduler's format, is the only pointer to it (`preemptor_in_note`).

The condition is True from a preemption until every wanted replica is ready again, or the service
is stopped, then False `Recovered`, keeping the last preemption's account. "Ready again" is read
from the pods, not from the Deployment's count, which still counts the preempted pod for a moment.
A second preemption while it is True updates the message (time included), as conditions do.
"""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from llmkube.api.enums import Phase
from llmkube.api.meta import Condition
from llmkube.plan.conditions.standard import find_condition, set_condition

PREEMPTED = "Preempted"
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
RECOVERED = "Recovered"


@dataclass(frozen=True)
class Preemption:
    pod: str  # the preempted pod's name
    node: str  # where it ran
    at: datetime | None  # when the scheduler marked it (the DisruptionTarget condition's time)
    #: the preemptor, from the scheduler's Event: "<kind> <namespace>/<name>" ("" when not known)
    by: str = ""
    #: the preemptor's InferenceService ("<namespace>/<name>") and priority, when it is one of ours
    by_service: str = ""
    by_priority: int | None = None

    def describe(self) -> str:
        when = f" at {_format_time(self.at)}" if self.at is not None else ""
        where = f" on node {self.node}" if self.node else ""
        text = f"pod {self.pod} was preempted by the scheduler{when}{where}"
        if not self.by:
            return f"{text}, for a pod of higher priority"
        details = [f"InferenceService {self.by_service}"] if self.by_service else []
        if self.by_priority is not None:
            details.append(f"priority {self.by_priority}")
        return f"{text}, for {self.by}" + (f" ({', '.join(details)})" if details else "")


def _format_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def preemption_mark(pod: Mapping[str, Any]) -> tuple[bool, datetime | None]:
    """(whether the scheduler marked the pod for preemption, when: None when the mark has no time)."""
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if (
            condition.get("type") == DISRUPTION_TARGET
            and condition.get("status") == "True"
            and condition.get("reason") == PREEMPTION_BY_SCHEDULER
        ):
            return True, _parse_time(condition.get("lastTransitionTime"))
    return False, None


# The scheduler's note: "Preempted by %s %v on node %v" with the preemptor's type ("pod",
# "podgroup", "compositepodgroup") and UID, and " (in kube-scheduler memory)." for a pod that was
# still waiting in the scheduler.
_NOTE = re.compile(
    r"Preempted by (pod|podgroup|compositepodgroup) "
    r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}) on node \S+"
    r"( \(in kube-scheduler memory\)\.)?"
)


def preemptor_in_note(note: object) -> tuple[str, str] | None:
    """(the preemptor's type, its UID) from a `Preempted` Event's note in the scheduler's format."""
    match = _NOTE.fullmatch(note) if isinstance(note, str) else None
    return (match.group(1), match.group(2)) if match else None


def serving_again(pods: Sequence[Mapping[str, Any]], desired: int) -> bool:
    """As many pods ready as wanted, none of them being deleted or marked for preemption."""
    ready = 0
    for pod in pods:
        if (pod.get("metadata") or {}).get("deletionTimestamp") or preemption_mark(pod)[0]:
            continue
        conditions = (pod.get("status") or {}).get("conditions") or ()
        ready += any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    return ready >= desired


def _parse_time(text: object) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def preempted_conditions(
    conditions: Sequence[Condition],
    preemption: Preemption | None,
    *,
    phase: Phase,
    recovered: bool,
    generation: int | None,
    now: datetime,
) -> list[Condition]:
    """`conditions` with Preempted set from a preemption not yet reported (`preemption`), or turned
    False once the service has `recovered` (in `phase` Ready or Stopped)."""
    existing = find_condition(conditions, PREEMPTED)
    if preemption is not None:
        updated = set_condition(
            conditions,
            type_=PREEMPTED,
            status="True",
            reason=PREEMPTION_BY_SCHEDULER,
            message=preemption.describe(),
            now=now,
            observed_generation=generation,
        )
        if (existing is None or existing.status != "True") and preemption.at is not None:
            # It turned True when the scheduler marked the pod, not when we heard of it.
            updated = [
                c.model_copy(update={"last_transition_time": preemption.at}) if c.type == PREEMPTED else c
                for c in updated
            ]
        return updated
    if existing is None or existing.status != "True" or phase not in ("Ready", "Stopped") or not recovered:
        return list(conditions)
    return set_condition(
        conditions,
        type_=PREEMPTED,
        status="False",
        reason=RECOVERED,
        message=f"The service is {phase} again; the last preemption: {existing.message}",
        now=now,
        observed_generation=generation,
    )
