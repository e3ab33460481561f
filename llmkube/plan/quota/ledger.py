"""What the leader has decided about each service under the GPU quotas: the replicas it admitted,
what one costs, and which quota it waits on, in queue order.

The Deployment or HPA that carries an admission reaches the informer cache only after its write: the
ledger is what makes the next decision, taken a moment later by another worker, count it (no pod
beyond a quota when many services are created at once). It lives in the leader's memory only: a new
leader starts empty and counts what its cache shows (each service's Deployment replicas or HPA
maxReplicas), which includes every write of the previous leader (it stopped writing before the lease
passed on).

`record` and `forget` say which quotas' waiters to wake: a release (fewer replicas held, a service
gone) may let them in, and a waiter leaving the head of a quota's line lets the next one try.
"""

from collections.abc import Iterator
from dataclasses import dataclass

from llmkube.plan.quota.decision import ReplicaCost

Identity = tuple[str, str]  # (namespace, name)
#: a service's rank in the GPU queue (plan/inferenceservice/queue.py's queue_order_key): lower first
OrderKey = tuple[int, bool, float, str, str]


@dataclass(frozen=True)
class Claim:
    #: the quotas covering the service ("namespace/name")
    quotas: frozenset[str]
    cost: ReplicaCost
    #: the replicas admitted (what its Deployment or HPA was, or is about to be, given)
    granted: int
    order: OrderKey
    #: the quota its next replica waits on ("": it waits on none)
    waiting_on: str = ""
    #: the quota that stopped or refused it ("" when none did)
    blocked_by: str = ""
    #: what it waits for, said in its status and the quota's
    reason: str = ""
    message: str = ""


class QuotaLedger:
    def __init__(self) -> None:
        self._claims: dict[Identity, Claim] = {}

    def __len__(self) -> int:
        return len(self._claims)

    def get(self, identity: Identity) -> Claim | None:
        return self._claims.get(identity)

    def record(self, identity: Identity, claim: Claim) -> set[str]:
        """Keep the decision; the quotas whose waiters may now get in."""
        old = self._claims.get(identity)
        self._claims[identity] = claim
        if old is None:
            return set()
        wake: set[str] = set()
        if claim.granted * claim.cost.gpus < old.granted * old.cost.gpus or (
            claim.granted * (claim.cost.vram_bytes or 0) < old.granted * (old.cost.vram_bytes or 0)
        ):
            wake |= old.quotas  # it holds less
        if old.waiting_on and old.waiting_on != claim.waiting_on:
            wake.add(old.waiting_on)  # it left the line: the next one may go
        wake |= old.quotas - claim.quotas  # no longer covered: it holds nothing there now
        return wake

    def forget(self, identity: Identity) -> set[str]:
        old = self._claims.pop(identity, None)
        if old is None:
            return set()
        return set(old.quotas) | ({old.waiting_on} if old.waiting_on else set())

    def waiters(self, quota: str) -> list[Identity]:
        """The services waiting on a quota, in queue order."""
        found = [
            (claim.order, identity) for identity, claim in self._claims.items() if claim.waiting_on == quota
        ]
        return [identity for _, identity in sorted(found)]

    def ahead(self, quota: str, order: OrderKey, identity: Identity) -> str:
        """The first service ahead of `order` waiting on the quota ("namespace/name"), or ""."""
        best: tuple[OrderKey, Identity] | None = None
        for other, claim in self._claims.items():
            if other == identity or claim.waiting_on != quota or not claim.order < order:
                continue
            if best is None or claim.order < best[0]:
                best = (claim.order, other)
        return f"{best[1][0]}/{best[1][1]}" if best is not None else ""

    def items(self) -> Iterator[tuple[Identity, Claim]]:
        return iter(list(self._claims.items()))

    def covered_by(self, quota: str) -> Iterator[tuple[Identity, Claim]]:
        return ((identity, claim) for identity, claim in self._claims.items() if quota in claim.quotas)
