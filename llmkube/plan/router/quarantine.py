"""Passive health: an endpoint (a pod of a backend, or an external backend) that failed is skipped
for the quarantine duration, then one request probes it (half-open): success makes it healthy,
failure quarantines it again. Connect errors, 5xx answers and header timeouts count as failures;
a client that goes away says nothing about the endpoint (`abandoned`). Active probes report to the
same machine (a passing probe ends a quarantine early).

A state machine with explicit time: every call says `now` (monotonic seconds)."""

import enum
from dataclasses import dataclass


class State(enum.Enum):
    HEALTHY = "healthy"
    QUARANTINED = "quarantined"
    #: the half-open probe is in flight: nobody else is let through until it reports
    PROBING = "probing"


@dataclass
class _Entry:
    state: State = State.HEALTHY
    #: QUARANTINED: when the half-open probe may go; PROBING: when a probe that never reported is
    #: given up on (another one may go)
    until: float = 0.0
    failures: int = 0


class Quarantine:
    def __init__(self, duration: float, *, probe_grace: float = 30.0) -> None:
        self.duration = duration
        #: how long a half-open probe may stay silent before another is let through
        self.probe_grace = probe_grace
        self._entries: dict[str, _Entry] = {}

    def state(self, key: str, now: float) -> State:
        entry = self._entries.get(key)
        if entry is None:
            return State.HEALTHY
        if entry.state is State.PROBING and now >= entry.until:
            return State.QUARANTINED  # the probe went silent: due again
        return entry.state

    def usable(self, key: str, now: float) -> bool:
        """Would a request be let through now (without taking the half-open probe)?"""
        entry = self._entries.get(key)
        if entry is None or entry.state is State.HEALTHY:
            return True
        return now >= entry.until

    def acquire(self, key: str, now: float) -> bool:
        """Let a request through: always when healthy; when due, as the one half-open probe."""
        entry = self._entries.get(key)
        if entry is None or entry.state is State.HEALTHY:
            return True
        if now < entry.until:
            return False
        entry.state, entry.until = State.PROBING, now + self.probe_grace
        return True

    def succeeded(self, key: str, now: float) -> None:
        self._entries.pop(key, None)

    def failed(self, key: str, now: float) -> None:
        entry = self._entries.setdefault(key, _Entry())
        entry.state, entry.until = State.QUARANTINED, now + self.duration
        entry.failures += 1

    def abandoned(self, key: str, now: float) -> None:
        """The request gave no verdict (the client left, a shadow was dropped): a probe is due again."""
        entry = self._entries.get(key)
        if entry is not None and entry.state is State.PROBING:
            entry.state, entry.until = State.QUARANTINED, now

    def forget(self, key: str) -> None:
        """The endpoint is gone (its pod was deleted)."""
        self._entries.pop(key, None)

    def quarantined(self, now: float) -> list[str]:
        return sorted(key for key in self._entries if self.state(key, now) is not State.HEALTHY)
