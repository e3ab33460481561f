"""Events a Model emits, from the change between the status it had and the one just written (pure).

One Event per transition, so a person sees the Model's history in `kubectl describe` /
`llmkube status`: a copy started, the Model became Ready (with its size), a fetch or integrity
check failed, a source went missing, the upstream file changed.
"""

from collections.abc import Sequence
from typing import Literal

from llmkube.api.meta import Condition
from llmkube.api.model import ModelStatus
from llmkube.plan.conditions.standard import find_condition
from llmkube.plan.events import PlannedEvent
from llmkube.plan.model.conditions import (
    AVAILABLE,
    DEGRADED,
    PREFETCH_POD_NOT_CREATED,
    PROGRESSING,
    SOURCE_DRIFTED,
)

READY_EVENT = "Ready"
#: Progress that is stuck on something a person must change (a quota, a LimitRange, a Pod
#: Security level): a Warning, not a Normal Event.
_WARNING_PROGRESS = frozenset({PREFETCH_POD_NOT_CREATED})


def _became_true(
    old: Sequence[Condition] | None, new: Sequence[Condition] | None, type_: str
) -> Condition | None:
    """The condition `type_` in `new` if it is True there and was not True with the same reason before."""
    now = find_condition(new, type_)
    if now is None or now.status != "True":
        return None
    before = find_condition(old, type_)
    if before is not None and before.status == "True" and before.reason == now.reason:
        return None
    return now


def model_events(old: ModelStatus | None, new: ModelStatus) -> list[PlannedEvent]:
    old_conditions = old.conditions if old is not None else None
    events: list[PlannedEvent] = []
    started = _became_true(old_conditions, new.conditions, PROGRESSING)
    if started is not None:
        kind: Literal["Normal", "Warning"] = "Warning" if started.reason in _WARNING_PROGRESS else "Normal"
        events.append(PlannedEvent(kind, started.reason, started.message))
    failed = _became_true(old_conditions, new.conditions, DEGRADED)
    if failed is not None:
        events.append(PlannedEvent("Warning", failed.reason, failed.message))
    drifted = _became_true(old_conditions, new.conditions, SOURCE_DRIFTED)
    if drifted is not None:
        events.append(PlannedEvent("Warning", drifted.reason, drifted.message))
    old_phase = old.phase if old is not None else None
    if new.phase == "Ready" and old_phase != "Ready":
        available = find_condition(new.conditions, AVAILABLE)
        message = available.message if available is not None else "Model is Ready"
        size = new.size if new.size not in (None, "", "0") else None
        events.append(PlannedEvent("Normal", READY_EVENT, f"{message} ({size})" if size else message))
    events.extend(cache_clear_events(old, new))
    return events


# A cache clear's answers (status.cacheClear): one Event when the phase of a request changes.
_CLEAR_EVENTS: dict[str, tuple[Literal["Normal", "Warning"], str]] = {
    "Clearing": ("Normal", "CacheClearing"),
    "Cleared": ("Normal", "CacheCleared"),
    "Refilled": ("Normal", "CacheRefilled"),
    "Refused": ("Warning", "CacheClearRefused"),
    "Failed": ("Warning", "CacheClearFailed"),
}


def cache_clear_events(old: ModelStatus | None, new: ModelStatus) -> list[PlannedEvent]:
    before = old.cache_clear if old is not None else None
    now = new.cache_clear
    if now is None or now.phase is None:
        return []
    if before is not None and (before.request, before.phase, before.job) == (now.request, now.phase, now.job):
        return []
    kind, reason = _CLEAR_EVENTS[now.phase]
    return [PlannedEvent(kind, reason, now.message or now.phase)]
