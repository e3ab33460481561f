"""Leader election decisions as pure logic (client-go ``tools/leaderelection/leaderelection.go``).

Candidates trust only their own monotonic clock: a lease record counts as "held" until
``leaseDurationSeconds`` after *we first saw this exact record*, whatever timestamps it carries
(clocks of other machines are never compared with ours).  A holder that keeps renewing changes the
record, which is its heartbeat.  No fencing is possible: the package makes no stronger promise.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from llmkube.kube.clock import format_micro_time, parse_time
from llmkube.kube.types import Obj

__all__ = [
    "JITTER_FACTOR",
    "Action",
    "ElectionState",
    "LeaderElectionTiming",
    "LeaseRecord",
    "Step",
]

JITTER_FACTOR = 1.2


@dataclass(frozen=True)
class LeaderElectionTiming:
    """controller-runtime's defaults: 15 s lease, 10 s renew deadline, 2 s retry period."""

    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if min(self.lease_duration, self.renew_deadline, self.retry_period) < 1.0:
            raise ValueError("lease duration, renew deadline and retry period must all be at least 1s")
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("the lease duration must be greater than the renew deadline")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError(f"the renew deadline must be greater than retry period x {JITTER_FACTOR}")


@dataclass(frozen=True)
class LeaseRecord:
    holder: str
    lease_duration_seconds: int
    acquire_time: datetime | None
    renew_time: datetime | None
    transitions: int
    extra: tuple[tuple[str, Any], ...] = ()  # spec fields we do not interpret (preferredHolder, strategy)

    @classmethod
    def from_lease(cls, lease: Obj) -> LeaseRecord:
        spec = dict(lease.get("spec") or {})
        acquire, renew = spec.pop("acquireTime", None), spec.pop("renewTime", None)
        return cls(
            holder=str(spec.pop("holderIdentity", None) or ""),
            lease_duration_seconds=int(spec.pop("leaseDurationSeconds", None) or 0),
            acquire_time=parse_time(acquire) if acquire else None,
            renew_time=parse_time(renew) if renew else None,
            transitions=int(spec.pop("leaseTransitions", None) or 0),
            extra=tuple(sorted(spec.items())),
        )

    def to_spec(self) -> Obj:
        spec: Obj = dict(self.extra)
        spec.update(
            holderIdentity=self.holder,
            leaseDurationSeconds=self.lease_duration_seconds,
            leaseTransitions=self.transitions,
        )
        if self.acquire_time is not None:
            spec["acquireTime"] = format_micro_time(self.acquire_time)
        if self.renew_time is not None:
            spec["renewTime"] = format_micro_time(self.renew_time)
        return spec


class Action(enum.Enum):
    CREATE = "create"  # no Lease yet: create it with our record
    UPDATE = "update"  # write our record over the observed Lease (optimistic: its resourceVersion)
    WAIT = "wait"  # someone else holds a valid lease


@dataclass(frozen=True)
class Step:
    action: Action
    record: LeaseRecord | None = None
    slow_path: bool = False  # we were leader but had to re-read the lease before renewing


class ElectionState:
    def __init__(self, identity: str, timing: LeaderElectionTiming) -> None:
        if not identity:
            raise ValueError("a leader election identity must not be empty")
        self.identity = identity
        self.timing = timing
        self.observed: LeaseRecord | None = None
        self.observed_time: float | None = None

    # -- what we know ---------------------------------------------------------------------------

    def is_leader(self) -> bool:
        return self.observed is not None and self.observed.holder == self.identity

    def lease_valid(self, now: float) -> bool:
        if self.observed is None or self.observed_time is None:
            return False
        return self.observed_time + self.observed.lease_duration_seconds > now

    def observe(self, record: LeaseRecord | None, now: float) -> None:
        """Remember a record read from (or written to) the server; the clock restarts only when the
        record differs from the one we saw last."""
        if record != self.observed:
            self.observed = record
            self.observed_time = now

    # -- decisions ------------------------------------------------------------------------------

    def _ours(self, wall: datetime, acquire_time: datetime | None, transitions: int) -> LeaseRecord:
        return LeaseRecord(
            holder=self.identity,
            lease_duration_seconds=int(self.timing.lease_duration),
            acquire_time=acquire_time or wall,
            renew_time=wall,
            transitions=transitions,
            extra=self.observed.extra if self.observed is not None else (),
        )

    def fast_path(self, now: float, wall: datetime) -> LeaseRecord | None:
        """As a leader with a still-valid lease, renew optimistically without reading it first."""
        if not (self.is_leader() and self.lease_valid(now)):
            return None
        assert self.observed is not None
        return self._ours(wall, self.observed.acquire_time, self.observed.transitions)

    def decide(self, current: LeaseRecord | None, now: float, wall: datetime) -> Step:
        """The slow path: given the Lease as just read (None: it does not exist)."""
        if current is None:
            return Step(Action.CREATE, self._ours(wall, wall, 0))
        self.observe(current, now)
        if current.holder and self.lease_valid(now) and not self.is_leader():
            return Step(Action.WAIT)
        if self.is_leader():
            return Step(
                Action.UPDATE, self._ours(wall, current.acquire_time, current.transitions), slow_path=True
            )
        return Step(Action.UPDATE, self._ours(wall, wall, current.transitions + 1))

    def release(self, wall: datetime) -> LeaseRecord | None:
        """The record that hands the lease back (client-go ``ReleaseOnCancel``): no holder, a 1 s
        duration, so a waiting candidate takes over at its next retry.  None when not leader."""
        if not self.is_leader():
            return None
        assert self.observed is not None
        return replace(self.observed, holder="", lease_duration_seconds=1, acquire_time=wall, renew_time=wall)
