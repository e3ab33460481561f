"""Why pods do not run, read from pod conditions, as the reference operator does (not from Events).

The first Pending pod whose PodScheduled condition is False explains the wait. An insufficient GPU
of any known vendor makes the service WaitingForGPU, with `waitingFor` naming the resource and the
service's effective GPU count; any other reason is reported as it is instead of being dropped.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

INSUFFICIENT_GPU = "InsufficientGPU"
INSUFFICIENT_RESOURCES = "InsufficientResources"


@dataclass(frozen=True)
class SchedulingInfo:
    status: str
    message: str
    waiting_for: str = ""


def _live(pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Pods not being deleted, in a stable order so the diagnosis does not flap between reconciles."""
    alive = [p for p in pods if not p.get("metadata", {}).get("deletionTimestamp")]
    return sorted(alive, key=lambda p: str(p.get("metadata", {}).get("name", "")))


def running_pod_count(pods: Sequence[Mapping[str, Any]]) -> int:
    """`status.replicas`, as the schema describes it: pods that are Running and not terminating
    (the reference operator wrote the desired count)."""
    return sum(1 for p in _live(pods) if p.get("status", {}).get("phase") == "Running")


def diagnose_scheduling(
    pods: Sequence[Mapping[str, Any]], gpu_resources: Sequence[str], gpu_count: int
) -> SchedulingInfo | None:
    for pod in _live(pods):
        status = pod.get("status", {})
        if status.get("phase") != "Pending":
            continue
        for condition in status.get("conditions") or ():
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                return _classify(
                    str(condition.get("reason") or "Unschedulable"),
                    str(condition.get("message") or ""),
                    gpu_resources,
                    gpu_count,
                )
    return None


def _classify(reason: str, message: str, gpu_resources: Sequence[str], gpu_count: int) -> SchedulingInfo:
    for resource in gpu_resources:
        if f"Insufficient {resource}" in message:
            return SchedulingInfo(INSUFFICIENT_GPU, message, f"{resource}: {gpu_count}")
    if "Insufficient" in message:
        return SchedulingInfo(INSUFFICIENT_RESOURCES, message)
    return SchedulingInfo(reason, message)
