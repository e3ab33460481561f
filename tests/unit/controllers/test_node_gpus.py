"""The largest GPU node per resource as the Node cache changes: which changes move it (and so send
services back to planning), and that heartbeats and the first LIST's replay never do."""

from typing import Any

import pytest

from llmkube.controllers.node_gpus import LargestGpuNodes
from llmkube.kube.cache.store import Change, Tombstone
from llmkube.plan.inferenceservice.scheduling import NodeGpus, largest_gpu_nodes

GPU, AMD = "nvidia.com/gpu", "amd.com/gpu"


def node(
    name: str, gpus: int | None = None, *, amd: int | None = None, heartbeat: str = "t0"
) -> dict[str, Any]:
    allocatable = {"cpu": "32", "memory": "256Gi"}
    if gpus is not None:
        allocatable[GPU] = str(gpus)
    if amd is not None:
        allocatable[AMD] = str(amd)
    return {
        "metadata": {"name": name, "resourceVersion": heartbeat},
        "status": {"allocatable": allocatable, "capacity": allocatable},
    }


def started(*nodes: dict[str, Any]) -> LargestGpuNodes:
    largest = LargestGpuNodes()
    for n in nodes:
        assert largest.follow(Change("ADDED", None, n, initial=True)) is False  # a start plans everything
    return largest


CLUSTER = (node("gpu-0", 2), node("gpu-1", 1), node("cpu-0"))

# (change, moves the largest node, the largest afterwards)
CHANGES: dict[str, tuple[Change, bool, dict[str, NodeGpus]]] = {
    "a heartbeat": (
        Change("MODIFIED", node("gpu-0", 2), node("gpu-0", 2, heartbeat="t1")),
        False,
        {GPU: NodeGpus(2, "gpu-0")},
    ),
    "a bigger node joins": (Change("ADDED", None, node("gpu-9", 4)), True, {GPU: NodeGpus(4, "gpu-9")}),
    "a node as big joins (ties go to the first name)": (
        Change("ADDED", None, node("a-gpu", 2)),
        True,
        {GPU: NodeGpus(2, "a-gpu")},
    ),
    "a smaller node joins": (Change("ADDED", None, node("gpu-2", 1)), False, {GPU: NodeGpus(2, "gpu-0")}),
    "the largest node leaves": (Change("DELETED", node("gpu-0", 2), None), True, {GPU: NodeGpus(1, "gpu-1")}),
    "the largest node leaves, seen after a relist": (
        Change("DELETED", Tombstone("gpu-0", node("gpu-0", 2)), None),
        True,
        {GPU: NodeGpus(1, "gpu-1")},
    ),
    "a smaller node leaves": (Change("DELETED", node("gpu-1", 1), None), False, {GPU: NodeGpus(2, "gpu-0")}),
    "the largest node loses a GPU": (
        Change("MODIFIED", node("gpu-0", 2), node("gpu-0", 1)),
        True,
        {GPU: NodeGpus(1, "gpu-0")},
    ),
    "a small node grows past it": (
        Change("MODIFIED", node("gpu-1", 1), node("gpu-1", 3)),
        True,
        {GPU: NodeGpus(3, "gpu-1")},
    ),
    "a CPU node gets GPUs of another vendor": (
        Change("MODIFIED", node("cpu-0"), node("cpu-0", amd=8)),
        True,
        {GPU: NodeGpus(2, "gpu-0"), AMD: NodeGpus(8, "cpu-0")},
    ),
}


@pytest.mark.parametrize("case", CHANGES)
def test_which_node_changes_move_the_largest(case: str) -> None:
    change, moves, after = CHANGES[case]
    largest = started(*CLUSTER)
    assert dict(largest.largest()) == {GPU: NodeGpus(2, "gpu-0")}
    assert largest.follow(change) is moves
    assert dict(largest.largest()) == after


def test_the_last_node_of_a_resource_leaving_leaves_none() -> None:
    largest = started(node("amd-0", amd=1), *CLUSTER)
    assert largest.follow(Change("DELETED", node("amd-0", amd=1), None)) is True
    assert dict(largest.largest()) == {GPU: NodeGpus(2, "gpu-0")}


def test_a_sequence_of_changes_agrees_with_a_search_of_every_node() -> None:
    """The per-node counts kept in place give what a fresh search of the cluster gives."""
    cluster = {n["metadata"]["name"]: n for n in CLUSTER}
    largest = started(*CLUSTER)
    steps = [
        node("gpu-3", 4),
        node("gpu-0", 0),
        node("gpu-3", 1, amd=2),
        node("gpu-4", 4),
        None,  # gpu-4 leaves again
        node("gpu-1", 1, heartbeat="t9"),
    ]
    for step in steps:
        if step is None:
            change = Change("DELETED", cluster.pop("gpu-4"), None)
        else:
            name = step["metadata"]["name"]
            previous = cluster.get(name)
            change = Change("MODIFIED" if previous else "ADDED", previous, step)
            cluster[name] = step
        largest.follow(change)
        assert dict(largest.largest()) == largest_gpu_nodes(cluster.values())
