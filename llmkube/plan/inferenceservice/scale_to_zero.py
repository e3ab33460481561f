"""Scale to zero: an InferenceService marked `inference.llmkube.dev/scale-to-zero-after: 15m` sleeps
after that long without a request, and a ModelRouter in front of it wakes it on the next one.

The InferenceService's schema is fixed, so the setting is an annotation (docs/scale-to-zero.md); it
lives on the service, not on a ModelRouter backend, because the controller decides the sleep and
a service behind two routers has one idle clock.

What the controller reads, all from the API:

* the last request any router saw, `inference.llmkube.dev/last-request` (RFC 3339), which the
  routers write at most once a minute each (plan/router/wake.py), never per request;
* its own `ScaledToZero` condition: True while asleep (its transition time is when it slept),
  False while awake (its transition time is when it woke, or when scale to zero was turned on:
  the idle clock never starts before that);
* the Deployment: while asleep it carries `inference.llmkube.dev/scaled-to-zero` and 0 replicas,
  in one write, so a Deployment with the mark and replicas is one a router scaled (its wake), and
  a cache that has not seen the sleep yet (no mark) is never taken for a wake.

A sleeping service is `Stopped` with the reason `ScaledToZero` (a user's `replicas: 0` is `Stopped`
with the reason `Stopped`), its HPA absent (an HPA cannot fight a router it does not see: 0 -> 1 is
the router's, 1 -> N and back the HPA's, N -> 0 idleness's).
"""

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from llmkube.api import constants as c
from llmkube.api.meta import Condition
from llmkube.plan.durations import format_duration, parse_duration
from llmkube.plan.events import PlannedEvent

SCALE_TO_ZERO_ANNOTATION = c.ANNOTATION_SCALE_TO_ZERO_AFTER
LAST_REQUEST_ANNOTATION = c.ANNOTATION_LAST_REQUEST
SLEEPING_ANNOTATION = c.ANNOTATION_SCALED_TO_ZERO
CONDITION = c.CONDITION_SCALED_TO_ZERO
#: the reason of a sleeping service's `Stopped` phase (REASON column) and its Event
SCALED_TO_ZERO = c.CONDITION_SCALED_TO_ZERO
IDLE, WAKING, AWAKE = "Idle", "Waking", "Awake"  # plan/router/wake.py reads Waking too
WOKE = "Woke"
#: shortest idle period accepted: the routers share their clock at most once a minute each
#: (--activity-interval), so a shorter one would sleep a service that has traffic
MIN_IDLE_SECONDS = 1.0

Status = Literal["True", "False"]


@dataclass(frozen=True)
class Setting:
    #: seconds without a request before it sleeps (None: never)
    after: float | None
    #: why the annotation is ignored (None: it is fine, or absent)
    problem: str | None = None


def idle_setting(annotations: dict[str, str] | None) -> Setting:
    text = (annotations or {}).get(SCALE_TO_ZERO_ANNOTATION)
    if text is None:
        return Setting(None)
    try:
        after = parse_duration(text.strip())
    except ValueError as error:
        return Setting(None, f"{error}: scale to zero is off")
    if after < MIN_IDLE_SECONDS:
        return Setting(None, f'"{text}" is shorter than 1s: scale to zero is off')
    return Setting(after)


def last_request(annotations: dict[str, str] | None) -> datetime | None:
    """The routers' last request (a value that is not an RFC 3339 time with a zone: none)."""
    text = (annotations or {}).get(LAST_REQUEST_ANNOTATION)
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


@dataclass(frozen=True)
class Sleep:
    """What scale to zero decides for a service now."""

    asleep: bool
    #: the ScaledToZero condition to set: (status, reason, message); None: take it away
    condition: tuple[Status, str, str] | None
    #: when it slept (the Deployment's mark), while asleep
    slept_at: datetime | None = None
    event: PlannedEvent | None = None
    #: seconds until it may fall asleep (None: no deadline)
    requeue_after: float | None = None
    #: the `Stopped` message while asleep
    message: str = ""


OFF = Sleep(False, None)


def stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def decide(
    after: float | None,
    condition: Condition | None,
    *,
    request: datetime | None,
    marked: bool,
    deployment_replicas: int,
    ready: int,
    now: datetime,
) -> Sleep:
    """`after` the idle period (None: off), `condition` the stored ScaledToZero, `request` the
    routers' last request, `marked` whether the live Deployment has the sleeping mark,
    `deployment_replicas` its spec.replicas, `ready` its ready replicas."""
    if after is None:
        return OFF
    period = format_duration(after)
    transition = condition.last_transition_time if condition is not None else None
    if condition is not None and condition.status == "True" and transition is not None:
        woken_by_scale = marked and deployment_replicas > 0
        woken_by_request = request is not None and request > transition
        if not (woken_by_scale or woken_by_request):
            message = condition.message or f"Scaled to zero: no request for {period}"
            return Sleep(True, ("True", IDLE, message), slept_at=transition, message=message)
        by = (
            "a router scaled it to one replica" if woken_by_scale else f"a request at {stamp(request or now)}"
        )
        text = f"Waking: {by} after {_asleep_for(transition, now)} asleep; waiting for a ready replica"
        return Sleep(
            False,
            ("False", WAKING, text),
            event=PlannedEvent("Normal", WAKING, text, CONDITION),
            requeue_after=after,
        )
    if condition is None or transition is None:
        # Turned on now: the idle clock starts here, whatever happened before.
        text = f"Awake: scales to zero after {period} without a request"
        return Sleep(False, ("False", AWAKE, text), requeue_after=after)
    since = max(transition, request) if request is not None else transition
    idle = (now - since).total_seconds()
    if idle >= after:
        text = f"Scaled to zero: no request for {period} (the last at {stamp(since)})"
        return Sleep(
            True,
            ("True", IDLE, text),
            slept_at=now,
            event=PlannedEvent("Normal", SCALED_TO_ZERO, text, CONDITION),
            message=text,
        )
    if condition.reason == WAKING and ready > 0:
        took = (now - transition).total_seconds()
        text = f"Awake: woke at {stamp(transition)}, ready {took:.1f}s after the wake"
        return Sleep(
            False,
            ("False", AWAKE, text),
            event=PlannedEvent("Normal", WOKE, text, CONDITION),
            requeue_after=after - idle,
        )
    return Sleep(
        False,
        ("False", condition.reason or AWAKE, condition.message or ""),
        requeue_after=after - idle,
    )


def _asleep_for(since: datetime, now: datetime) -> str:
    return format_duration(max(0.0, (now - since).total_seconds()))
