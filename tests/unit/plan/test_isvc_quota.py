"""The planner under a GPU quota's grant: the Deployment gets the admitted replicas, an HPA a capped
maxReplicas, and the status says what waits on which quota (QuotaExceeded) or what was refused."""

from typing import Any

import pytest
from isvc_factories import gpu_model, live_deployment, make_isvc, make_model, observe
from isvc_planning import condition, plan

from llmkube.plan.inferenceservice.queue import GpuQueue
from llmkube.plan.inferenceservice.quota_cost import held_replicas, replica_cost, wanted_replicas
from llmkube.plan.quota.decision import BELOW_QUOTA_PRIORITY, GIB, QUOTA_EXCEEDED, Grant, ReplicaCost

MESSAGE = "GPUQuota team-a uses 6 of 8 GPUs, this replica needs 4"
WAIT = Grant(0, QUOTA_EXCEEDED, MESSAGE, "ai/team-a")


def test_no_replica_admitted_waits_for_gpu_naming_the_quota() -> None:
    result = plan({"replicas": 2}, gpu_model(4), observed=observe(quota=WAIT))
    assert result.deployment is not None
    assert result.deployment["spec"]["replicas"] == 0
    status = result.status
    assert (status.phase, status.scheduling_status, status.scheduling_message) == (
        "WaitingForGPU",
        QUOTA_EXCEEDED,
        MESSAGE,
    )
    assert status.waiting_for == "nvidia.com/gpu: 4"
    assert status.queue_position == 1
    assert status.desired_replicas == 2
    assert condition(result, "GPUAvailable") == ("False", QUOTA_EXCEEDED, MESSAGE)
    assert condition(result, "Progressing") == ("True", "WaitingForGPU", f"Queued at position 1: {MESSAGE}")
    assert [(e.type, e.reason, e.message) for e in result.events] == [("Normal", QUOTA_EXCEEDED, MESSAGE)]


def test_queue_position_counts_the_others_waiting() -> None:
    queue = GpuQueue()
    from datetime import timedelta

    from isvc_factories import CREATED

    from llmkube.plan.inferenceservice.queue import QueueEntry

    queue.put(QueueEntry("ai", "older", 10_000, CREATED - timedelta(minutes=5)))
    result = plan({"replicas": 1}, gpu_model(4), observed=observe(quota=WAIT, gpu_queue=queue))
    assert (result.status.phase, result.status.queue_position) == ("WaitingForGPU", 2)


def test_some_replicas_admitted_serve_while_the_rest_wait() -> None:
    grant = Grant(1, QUOTA_EXCEEDED, MESSAGE, "ai/team-a")
    observed = observe(quota=grant, deployment=live_deployment(ready=1, replicas=1))
    result = plan({"replicas": 3}, gpu_model(4), observed=observed)
    assert result.deployment is not None
    assert result.deployment["spec"]["replicas"] == 1
    assert (result.status.phase, result.status.scheduling_status) == ("Progressing", QUOTA_EXCEEDED)
    assert result.status.desired_replicas == 3


def test_everything_admitted_plans_as_without_a_quota() -> None:
    spec = {"replicas": 2}
    free = plan(spec, gpu_model(1))
    granted = plan(spec, gpu_model(1), observed=observe(quota=Grant(2)))
    assert granted.deployment == free.deployment
    assert granted.status == free.status


def test_hpa_gets_a_max_no_higher_than_admitted() -> None:
    spec = {"replicas": 1, "autoscaling": {"minReplicas": 3, "maxReplicas": 6}}
    result = plan(spec, gpu_model(1), observed=observe(quota=Grant(2, QUOTA_EXCEEDED, MESSAGE, "ai/team-a")))
    assert result.hpa is not None
    assert (result.hpa["spec"]["minReplicas"], result.hpa["spec"]["maxReplicas"]) == (2, 2)
    assert result.deployment_initial == {"spec": {"replicas": 2}}


def test_hpa_without_any_replica_admitted_is_not_made() -> None:
    spec = {"replicas": 1, "autoscaling": {"maxReplicas": 4}}
    result = plan(spec, gpu_model(1), observed=observe(quota=WAIT))
    assert result.hpa is None
    assert result.deployment is not None
    assert result.deployment["spec"]["replicas"] == 0
    assert (result.status.phase, result.status.scheduling_status) == ("WaitingForGPU", QUOTA_EXCEEDED)


def test_below_min_priority_is_refused_and_nothing_applied() -> None:
    message = "GPUQuota prod admits priority high and above; this service's priority is normal"
    result = plan(
        {"replicas": 1},
        gpu_model(1),
        observed=observe(quota=Grant(0, BELOW_QUOTA_PRIORITY, message, "ai/prod")),
    )
    assert result.deployment is None and result.hpa is None
    assert (result.status.phase, result.status.scheduling_status) == ("Failed", BELOW_QUOTA_PRIORITY)
    assert condition(result, "Degraded") == ("True", BELOW_QUOTA_PRIORITY, message)
    assert [(e.type, e.reason) for e in result.events] == [("Warning", BELOW_QUOTA_PRIORITY)]


def test_suspended_service_is_not_waiting() -> None:
    result = plan({"replicas": 2, "suspend": True}, gpu_model(1), observed=observe(quota=Grant(0)))
    assert result.status.phase == "Suspended"


@pytest.mark.parametrize(
    ("spec", "wanted"),
    [
        ({}, 1),
        ({"replicas": 3}, 3),
        ({"replicas": 0}, 0),
        ({"replicas": 3, "suspend": True}, 0),
        ({"replicas": 1, "autoscaling": {"maxReplicas": 5}}, 5),
        ({"replicas": 0, "autoscaling": {"maxReplicas": 5}}, 0),
    ],
)
def test_wanted_replicas(spec: dict[str, Any], wanted: int) -> None:
    assert wanted_replicas(make_isvc(spec).spec) == wanted


def test_held_is_the_deployment_or_the_hpa_ceiling() -> None:
    assert held_replicas(None, None) == 0
    assert held_replicas(live_deployment(replicas=2), None) == 2
    assert held_replicas(live_deployment(replicas=1), {"spec": {"maxReplicas": 4}}) == 4


def test_replica_cost() -> None:
    spec = make_isvc({"resources": {"gpu": 2}}).spec
    assert replica_cost(spec, make_model()) == ReplicaCost(2, None)  # no GGUF metadata, no GPU memory
    assert replica_cost(spec, make_model(), [24 * GIB, 80 * GIB]) == ReplicaCost(2, 160 * GIB)
    assert replica_cost(make_isvc().spec, make_model()) == ReplicaCost(0, 0)
    vllm = make_isvc({"runtime": "vllm", "resources": {"gpu": 1, "gpuMemory": "48Gi"}}).spec
    assert replica_cost(vllm, make_model()) == ReplicaCost(1, 48 * GIB)
