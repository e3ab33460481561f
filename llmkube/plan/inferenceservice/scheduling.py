"""Why pods do not run, from pod conditions and node capacity.

The first Pending pod whose PodScheduled condition is False explains the wait. An insufficient GPU
of any known vendor makes the service WaitingForGPU, with `waitingFor` naming the resource and the
service's effective GPU count; any other reason is reported as it is instead of being dropped.

A pod that asks for more GPUs than any node has can never run, whatever is freed: it is
`Unschedulable` (the scheduler's own reason for a pod it cannot place), named with the largest
node's count, and stays out of the GPU queue. Only the GPUs each node has are compared (its
allocatable count of the resource): node selectors, affinity, taints and cordons are not, so a
service is called Unschedulable only when no node at all could hold one of its pods.
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

INSUFFICIENT_GPU = "InsufficientGPU"
INSUFFICIENT_RESOURCES = "InsufficientResources"
UNSCHEDULABLE = "Unschedulable"


@dataclass(frozen=True)
class SchedulingInfo:
    status: str
    message: str
    #: the GPUs a pod asks for ("nvidia.com/gpu: 2") when GPUs are what it lacks
    waiting_for: str = ""

    @property
    def gpus_never_fit(self) -> bool:
        """No node has as many GPUs as one pod asks for (not a wait in the GPU queue)."""
        return self.status == UNSCHEDULABLE and bool(self.waiting_for)


@dataclass(frozen=True)
class NodeGpus:
    """The most GPUs of one resource that a single node offers, and that node's name."""

    count: int
    node: str


def node_gpus(node: Mapping[str, Any]) -> dict[str, int]:
    """GPUs (extended resources: a `/` in the name) a node offers pods: its allocatable count, or
    its capacity when it reports no allocatable at all."""
    status = node.get("status") or {}
    offered = status.get("allocatable")
    if not isinstance(offered, Mapping):
        offered = status.get("capacity") or {}
    counts = {}
    for resource, value in offered.items():
        if "/" not in resource:
            continue
        try:
            counts[resource] = int(str(value))
        except ValueError:
            continue  # not a whole number: no device plugin announces GPUs that way
    return counts


def largest_gpu_nodes(nodes: Iterable[Mapping[str, Any]]) -> dict[str, NodeGpus]:
    """Per GPU resource, the node offering the most of it (the first by name among equals)."""
    largest: dict[str, NodeGpus] = {}
    for node in nodes:
        name = str((node.get("metadata") or {}).get("name") or "")
        for resource, count in node_gpus(node).items():
            best = largest.get(resource)
            if best is None or count > best.count or (count == best.count and name < best.node):
                largest[resource] = NodeGpus(count, name)
    return largest


def never_fits_message(resource: str, gpu_count: int, largest: NodeGpus | None) -> str:
    have = (
        f"the most any node has is {largest.count}, on {largest.node}"
        if largest is not None and largest.count > 0
        else f"no node has {resource}"
    )
    return (
        f"each replica needs {gpu_count} {resource} and {have}: not queued for GPUs until a node "
        f"with {gpu_count} joins"
    )


def _live(pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Pods not being deleted, in a stable order so the diagnosis does not flap between reconciles."""
    alive = [p for p in pods if not p.get("metadata", {}).get("deletionTimestamp")]
    return sorted(alive, key=lambda p: str(p.get("metadata", {}).get("name", "")))


def running_pod_count(pods: Sequence[Mapping[str, Any]]) -> int:
    """`status.replicas`, as the schema describes it: pods that are Running and not terminating
    (the reference operator wrote the desired count)."""
    return sum(1 for p in _live(pods) if p.get("status", {}).get("phase") == "Running")


def diagnose_scheduling(
    pods: Sequence[Mapping[str, Any]],
    gpu_resources: Sequence[str],
    gpu_count: int,
    *,
    gpu_resource: str = "",
    largest: Mapping[str, NodeGpus] | None = None,
) -> SchedulingInfo | None:
    """Why the first unschedulable pod waits. With the cluster's `largest` GPU nodes (None: not
    known, never guessed), a pod asking for more of `gpu_resource` than any node has is
    Unschedulable whatever the scheduler's message says."""
    for pod in _live(pods):
        status = pod.get("status", {})
        if status.get("phase") != "Pending":
            continue
        for condition in status.get("conditions") or ():
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                if largest is not None and gpu_count > 0 and gpu_resource:
                    most = largest.get(gpu_resource)
                    if most is None or most.count < gpu_count:
                        return SchedulingInfo(
                            UNSCHEDULABLE,
                            never_fits_message(gpu_resource, gpu_count, most),
                            f"{gpu_resource}: {gpu_count}",
                        )
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
