"""Which services a host agent may load into its memory budget, and whom it evicts to make room.

Every service the agent runs holds its estimated memory (memory_fit's estimate of the model it
loaded) against the budget. A service that would not fit is started only if stopping services of
strictly lower priority frees enough, and never by stopping a service with
`evictionProtection: true`; otherwise it is not started and says why. Under memory pressure the
agent evicts one service at a time, the same way round.

The eviction order is the reference's: lowest priority first, then the largest (frees the most),
then the one started first (the newest gets the benefit of the doubt). Priority is the service's
effective priority value (its PriorityClass's, as the controller reports it in status), so a custom
class ranks where its value puts it.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from llmkube.plan.agent.memory import (
    Pressure,
    PressureSettings,
    describe_bytes,
    evicts_under_pressure,
    pressure,
)


@dataclass(frozen=True)
class Resident:
    """A service holding memory on this host (its process runs, or is starting)."""

    key: str  # namespace/name
    bytes: int  # its estimated need
    priority: int
    protected: bool
    started: float  # when its process started (agent's monotonic clock)


@dataclass(frozen=True)
class Demand:
    key: str
    bytes: int
    priority: int


@dataclass(frozen=True)
class Admission:
    admitted: bool
    evict: tuple[Resident, ...] = ()
    #: why it is refused (admitted is False)
    reason: str = ""


def eviction_order(residents: Sequence[Resident]) -> list[Resident]:
    """Evictable residents, the first to go first (protected ones are never listed)."""
    return sorted(
        (r for r in residents if not r.protected),
        key=lambda r: (r.priority, -r.bytes, r.started, r.key),
    )


def admit(demand: Demand, residents: Sequence[Resident], budget: int) -> Admission:
    """Whether `demand` may start, and which residents must stop first (none when it fits)."""
    others = [r for r in residents if r.key != demand.key]
    used = sum(r.bytes for r in others)
    if demand.bytes > budget:
        return Admission(
            False,
            reason=f"it needs ~{describe_bytes(demand.bytes)}, more than the agent's whole memory budget "
            f"({describe_bytes(budget)})",
        )
    if used + demand.bytes <= budget:
        return Admission(True)
    victims: list[Resident] = []
    freed = 0
    for resident in eviction_order(others):
        if resident.priority >= demand.priority:
            break  # the order is by priority: nobody after this one ranks lower either
        victims.append(resident)
        freed += resident.bytes
        if used - freed + demand.bytes <= budget:
            return Admission(True, evict=tuple(victims))
    holders = ", ".join(
        f"{r.key} ({describe_bytes(r.bytes)}{', protected' if r.protected else ''})"
        for r in sorted(others, key=lambda r: (-r.priority, r.key))
    )
    return Admission(
        False,
        reason=f"it needs ~{describe_bytes(demand.bytes)} and {describe_bytes(budget - used)} of the agent's "
        f"{describe_bytes(budget)} budget is free; services of its priority or higher, or protected "
        f"from eviction, hold the rest: {holders}",
    )


def waiting_order(demands: Sequence[tuple[Demand, str]]) -> list[Demand]:
    """Services waiting for room, the first to be admitted first: highest priority, then the one
    created first (the second element is its creation timestamp, RFC 3339, which sorts as text)."""
    return [d for d, _ in sorted(demands, key=lambda item: (-item[0].priority, item[1], item[0].key))]


def pressure_victim(residents: Sequence[Resident]) -> Resident | None:
    """Under memory pressure: the first to evict, or None. The last service running is never
    evicted (stopping it helps no one: the pressure is not of its making alone), as the reference."""
    if len(residents) <= 1:
        return None
    order = eviction_order(residents)
    return order[0] if order else None


def eviction_message(agent: str, for_whom: str, priority: int, need: int) -> str:
    """What a service evicted to make room for `for_whom` is told."""
    return (
        f"evicted by the host agent {agent} to make room for {for_whom} (priority {priority}, needs "
        f"~{describe_bytes(need)})"
    )


@dataclass(frozen=True)
class PressureCheck:
    """The host's memory now: its level, and the service to evict for it (None: nobody)."""

    level: Pressure
    victim: Resident | None = None
    message: str = ""  # what the victim is told


def check_pressure(
    available: int,
    total: int,
    settings: PressureSettings,
    *,
    servers_rss: int,
    residents: Sequence[Resident],
    agent: str,
) -> PressureCheck:
    """Under critical pressure that the servers are the cause of (`servers_rss`, measured), one
    service at a time is evicted, the same way round as for a higher priority (`residents`: the
    services' serving servers)."""
    level = pressure(available, total, settings)
    if not evicts_under_pressure(level, servers_rss, total, settings):
        return PressureCheck(level)
    victim = pressure_victim(residents)
    if victim is None:
        return PressureCheck(level)
    message = (
        f"evicted by the host agent {agent} under memory pressure "
        f"({describe_bytes(available)} of the host's {describe_bytes(total)} available)"
    )
    return PressureCheck(level, victim, message)
