"""How many replicas a service may hold under the GPUQuotas that cover it: the quota half of the
GPU queue.

Replica by replica, up to what the service asks for (`spec.replicas`, or its HPA's maxReplicas): a
replica is admitted when, for every covering quota, the GPUs (and, when the quota caps them, the GPU
bytes) its team already holds plus this replica stay within the quota, and no service ahead of it in
the queue waits on that quota (so a large service is not overtaken for ever by small ones). The
replicas a service already holds are kept even when a quota is lowered below them: a quota stops
growth, it never evicts. A service whose priority is below a quota's minPriority is refused. A
service that asks for no GPU is not concerned by any GPU quota.

Pure: the caller (the InferenceService controller, the leader only) passes the usage of everybody
else, from its cache plus what it has admitted and not yet observed (plan/quota/ledger.py).
"""

from collections.abc import Sequence
from dataclasses import dataclass

#: the reason a service waits on a quota (status.schedulingStatus, the quota's waiters)
QUOTA_EXCEEDED = "QuotaExceeded"
#: the reason a service is refused by a quota's minPriority (phase Failed)
BELOW_QUOTA_PRIORITY = "BelowQuotaPriority"

GIB = 1024**3


@dataclass(frozen=True)
class ReplicaCost:
    """What one replica holds: GPUs, and GPU bytes (None: not known)."""

    gpus: int
    vram_bytes: int | None


@dataclass(frozen=True)
class Usage:
    gpus: int = 0
    vram_bytes: int = 0

    def plus(self, cost: ReplicaCost, replicas: int) -> "Usage":
        return Usage(self.gpus + cost.gpus * replicas, self.vram_bytes + (cost.vram_bytes or 0) * replicas)


@dataclass(frozen=True)
class QuotaLimits:
    """A valid quota, as the decision reads it."""

    namespace: str
    name: str
    gpu_count: int
    vram_bytes: int = 0  # 0: no cap
    #: the name of its minPriority ("high") and that priority's value (None: no minimum)
    min_priority: str = ""
    min_priority_value: int | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class QuotaView:
    """One covering quota and what the others under it hold (this service's own replicas excluded)."""

    limits: QuotaLimits
    others: Usage
    #: the first service ahead of this one in the queue that waits on this quota ("" when none)
    ahead: str = ""


@dataclass(frozen=True)
class Request:
    cost: ReplicaCost
    #: the replicas the service asks for (its HPA's maxReplicas under autoscaling)
    wanted: int
    #: the replicas it holds now (admitted by this leader, or observed in its Deployment or HPA)
    held: int
    #: its effective priority (the value of its PriorityClass; None: unknown)
    priority: int | None
    priority_name: str = ""


@dataclass(frozen=True)
class Grant:
    replicas: int
    reason: str = ""  # "", QUOTA_EXCEEDED or BELOW_QUOTA_PRIORITY
    message: str = ""
    #: the quota that stopped it ("namespace/name"); "" when nothing did
    quota: str = ""

    @property
    def waiting(self) -> bool:
        return self.reason == QUOTA_EXCEEDED

    @property
    def refused(self) -> bool:
        return self.reason == BELOW_QUOTA_PRIORITY


def size_text(value: int) -> str:
    return f"{value / GIB:.1f} GiB"


def decide(request: Request, quotas: Sequence[QuotaView]) -> Grant:
    if not quotas or request.cost.gpus <= 0:
        return Grant(request.wanted)
    ordered = sorted(quotas, key=lambda view: view.limits.key)
    held = min(request.held, request.wanted)
    for view in ordered:
        limits = view.limits
        if limits.min_priority_value is not None and (request.priority or 0) < limits.min_priority_value:
            mine = request.priority_name or (
                str(request.priority) if request.priority is not None else "unknown"
            )
            return Grant(
                request.held,
                BELOW_QUOTA_PRIORITY,
                f"GPUQuota {limits.name} admits priority {limits.min_priority} and above; this service's "
                f"priority is {mine}",
                limits.key,
            )
    granted = held
    while granted < request.wanted:
        blocked = _blocked(request.cost, granted, ordered)
        if blocked is not None:
            view, message = blocked
            return Grant(granted, QUOTA_EXCEEDED, message, view.limits.key)
        granted += 1
    return Grant(granted)


def _blocked(cost: ReplicaCost, granted: int, quotas: Sequence[QuotaView]) -> tuple[QuotaView, str] | None:
    """The first quota the next replica (after `granted`) would break, and why."""
    for view in quotas:
        limits = view.limits
        team = view.others.plus(cost, granted)
        if view.ahead:
            return view, (
                f"GPUQuota {limits.name}: {view.ahead} waits for it ahead of this service "
                f"({team.gpus} of {limits.gpu_count} GPUs in use)"
            )
        if team.gpus + cost.gpus > limits.gpu_count:
            return view, (
                f"GPUQuota {limits.name} uses {team.gpus} of {limits.gpu_count} GPUs, "
                f"this replica needs {cost.gpus}"
            )
        if limits.vram_bytes > 0:
            if cost.vram_bytes is None:
                return view, (
                    f"GPUQuota {limits.name} caps GPU memory at {size_text(limits.vram_bytes)}, and this "
                    "replica's GPU memory cannot be estimated (its Model has no GGUF metadata and no GPU "
                    "memory is known: set resources.gpuMemory)"
                )
            if team.vram_bytes + cost.vram_bytes > limits.vram_bytes:
                return view, (
                    f"GPUQuota {limits.name} uses {size_text(team.vram_bytes)} of "
                    f"{size_text(limits.vram_bytes)} of GPU memory, this replica needs "
                    f"{size_text(cost.vram_bytes)}"
                )
    return None
