"""Events the controller should emit for a plan: the reference operator's warnings
(`MissingMemoryRequest`, `MissingSkipModelInit`) and ours for input it would have crashed or spun on.

Every warning is also kept in a condition (`Degraded` for an invalid spec, `SpecValid` for a setting
without effect or a piece of advice), and its Event is announced only when that condition changes
(`announced`): once per problem and generation, not once per reconcile, so a restarted controller,
which finds the conditions already stored, announces nothing again. The reference re-emitted them
on every reconcile.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from llmkube.api.meta import Condition

EventType = Literal["Normal", "Warning"]
INVALID_SPEC = "InvalidSpec"
IGNORED_SETTING = "IgnoredSetting"


SPEC_VALID = "SpecValid"


@dataclass(frozen=True)
class PlannedEvent:
    type: EventType
    reason: str
    message: str
    #: the condition that carries the same news: the Event is announced when it changes
    condition: str | None = None


def announced(
    events: Iterable[PlannedEvent], previous: Sequence[Condition] | None, current: Sequence[Condition] | None
) -> tuple[PlannedEvent, ...]:
    """The events worth announcing: those whose condition this status changes (status, reason,
    message or observed generation), and those no condition carries."""
    before = {c.type: _news(c) for c in previous or ()}
    after = {c.type: _news(c) for c in current or ()}
    return tuple(
        event
        for event in events
        if event.condition is None or before.get(event.condition) != after.get(event.condition)
    )


def _news(condition: Condition) -> tuple[object, ...]:
    return (condition.status, condition.reason, condition.message, condition.observed_generation)
