"""A GPUQuota's status: used, holders, waiters, conditions; quiet when nothing changed."""

from datetime import UTC, datetime, timedelta

from llmkube.api.gpuquota import QuotaHolder, QuotaWaiter
from llmkube.plan.quota.status import quota_status

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
HOLDERS = [
    QuotaHolder(namespace="a", name="one", replicas=2, gpus=4, vram_bytes=10),
    QuotaHolder(namespace="a", name="two", replicas=1, gpus=2),
]
WAITERS = [QuotaWaiter(namespace="a", name="three", needs_gpus=4, reason="QuotaExceeded", message="m")]


def conditions(status: object) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.reason) for c in getattr(status, "conditions", None) or ()}


def test_used_holders_waiters_and_ready() -> None:
    status = quota_status(
        None, generation=2, issues=[], holders=HOLDERS, waiters=WAITERS, gpu_count=8, now=NOW
    )
    assert (status.used_gpu_count, status.used_vram_bytes, status.waiting) == (6, 10, 1)
    assert status.observed_generation == 2
    assert conditions(status)["Ready"] == ("True", "Enforced")
    assert conditions(status)["Reconciling"] == ("False", "Enforced")
    assert status.last_updated == NOW
    ready = next(c for c in status.conditions or () if c.type == "Ready")
    assert ready.message == "6 of 8 GPUs held by 2 services, 1 waiting"


def test_invalid_spec_is_stalled_and_holds_nothing() -> None:
    issues = [("spec", "exactly one of namespaceRef and selector is required")]
    status = quota_status(None, generation=1, issues=issues, holders=[], waiters=[], gpu_count=8, now=NOW)
    assert conditions(status)["Ready"] == ("False", "InvalidSpec")
    assert conditions(status)["Stalled"] == ("True", "InvalidSpec")
    assert status.used_gpu_count == 0


def test_unchanged_status_keeps_its_time() -> None:
    first = quota_status(None, generation=1, issues=[], holders=HOLDERS, waiters=[], gpu_count=8, now=NOW)
    later = NOW + timedelta(minutes=5)
    again = quota_status(first, generation=1, issues=[], holders=HOLDERS, waiters=[], gpu_count=8, now=later)
    assert again == first
    moved = quota_status(
        first, generation=1, issues=[], holders=HOLDERS[:1], waiters=[], gpu_count=8, now=later
    )
    assert moved.last_updated == later
