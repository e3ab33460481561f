"""The quota half of the GPU queue: replicas admitted one by one within every covering quota."""

import pytest

from llmkube.plan.quota.decision import (
    BELOW_QUOTA_PRIORITY,
    GIB,
    QUOTA_EXCEEDED,
    Grant,
    QuotaLimits,
    QuotaView,
    ReplicaCost,
    Request,
    Usage,
    decide,
)

TEAM_A = QuotaLimits("team-a", "team-a", gpu_count=8)


def view(limits: QuotaLimits = TEAM_A, gpus: int = 0, vram: int = 0, ahead: str = "") -> QuotaView:
    return QuotaView(limits, Usage(gpus, vram), ahead)


def request(
    gpus: int = 1, vram: int | None = GIB, wanted: int = 1, held: int = 0, priority: int | None = 10_000
) -> Request:
    return Request(ReplicaCost(gpus, vram), wanted, held, priority, "normal")


CASES: dict[str, tuple[Request, list[QuotaView], Grant]] = {
    "no quota: all it asks": (request(wanted=3), [], Grant(3)),
    "no GPU: not concerned": (request(gpus=0, vram=0, wanted=5), [view(gpus=8)], Grant(5)),
    "fits": (request(gpus=4), [view(gpus=4)], Grant(1)),
    "the example of the issue": (
        request(gpus=4),
        [view(gpus=6)],
        Grant(0, QUOTA_EXCEEDED, "GPUQuota team-a uses 6 of 8 GPUs, this replica needs 4", "team-a/team-a"),
    ),
    "some replicas, not all": (
        request(gpus=2, wanted=4),
        [view(gpus=4)],
        Grant(2, QUOTA_EXCEEDED, "GPUQuota team-a uses 8 of 8 GPUs, this replica needs 2", "team-a/team-a"),
    ),
    "held replicas are kept over a lowered quota": (
        request(gpus=4, wanted=3, held=3),
        [view(gpus=4)],
        Grant(3),
    ),
    "held beyond what it wants: only what it wants": (
        request(gpus=1, wanted=1, held=3),
        [view(gpus=7)],
        Grant(1),
    ),
    "zero quota admits nothing": (
        request(gpus=1),
        [view(QuotaLimits("t", "zero", gpu_count=0))],
        Grant(0, QUOTA_EXCEEDED, "GPUQuota zero uses 0 of 0 GPUs, this replica needs 1", "t/zero"),
    ),
    "VRAM cap": (
        request(gpus=1, vram=6 * GIB),
        [view(QuotaLimits("t", "mem", gpu_count=8, vram_bytes=16 * GIB), gpus=2, vram=12 * GIB)],
        Grant(
            0,
            QUOTA_EXCEEDED,
            "GPUQuota mem uses 12.0 GiB of 16.0 GiB of GPU memory, this replica needs 6.0 GiB",
            "t/mem",
        ),
    ),
    "VRAM within the cap": (
        request(gpus=1, vram=4 * GIB),
        [view(QuotaLimits("t", "mem", gpu_count=8, vram_bytes=16 * GIB), gpus=2, vram=12 * GIB)],
        Grant(1),
    ),
    "VRAM 0: no cap": (request(gpus=1, vram=None), [view(gpus=0)], Grant(1)),
    "VRAM unknown under a cap: waits, saying why": (
        request(gpus=1, vram=None),
        [view(QuotaLimits("t", "mem", gpu_count=8, vram_bytes=GIB))],
        Grant(
            0,
            QUOTA_EXCEEDED,
            "GPUQuota mem caps GPU memory at 1.0 GiB, and this replica's GPU memory cannot be estimated "
            "(its Model has no GGUF metadata and no GPU memory is known: set resources.gpuMemory)",
            "t/mem",
        ),
    ),
    "a waiter ahead keeps its place": (
        request(gpus=1),
        [view(gpus=2, ahead="team-a/big")],
        Grant(
            0,
            QUOTA_EXCEEDED,
            "GPUQuota team-a: team-a/big waits for it ahead of this service (2 of 8 GPUs in use)",
            "team-a/team-a",
        ),
    ),
    "every covering quota must allow it, the first by name says why": (
        request(gpus=2),
        [view(QuotaLimits("org", "zz-org", gpu_count=16), gpus=15), view(gpus=0)],
        Grant(0, QUOTA_EXCEEDED, "GPUQuota zz-org uses 15 of 16 GPUs, this replica needs 2", "org/zz-org"),
    ),
    "below minPriority: refused, what it holds kept": (
        request(gpus=1, held=1, priority=1_000),
        [view(QuotaLimits("t", "prod", gpu_count=8, min_priority="high", min_priority_value=100_000))],
        Grant(
            1,
            BELOW_QUOTA_PRIORITY,
            "GPUQuota prod admits priority high and above; this service's priority is normal",
            "t/prod",
        ),
    ),
    "at minPriority: admitted": (
        request(gpus=1, priority=100_000),
        [view(QuotaLimits("t", "prod", gpu_count=8, min_priority="high", min_priority_value=100_000))],
        Grant(1),
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_decide(case: str) -> None:
    given, quotas, expected = CASES[case]
    assert decide(given, quotas) == expected


def test_the_grant_never_takes_a_team_past_its_quota() -> None:
    """Whatever the numbers: the team's GPUs after the grant stay within the quota, or what it held."""
    for cap in range(9):
        for used in range(9):
            for gpus in range(1, 5):
                for wanted in range(5):
                    for held in range(3):
                        grant = decide(
                            request(gpus=gpus, wanted=wanted, held=held),
                            [view(QuotaLimits("t", "q", cap), used)],
                        )
                        kept = min(held, wanted)
                        assert grant.replicas >= kept
                        assert grant.replicas <= wanted
                        if grant.replicas > kept:
                            assert used + grant.replicas * gpus <= cap
                        if grant.replicas < wanted:
                            assert grant.waiting
