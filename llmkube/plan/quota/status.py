"""A GPUQuota's status: what its covered services hold, who waits on it, in queue order, and the
summary conditions (plan/conditions/summary.py): Ready True when the quota is enforced (whether
services wait or not: a full quota is working as asked), False and Stalled for an invalid spec, which
enforces nothing. `lastUpdated` moves only when something else changed (a quiet controller)."""

from collections.abc import Sequence
from datetime import datetime

from llmkube.api.gpuquota import GPUQuotaStatus, QuotaHolder, QuotaWaiter
from llmkube.api.meta import Condition
from llmkube.plan.conditions.summary import Summary, summarize

INVALID_SPEC = "InvalidSpec"
ENFORCED = "Enforced"


def quota_status(
    previous: GPUQuotaStatus | None,
    *,
    generation: int | None,
    issues: Sequence[tuple[str, str]],
    holders: Sequence[QuotaHolder],
    waiters: Sequence[QuotaWaiter],
    gpu_count: int,
    now: datetime,
) -> GPUQuotaStatus:
    conditions: list[Condition] = list(previous.conditions or ()) if previous else []
    used_gpus = sum(holder.gpus for holder in holders)
    used_vram = sum(holder.vram_bytes or 0 for holder in holders)
    if issues:
        message = "The spec is invalid, nothing is enforced: " + "; ".join(f"{f}: {p}" for f, p in issues)
        summary = Summary(ready=False, reason=INVALID_SPEC, message=message, stalled=True)
    else:
        waiting = f", {len(waiters)} waiting" if waiters else ""
        summary = Summary(
            ready=True,
            reason=ENFORCED,
            message=f"{used_gpus} of {gpu_count} GPUs held by {len(holders)} services{waiting}",
        )
    status = GPUQuotaStatus(
        used_gpu_count=used_gpus,
        used_vram_bytes=used_vram,
        holders=list(holders) or None,
        waiters=list(waiters) or None,
        waiting=len(waiters),
        observed_generation=generation,
        last_updated=previous.last_updated if previous is not None else None,
        conditions=summarize(conditions, summary, generation=generation, now=now),
    )
    if status_changed(previous, status):
        status = status.model_copy(update={"last_updated": now})
    return status


def status_changed(old: GPUQuotaStatus | None, new: GPUQuotaStatus) -> bool:
    """Anything but lastUpdated."""
    if old is None:
        return True
    return old.model_copy(update={"last_updated": None}) != new.model_copy(update={"last_updated": None})
