"""Scheduling diagnosis from pod conditions (every vendor's GPU, the effective GPU count) and metal
readiness."""

from datetime import timedelta
from typing import Any

import pytest
from isvc_factories import NOW, pod

from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.metal import metal_readiness, parse_heartbeat
from llmkube.plan.inferenceservice.scheduling import (
    NodeGpus,
    SchedulingInfo,
    diagnose_scheduling,
    largest_gpu_nodes,
    node_gpus,
    running_pod_count,
)

GPUS = OperatorConfig().known_gpu_resources()
GPU_MESSAGE = "0/3 nodes are available: 3 Insufficient {res}. preemption: 0/3 nodes are available."


@pytest.mark.parametrize(
    "resource", ["nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/i915", "gpu.intel.com/xe"]
)
def test_insufficient_gpu_of_any_vendor(resource: str) -> None:
    message = GPU_MESSAGE.format(res=resource)
    info = diagnose_scheduling([pod("p", "Pending", unschedulable=message)], GPUS, 2)
    assert info == SchedulingInfo("InsufficientGPU", message, f"{resource}: 2")  # the effective count


def test_configured_resource_name_is_recognised() -> None:
    message = GPU_MESSAGE.format(res="amd.com/mi300")
    unknown = diagnose_scheduling([pod("p", "Pending", unschedulable=message)], GPUS, 1)
    assert unknown is not None and unknown.status == "InsufficientResources"
    info = diagnose_scheduling([pod("p", "Pending", unschedulable=message)], (*GPUS, "amd.com/mi300"), 1)
    assert info is not None and info.status == "InsufficientGPU"


@pytest.mark.parametrize(
    ("message", "reason", "expected_status"),
    [
        ("0/3 nodes are available: 3 Insufficient memory.", "Unschedulable", "InsufficientResources"),
        (
            "0/3 nodes are available: 3 Insufficient cpu, 3 Insufficient memory.",
            "Unschedulable",
            "InsufficientResources",
        ),
        (
            "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.",
            "Unschedulable",
            "Unschedulable",
        ),
        ("", "SchedulerError", "SchedulerError"),
    ],
)
def test_other_reasons_are_reported_as_they_are(message: str, reason: str, expected_status: str) -> None:
    info = diagnose_scheduling([pod("p", "Pending", unschedulable=message, reason=reason)], GPUS, 1)
    assert info == SchedulingInfo(expected_status, message)


def test_reason_defaults_to_unschedulable() -> None:
    raw: dict[str, Any] = {
        "metadata": {"name": "p"},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]},
    }
    assert diagnose_scheduling([raw], GPUS, 1) == SchedulingInfo("Unschedulable", "")


@pytest.mark.parametrize(
    "pods",
    [
        [],
        [pod("p", "Running")],
        [pod("p", "Pending")],  # pending but scheduled (pulling, init containers)
        [pod("p", "Pending", unschedulable="x", deleting=True)],
        [
            {
                "metadata": {"name": "p"},
                "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]},
            }
        ],
        [
            {
                "metadata": {"name": "p"},
                "status": {"phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}]},
            }
        ],
    ],
)
def test_no_diagnosis(pods: list[dict[str, Any]]) -> None:
    assert diagnose_scheduling(pods, GPUS, 1) is None


def test_first_pod_by_name_wins_for_a_stable_answer() -> None:
    pods = [
        pod("b", "Pending", unschedulable="0/1 nodes: 1 Insufficient memory."),
        pod("a", "Pending", unschedulable=GPU_MESSAGE.format(res="nvidia.com/gpu")),
    ]
    info = diagnose_scheduling(pods, GPUS, 1)
    assert info is not None and info.status == "InsufficientGPU"


def node(name: str, allocatable: dict[str, str] | None, capacity: dict[str, str] | None = None) -> Any:
    status = {key: value for key, value in (("allocatable", allocatable), ("capacity", capacity)) if value}
    return {"metadata": {"name": name}, "status": status}


@pytest.mark.parametrize(
    ("the_node", "expected"),
    [
        (node("n", {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "2"}), {"nvidia.com/gpu": 2}),
        # allocatable is what the scheduler gives out: a device plugin may hold back unhealthy GPUs
        (node("n", {"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "2"}), {"nvidia.com/gpu": 1}),
        (node("n", None, {"amd.com/gpu": "4"}), {"amd.com/gpu": 4}),  # no allocatable reported at all
        (node("n", {"nvidia.com/gpu": "0"}), {"nvidia.com/gpu": 0}),
        (node("n", {"nvidia.com/gpu": "1.5", "example.com/x": "3"}), {"example.com/x": 3}),
        ({"metadata": {"name": "n"}}, {}),
    ],
)
def test_node_gpus(the_node: Any, expected: dict[str, int]) -> None:
    assert node_gpus(the_node) == expected


def test_largest_gpu_nodes_per_resource_first_by_name_among_equals() -> None:
    nodes = [
        node("gpu-b", {"nvidia.com/gpu": "2"}),
        node("gpu-a", {"nvidia.com/gpu": "2", "amd.com/gpu": "1"}),
        node("gpu-c", {"nvidia.com/gpu": "1"}),
        node("cpu", {"cpu": "8"}),
    ]
    assert largest_gpu_nodes(nodes) == {
        "nvidia.com/gpu": NodeGpus(2, "gpu-a"),
        "amd.com/gpu": NodeGpus(1, "gpu-a"),
    }
    assert largest_gpu_nodes([]) == {}


GPU = "nvidia.com/gpu"
LARGEST = {GPU: NodeGpus(2, "kwok-gpu-0")}


@pytest.mark.parametrize(
    ("gpus", "largest", "status", "message"),
    [
        (2, LARGEST, "InsufficientGPU", GPU_MESSAGE.format(res=GPU)),  # fits a node: wait in the queue
        (
            4,
            LARGEST,
            "Unschedulable",
            "each replica needs 4 nvidia.com/gpu and the most any node has is 2, on kwok-gpu-0: "
            "not queued for GPUs until a node with 4 joins",
        ),
        (
            1,
            {"amd.com/gpu": NodeGpus(8, "amd-0")},
            "Unschedulable",
            "each replica needs 1 nvidia.com/gpu and no node has nvidia.com/gpu: "
            "not queued for GPUs until a node with 1 joins",
        ),
        (
            1,
            {GPU: NodeGpus(0, "drained")},
            "Unschedulable",
            "each replica needs 1 nvidia.com/gpu and no node has nvidia.com/gpu: "
            "not queued for GPUs until a node with 1 joins",
        ),
        (4, None, "InsufficientGPU", GPU_MESSAGE.format(res=GPU)),  # nodes unknown: nothing guessed
    ],
)
def test_more_gpus_than_any_node_has_is_unschedulable_not_a_wait(
    gpus: int, largest: dict[str, NodeGpus] | None, status: str, message: str
) -> None:
    pods = [pod("p", "Pending", unschedulable=GPU_MESSAGE.format(res=GPU))]
    info = diagnose_scheduling(pods, GPUS, gpus, gpu_resource=GPU, largest=largest)
    assert info == SchedulingInfo(status, message, f"{GPU}: {gpus}")
    assert info.gpus_never_fit is (status == "Unschedulable")


def test_capacity_decides_whatever_the_scheduler_says_but_only_for_an_unscheduled_pod() -> None:
    # The scheduler names another reason first (a node selector): four GPUs still fit nowhere.
    selector = "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
    info = diagnose_scheduling(
        [pod("p", "Pending", unschedulable=selector)], GPUS, 4, gpu_resource=GPU, largest=LARGEST
    )
    assert info is not None and info.status == "Unschedulable" and info.gpus_never_fit
    # The scheduler placed it (our node cache may be behind): no diagnosis at all.
    assert diagnose_scheduling([pod("p", "Pending")], GPUS, 4, gpu_resource=GPU, largest=LARGEST) is None
    # A CPU service is never judged by GPUs.
    info = diagnose_scheduling(
        [pod("p", "Pending", unschedulable=selector)], GPUS, 0, gpu_resource=GPU, largest=LARGEST
    )
    assert info == SchedulingInfo("Unschedulable", selector)
    assert not info.gpus_never_fit


def test_running_pod_count_ignores_pending_and_terminating() -> None:
    pods = [pod("a"), pod("b"), pod("c", "Pending"), pod("d", deleting=True), pod("e", "Succeeded")]
    assert running_pod_count(pods) == 2
    assert running_pod_count([]) == 0


def eps(
    name: str = "demo-abc",
    *,
    service: str = "demo",
    namespace: str = "ai",
    heartbeat: str | None = None,
    endpoints: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {"kubernetes.io/service-name": service, "llmkube.ai/managed-by": "metal-agent"},
    }
    if heartbeat is not None:
        metadata["annotations"] = {"llmkube.ai/agent-heartbeat": heartbeat}
    return {"metadata": metadata, "endpoints": endpoints if endpoints is not None else [ready_endpoint()]}


def ready_endpoint(addresses: int = 1, ready: bool | None = True) -> dict[str, Any]:
    endpoint: dict[str, Any] = {"addresses": [f"10.0.0.{i}" for i in range(addresses)]}
    if ready is not None:
        endpoint["conditions"] = {"ready": ready}
    return endpoint


def stamp(age: timedelta) -> str:
    return (NOW - age).isoformat().replace("+00:00", "Z")


def test_no_slices_waits_for_the_agent() -> None:
    readiness = metal_readiness([eps(service="other"), eps(namespace="b")], "ai", "demo", NOW)
    assert (readiness.ready, readiness.registered, readiness.heartbeat_seen) == (0, 0, False)
    assert readiness.info == SchedulingInfo(
        "WaitingForMetalAgent", "Waiting for the host metal-agent to fetch the model and register Endpoints"
    )


def test_legacy_agent_without_heartbeat_counts_ready_addresses() -> None:
    slices = [eps(endpoints=[ready_endpoint(2), ready_endpoint(1, None), ready_endpoint(3, False)])]
    readiness = metal_readiness(slices, "ai", "demo", NOW)
    assert (readiness.ready, readiness.registered, readiness.info, readiness.heartbeat_seen) == (
        3,
        6,
        None,
        False,
    )


def test_fresh_heartbeat() -> None:
    readiness = metal_readiness([eps(heartbeat=stamp(timedelta(seconds=30)))], "ai", "demo", NOW)
    assert (readiness.ready, readiness.info, readiness.heartbeat_seen) == (1, None, True)


def test_exactly_three_minutes_is_still_fresh() -> None:
    assert metal_readiness([eps(heartbeat=stamp(timedelta(minutes=3)))], "ai", "demo", NOW).ready == 1


def test_stale_heartbeat_uses_the_freshest_slice() -> None:
    old, older = stamp(timedelta(minutes=4)), stamp(timedelta(minutes=10))
    readiness = metal_readiness([eps("a", heartbeat=older), eps("b", heartbeat=old)], "ai", "demo", NOW)
    assert (readiness.ready, readiness.registered, readiness.heartbeat_seen) == (0, 0, True)
    assert readiness.info == SchedulingInfo(
        "AgentHeartbeatStale", f"metal-agent heartbeat stale (last seen {old}); host may be offline"
    )


def test_one_fresh_slice_is_enough() -> None:
    slices = [
        eps("a", heartbeat=stamp(timedelta(minutes=10))),
        eps("b", heartbeat=stamp(timedelta(seconds=5))),
    ]
    assert metal_readiness(slices, "ai", "demo", NOW).ready == 2


def test_unparseable_heartbeat() -> None:
    readiness = metal_readiness([eps(heartbeat="yesterday"), eps("b")], "ai", "demo", NOW)
    assert readiness.ready == 0 and readiness.heartbeat_seen
    assert readiness.info == SchedulingInfo(
        "AgentHeartbeatStale", 'metal-agent heartbeat unparseable (value "yesterday"); host may be offline'
    )


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("2026-03-01T11:59:00Z", True),
        ("2026-03-01T11:59:00.123456+02:00", True),
        ("2026-03-01T11:59:00", False),  # no zone: not RFC 3339
        ("soon", False),
    ],
)
def test_parse_heartbeat(value: str, parsed: bool) -> None:
    assert (parse_heartbeat(value) is not None) is parsed
