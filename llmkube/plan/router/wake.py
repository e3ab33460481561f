"""Scale to zero, the router's half: the wake queue of a sleeping InferenceService and the idle
clock the routers share through the API. State machines with explicit time; no I/O.

* `WakeQueue`: a request for a backend that sleeps (its InferenceService's ScaledToZero condition
  is True, plan/inferenceservice/scale_to_zero.py) is held, not refused. The first one held makes
  the wake (one scale write: `Join.WAKE`), the others wait behind it (`Join.WAIT`), up to `bound`
  held at once per service; one more is refused (`Join.FULL`, 503 with Retry-After). A held
  request that is answered, times out or whose client leaves `leave`s; once none is held the
  service's wake is forgotten, so a wake that failed is tried again by the next request.
* `ActivityClock`: when each backend last had a request, as the routers tell each other through
  the InferenceService's `inference.llmkube.dev/last-request` annotation: a router writes it when
  it has seen a request since the time written there and `interval` has passed since then (at
  most one write per service per interval, whatever the traffic, and none while there is none),
  and reads what the other routers wrote (their write counts as its own). A request in flight
  (a stream that lasts an hour) is activity for as long as it lasts.
"""

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from llmkube.api import constants as c

#: requests held per sleeping service, at most (the router's --wake-queue)
DEFAULT_WAKE_QUEUE = 100
#: the longest a held request waits for its service to wake (the router's --wake-timeout)
DEFAULT_WAKE_TIMEOUT = 300.0
#: seconds between two writes of a service's last request by one router (--activity-interval)
DEFAULT_ACTIVITY_INTERVAL = 60.0


#: the reason of a ScaledToZero condition while the service wakes (plan/inferenceservice/scale_to_zero.py)
WAKING_REASON = "Waking"


class Join(enum.Enum):
    WAKE = "wake"
    WAIT = "wait"
    FULL = "full"


@dataclass
class _Held:
    count: int = 0
    #: when the wake was asked for (the first request held)
    since: float = 0.0


@dataclass
class WakeQueue:
    bound: int = DEFAULT_WAKE_QUEUE
    _held: dict[str, _Held] = field(default_factory=dict)

    def room(self, service: str) -> bool:
        held = self._held.get(service)
        return held is None or held.count < self.bound

    def join(self, service: str, now: float) -> Join:
        held = self._held.get(service)
        if held is None:
            self._held[service] = _Held(1, now)
            return Join.WAKE
        if held.count >= self.bound:
            return Join.FULL
        held.count += 1
        return Join.WAIT

    def leave(self, service: str) -> None:
        held = self._held.get(service)
        if held is None:
            return
        held.count -= 1
        if held.count <= 0:
            del self._held[service]

    def held(self, service: str) -> int:
        held = self._held.get(service)
        return held.count if held is not None else 0

    def waking_for(self, service: str, now: float) -> float | None:
        held = self._held.get(service)
        return now - held.since if held is not None else None


@dataclass
class _Activity:
    #: wall-clock seconds of the last request seen here (-inf: none)
    seen: float = float("-inf")
    #: the last request time the API holds (written here or by another router; -inf: none)
    shared: float = float("-inf")
    #: when this router last wrote it
    written: float = float("-inf")
    in_flight: int = 0


@dataclass
class ActivityClock:
    interval: float = DEFAULT_ACTIVITY_INTERVAL
    _services: dict[str, _Activity] = field(default_factory=dict)

    def _of(self, service: str) -> _Activity:
        activity = self._services.get(service)
        if activity is None:
            activity = self._services[service] = _Activity()
        return activity

    def began(self, service: str, now: float) -> None:
        activity = self._of(service)
        activity.in_flight += 1
        activity.seen = max(activity.seen, now)

    def ended(self, service: str, now: float) -> None:
        activity = self._of(service)
        activity.in_flight = max(0, activity.in_flight - 1)
        activity.seen = max(activity.seen, now)

    def shared(self, service: str, at: float) -> None:
        """The last request time the API holds now (read from the InferenceService)."""
        activity = self._of(service)
        if at > activity.shared:
            activity.shared = at

    def forget(self, service: str) -> None:
        self._services.pop(service, None)

    def due(self, now: float) -> list[tuple[str, float]]:
        """The services whose last request this router should write now, with the time to write:
        it saw one later than the API holds, and `interval` has passed since the time there (or
        since its own last write)."""
        found = []
        for service, activity in sorted(self._services.items()):
            last = now if activity.in_flight else activity.seen
            if last <= activity.shared:
                continue
            quiet_since = max(activity.shared, activity.written)
            if now - quiet_since >= self.interval:
                found.append((service, last))
        return found

    def written(self, service: str, at: float, now: float) -> None:
        activity = self._of(service)
        activity.written = now
        activity.shared = max(activity.shared, at)

    def next_due(self, now: float) -> float | None:
        """Seconds until `due` may name a service (None: nothing to tell)."""
        waits = []
        for activity in self._services.values():
            last = now if activity.in_flight else activity.seen
            if last > activity.shared:
                waits.append(max(0.0, max(activity.shared, activity.written) + self.interval - now))
        return min(waits) if waits else None


@dataclass(frozen=True)
class Sleeper:
    """What an InferenceService backend says of scale to zero, as the router caches it."""

    #: it has the scale-to-zero annotation (its requests count on the shared idle clock)
    marked: bool
    #: it sleeps, or wakes: its ScaledToZero condition is True, or False with the reason Waking
    asleep: bool
    #: the routers' last request, in seconds since the epoch (None: none written)
    last_request: float | None = None


def sleeper_of(obj: Mapping[str, Any]) -> Sleeper:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    conditions = (obj.get("status") or {}).get("conditions") or ()
    # Waking counts: a request that comes before the pod is ready waits as long as the first.
    asleep = any(
        isinstance(cond, dict)
        and cond.get("type") == c.CONDITION_SCALED_TO_ZERO
        and (cond.get("status") == "True" or cond.get("reason") == WAKING_REASON)
        for cond in conditions
    )
    return Sleeper(
        c.ANNOTATION_SCALE_TO_ZERO_AFTER in annotations,
        asleep,
        _epoch(annotations.get(c.ANNOTATION_LAST_REQUEST)),
    )


def _epoch(text: Any) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.timestamp() if parsed.tzinfo is not None else None
