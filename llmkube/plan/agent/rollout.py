"""A spec change on a served service, rolled in place: the new server starts beside the old one,
the endpoint moves to it once it answers, and the old one stops once it has drained.

    old serving ── new started ── new serving: slice points at the new port ── old drained: stopped

Two copies of the model live side by side for a moment, so the new one must fit beside the old
(both count against the budget). When it does not, the change is a recreate: the old server
stops first (the endpoint is withdrawn), then the new one starts as any service starts (and may
evict services of lower priority). When even that cannot fit, the old server keeps serving the
previous spec and the agent says why.

Draining: kube-proxy needs a moment to follow the slice (`propagation`); after that, the old
server stops as soon as it has no request in flight (llama-server's own
`llamacpp:requests_processing`), and at the latest after `drain_timeout`.
"""

import enum
from collections.abc import Sequence
from dataclasses import dataclass, replace

from llmkube.plan.agent.admission import Admission, Demand, Resident, admit


class Strategy(enum.Enum):
    IN_PLACE = "in-place"
    RECREATE = "recreate"
    REFUSED = "refused"


@dataclass(frozen=True)
class RollPlan:
    strategy: Strategy
    admission: Admission


def roll_plan(new: Demand, old: Resident, residents: Sequence[Resident], budget: int) -> RollPlan:
    """How to replace `old` (which is among `residents`) by a server needing `new.bytes`."""
    others = [r for r in residents if r.key != old.key]
    # Beside the old server: the new one is a second holder of the service's key.
    beside = admit(replace(new, key=f"{new.key} (new)"), [*others, old], budget)
    if beside.admitted and not beside.evict:
        return RollPlan(Strategy.IN_PLACE, beside)
    instead = admit(new, others, budget)
    return RollPlan(Strategy.RECREATE if instead.admitted else Strategy.REFUSED, instead)


@dataclass(frozen=True)
class DrainSettings:
    propagation: float = 2.0
    drain_timeout: float = 30.0


def drained(switched_at: float, now: float, in_flight: int | None, settings: DrainSettings) -> bool:
    """May the old server stop? `in_flight` is None when it could not be asked."""
    waited = now - switched_at
    if waited < settings.propagation:
        return False
    return waited >= settings.drain_timeout or in_flight == 0


def drain_wakeup(switched_at: float, now: float, settings: DrainSettings, poll: float = 0.5) -> float:
    """When to look again (the agent's monotonic clock)."""
    if now < switched_at + settings.propagation:
        return switched_at + settings.propagation
    return min(now + poll, switched_at + settings.drain_timeout)
