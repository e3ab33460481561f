"""Phases, conditions and the other status fields, as tables."""

from datetime import timedelta
from typing import Any

import pytest
from isvc_factories import CREATED, NOW, gpu_model, live_deployment, make_isvc, make_model, observe, pod
from isvc_planning import condition, plan

from llmkube.api.inferenceservice import InferenceServiceStatus
from llmkube.plan.inferenceservice.queue import GpuQueue, QueueEntry
from llmkube.plan.inferenceservice.scheduling import NodeGpus, SchedulingInfo
from llmkube.plan.inferenceservice.status import (
    determine_phase,
    failed_status,
    gpu_queue_wait_seconds,
    status_changed,
)

GPU_WAIT = SchedulingInfo("InsufficientGPU", "0/1 nodes: 1 Insufficient nvidia.com/gpu.", "nvidia.com/gpu: 1")


@pytest.mark.parametrize(
    ("ready", "desired", "info", "phase"),
    [
        (1, 1, None, "Ready"),
        (3, 3, None, "Ready"),
        (1, 3, None, "Progressing"),
        (4, 3, None, "Progressing"),  # scale-down in progress
        (1, 0, None, "Progressing"),  # stopping: pods still terminating
        (0, 0, None, "Stopped"),
        (0, 0, GPU_WAIT, "Stopped"),
        (0, 1, GPU_WAIT, "WaitingForGPU"),
        (1, 2, GPU_WAIT, "Progressing"),
        (0, 1, SchedulingInfo("InsufficientResources", "Insufficient memory"), "Creating"),
        (0, 1, None, "Creating"),
    ],
)
def test_determine_phase(ready: int, desired: int, info: SchedulingInfo | None, phase: str) -> None:
    assert determine_phase(ready, desired, info) == phase


GPU_POD = pod("demo-1", "Pending", unschedulable="0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")
MEMORY_POD = pod("demo-1", "Pending", unschedulable="0/2 nodes are available: 2 Insufficient memory.")

# (case, spec, model, observed facts, phase, {condition: (status, reason)}, conditions absent)
PHASES: list[tuple[str, dict[str, Any], Any, dict[str, Any], str, dict[str, tuple[str, str]], set[str]]] = [
    (
        "model missing",
        {},
        None,
        {},
        "Failed",
        {
            "Degraded": ("True", "ModelNotFound"),
            "Available": ("False", "ModelNotFound"),
            "Progressing": ("False", "ModelNotFound"),
        },
        {"GPUAvailable"},
    ),
    (
        "model not ready",
        {},
        make_model(phase="Downloading"),
        {},
        "Pending",
        {"Progressing": ("True", "Pending"), "Available": ("False", "Pending")},
        {"Degraded", "GPUAvailable"},
    ),
    (
        "creating",
        {},
        make_model(),
        {"deployment": live_deployment(ready=0)},
        "Creating",
        {"Progressing": ("True", "Creating"), "Available": ("False", "Creating")},
        {"Degraded", "GPUAvailable"},
    ),
    (
        "creating, unschedulable for memory (reported, not hidden)",
        {},
        make_model(),
        {"deployment": live_deployment(ready=0), "pods": (MEMORY_POD,)},
        "Creating",
        {"Progressing": ("True", "Creating"), "Available": ("False", "InsufficientResources")},
        {"GPUAvailable"},
    ),
    (
        "waiting for GPU",
        {},
        gpu_model(1),
        {"deployment": live_deployment(ready=0), "pods": (GPU_POD,)},
        "WaitingForGPU",
        {
            "GPUAvailable": ("False", "InsufficientGPU"),
            "Progressing": ("True", "WaitingForGPU"),
            "Available": ("False", "WaitingForGPU"),
        },
        {"Degraded"},
    ),
    (
        "progressing",
        {"replicas": 3},
        make_model(),
        {"deployment": live_deployment(ready=1, replicas=3)},
        "Progressing",
        {"Progressing": ("True", "Creating"), "Available": ("True", "PartiallyReady")},
        {"Degraded", "GPUAvailable"},
    ),
    (
        "ready",
        {},
        make_model(),
        {"deployment": live_deployment(ready=1)},
        "Ready",
        {"Available": ("True", "InferenceReady"), "Progressing": ("False", "Ready")},
        {"Degraded", "GPUAvailable"},
    ),
    (
        "stopped",
        {"replicas": 0},
        make_model(),
        {"deployment": live_deployment(ready=0, replicas=0)},
        "Stopped",
        {"Available": ("False", "Stopped"), "Progressing": ("False", "Stopped")},
        {"Degraded", "GPUAvailable"},
    ),
    (
        "invalid spec",
        {"resources": {"cpu": "two"}},
        make_model(),
        {},
        "Failed",
        {"Degraded": ("True", "InvalidSpec"), "Available": ("False", "InvalidSpec")},
        {"GPUAvailable"},
    ),
]


@pytest.mark.parametrize(
    ("case", "spec", "model", "facts", "phase", "present", "absent"), PHASES, ids=[p[0] for p in PHASES]
)
def test_every_phase_and_its_conditions(
    case: str,
    spec: dict[str, Any],
    model: Any,
    facts: dict[str, Any],
    phase: str,
    present: dict[str, tuple[str, str]],
    absent: set[str],
) -> None:
    result = plan(spec, model, observed=observe(**facts))
    assert result.status.phase == phase
    for type_, (status, reason) in present.items():
        found = condition(result, type_)
        assert found is not None and found[:2] == (status, reason), (type_, found)
    for type_ in absent:
        assert condition(result, type_) is None
    for c in result.status.conditions or []:
        assert c.observed_generation == 3
        assert c.last_transition_time == NOW


def test_exact_reference_messages() -> None:
    missing = plan(model=None)
    # The reference said "Model not found"; the message names the Model, the reason says what it is.
    assert condition(missing, "Degraded") == (
        "True",
        "ModelNotFound",
        'Model "tiny" not found in namespace "ai"',
    )
    assert missing.status.scheduling_status == "ModelNotFound"  # the REASON column
    pending = plan(model=make_model(phase=None))
    assert condition(pending, "Progressing") == ("True", "Pending", "Waiting for Model to be Ready")
    assert pending.status.scheduling_status == "WaitingForModel"
    creating = plan(observed=observe(deployment=live_deployment(ready=0)))
    assert condition(creating, "Progressing") == (
        "True",
        "Creating",
        "Creating inference service (0/1 replicas ready)",
    )
    ready = plan(observed=observe(deployment=live_deployment(ready=1)))
    assert condition(ready, "Available") == (
        "True",
        "InferenceReady",
        "Inference service is ready and serving requests",
    )
    waiting = plan(model=gpu_model(2), observed=observe(pods=(GPU_POD,)))
    assert condition(waiting, "GPUAvailable") == (
        "False",
        "InsufficientGPU",
        "Waiting for GPU resources: nvidia.com/gpu: 2",
    )
    assert condition(waiting, "Progressing") == (
        "True",
        "WaitingForGPU",
        "Queued at position 1 waiting for GPU",
    )


def test_model_gate_status_fields() -> None:
    for model in (None, make_model(phase="Failed")):
        result = plan(
            {"replicas": 3}, model, observed=observe(pods=(pod("a"),), deployment=live_deployment(ready=0))
        )
        status = result.status
        assert (status.ready_replicas, status.desired_replicas, status.endpoint, status.model_ready) == (
            0,
            0,
            "",
            False,
        )
        assert status.replicas == 1  # the pod is running, whatever the phase
        assert status.effective_priority == 10_000
        assert (result.deployment, result.service, result.hpa, result.cache_pvc, result.deletes) == (
            None,
            None,
            None,
            None,
            (),
        )


def test_status_fields_when_creating() -> None:
    status = plan().status
    assert status.endpoint == "http://demo.ai.svc.cluster.local:8080/v1/chat/completions"
    assert (status.model_ready, status.effective_priority, status.queue_position) == (True, 10_000, None)
    assert (status.replicas, status.ready_replicas, status.desired_replicas) == (0, 0, 1)
    assert (status.scheduling_status, status.scheduling_message, status.waiting_for) == ("", "", "")
    assert status.last_updated == NOW


def test_replicas_are_running_pods() -> None:
    pods = (pod("a"), pod("b"), pod("c", "Pending"), pod("d", deleting=True))
    status = plan(
        {"replicas": 3}, observed=observe(pods=pods, deployment=live_deployment(ready=2, replicas=3))
    ).status
    assert (status.replicas, status.ready_replicas, status.desired_replicas) == (2, 2, 3)


@pytest.mark.parametrize(
    ("spec", "live", "desired", "phase"),
    [
        (
            {"replicas": 1, "autoscaling": {"maxReplicas": 5}},
            live_deployment(ready=4, replicas=4),
            4,
            "Ready",
        ),
        (
            {"replicas": 1, "autoscaling": {"maxReplicas": 5}},
            live_deployment(ready=2, replicas=4),
            4,
            "Progressing",
        ),
        ({"autoscaling": {"minReplicas": 2, "maxReplicas": 5}}, None, 2, "Creating"),
        (
            {"autoscaling": {"minReplicas": 2, "maxReplicas": 5}},
            live_deployment(ready=0, replicas=None),
            2,
            "Creating",
        ),
        (
            {"replicas": 1},
            live_deployment(ready=4, replicas=4),
            1,
            "Progressing",
        ),  # an external scale is reverted
        (
            {"replicas": 0, "autoscaling": {"maxReplicas": 5}},
            live_deployment(ready=0, replicas=0),
            0,
            "Stopped",
        ),
    ],
)
def test_desired_with_autoscaling(
    spec: dict[str, Any], live: dict[str, Any] | None, desired: int, phase: str
) -> None:
    status = plan(spec, observed=observe(deployment=live)).status
    assert (status.desired_replicas, status.phase) == (desired, phase)


def test_waiting_for_gpu_fields_and_queue() -> None:
    older = QueueEntry("ai", "older", 10_000, CREATED - timedelta(hours=1))
    higher = QueueEntry("other", "urgent", 100_000, NOW)
    result = plan(model=gpu_model(2), observed=observe(pods=(GPU_POD,), gpu_queue=GpuQueue((older, higher))))
    status = result.status
    assert status.phase == "WaitingForGPU"
    assert (status.scheduling_status, status.waiting_for) == ("InsufficientGPU", "nvidia.com/gpu: 2")
    assert status.scheduling_message == "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    assert status.queue_position == 3


def test_waiting_for_amd_gpu() -> None:
    amd_pod = pod("p", "Pending", unschedulable="0/1 nodes are available: 1 Insufficient amd.com/gpu.")
    model = make_model(hardware={"accelerator": "rocm", "gpu": {"count": 1}})
    status = plan(model=model, observed=observe(pods=(amd_pod,))).status
    assert (status.phase, status.waiting_for) == ("WaitingForGPU", "amd.com/gpu: 1")


def test_waiting_for_uses_the_model_gpu_count() -> None:
    status = plan({"resources": {"gpu": 1}}, gpu_model(4), observed=observe(pods=(GPU_POD,))).status
    assert status.waiting_for == "nvidia.com/gpu: 4"


def test_scheduling_reported_when_not_gpu() -> None:
    status = plan(observed=observe(pods=(MEMORY_POD,))).status
    assert (status.phase, status.scheduling_status) == ("Creating", "InsufficientResources")
    assert "Insufficient memory" in (status.scheduling_message or "")


def test_no_diagnosis_once_a_replica_is_ready() -> None:
    status = plan(
        {"replicas": 2}, observed=observe(pods=(GPU_POD,), deployment=live_deployment(ready=1, replicas=2))
    ).status
    assert (status.phase, status.scheduling_status, status.queue_position) == ("Progressing", "", None)


def test_queue_position_absent_when_not_waiting() -> None:
    """`kubectl get isvc -o wide` shows QUEUE blank, not 0, for a service that is not queued (the
    reference wrote 0 for every service)."""
    result = plan(observed=observe(gpu_queue=GpuQueue((QueueEntry("ai", "demo", 10_000, CREATED),))))
    assert result.status.queue_position is None
    assert "queuePosition" not in result.status.model_dump(by_alias=True, exclude_none=True)


@pytest.mark.parametrize("model", [None, make_model(phase="Downloading")], ids=["missing", "not ready"])
def test_replicas_that_serve_while_the_model_is_gone_are_reported_as_serving(model: Any) -> None:
    """Deleting the Model under a running service (or re-fetching it) stops nothing: the status
    tells what is true, serving replicas and the endpoint, and names what the Model lacks."""
    result = plan(
        {"replicas": 2},
        model,
        observed=observe(pods=(pod("a"), pod("b")), deployment=live_deployment(ready=2, replicas=2)),
    )
    status = result.status
    assert (status.phase, status.ready_replicas, status.desired_replicas, status.model_ready) == (
        "Ready",
        2,
        2,
        False,
    )
    assert status.endpoint == "http://demo.ai.svc.cluster.local:8080/v1/chat/completions"
    assert condition(result, "Available")[:2] == ("True", "InferenceReady")  # type: ignore[index]
    assert (result.deployment, result.service, result.deletes) == (None, None, ())  # nothing touched
    if model is None:
        assert status.scheduling_status == "ModelNotFound"
        assert condition(result, "Degraded") == (
            "True",
            "ModelNotFound",
            'Model "tiny" not found in namespace "ai": '
            "the running replicas keep serving, but no new one can start",
        )
    else:
        assert status.scheduling_status == "WaitingForModel"
        assert condition(result, "Progressing")[:2] == ("True", "WaitingForModel")  # type: ignore[index]


def test_failed_services_fill_the_reason_column() -> None:
    status = plan({"resources": {"cpu": "two"}}).status
    assert (status.phase, status.scheduling_status) == ("Failed", "InvalidSpec")


def previous(phase: str, conditions: list[dict[str, Any]]) -> dict[str, Any]:
    return {"phase": phase, "conditions": conditions}


def cond(type_: str, status: str, reason: str, at: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": "old", "lastTransitionTime": at}


# Transitions: conditions always describe the present, and a condition once written
# is never removed because its cause went away (the rule in plan/conditions/standard.py): it says so instead.
RECOVERED = ("False", "Recovered")
NOT_WAITING = ("True", "NotWaitingForGPU")
TRANSITIONS: list[
    tuple[str, list[dict[str, Any]], dict[str, Any], dict[str, Any], dict[str, tuple[str, str] | None]]
] = [
    (
        "Ready -> Creating: Available turns False",
        [cond("Available", "True", "InferenceReady")],
        {},
        {"deployment": live_deployment(ready=0)},
        {"Available": ("False", "Creating"), "Progressing": ("True", "Creating")},
    ),
    (
        "Failed -> Creating: Degraded turns False",
        [cond("Degraded", "True", "Failed"), cond("Available", "False", "Failed")],
        {},
        {},
        {"Degraded": RECOVERED, "Available": ("False", "Creating")},
    ),
    (
        "Failed -> Ready: Degraded turns False",
        [cond("Degraded", "True", "InvalidSpec")],
        {},
        {"deployment": live_deployment(ready=1)},
        {"Degraded": RECOVERED, "Available": ("True", "InferenceReady")},
    ),
    (
        "WaitingForGPU -> Creating: GPUAvailable turns True",
        [cond("GPUAvailable", "False", "InsufficientGPU"), cond("Progressing", "True", "WaitingForGPU")],
        {},
        {},
        {"GPUAvailable": NOT_WAITING, "Progressing": ("True", "Creating")},
    ),
    (
        "WaitingForGPU -> Stopped: GPUAvailable turns True",
        [cond("GPUAvailable", "False", "InsufficientGPU")],
        {"replicas": 0},
        {"deployment": live_deployment(ready=0, replicas=0)},
        {"GPUAvailable": NOT_WAITING, "Available": ("False", "Stopped")},
    ),
    (
        "WaitingForGPU -> Failed: both stale causes say so at once",
        [cond("GPUAvailable", "False", "InsufficientGPU")],
        {"resources": {"cpu": "two"}},
        {},
        {"GPUAvailable": NOT_WAITING, "Degraded": ("True", "InvalidSpec")},
    ),
    (
        "never failed, never waited: no Degraded, no GPUAvailable",
        [cond("Available", "True", "InferenceReady")],
        {},
        {"deployment": live_deployment(ready=1)},
        {"Degraded": None, "GPUAvailable": None},
    ),
    (
        "vLLM -> llama.cpp: VLLMSpecValid is removed (its subject is gone)",
        [cond("VLLMSpecValid", "False", "SpeculativeMissingModel")],
        {},
        {},
        {"VLLMSpecValid": None},
    ),
    (
        "Ready -> Stopped: Available False/Stopped",
        [cond("Available", "True", "InferenceReady"), cond("Progressing", "False", "Ready")],
        {"replicas": 0},
        {"deployment": live_deployment(ready=0, replicas=0)},
        {"Available": ("False", "Stopped"), "Progressing": ("False", "Stopped")},
    ),
    (
        "Creating -> Ready: Progressing False",
        [cond("Progressing", "True", "Creating"), cond("Available", "False", "Creating")],
        {},
        {"deployment": live_deployment(ready=1)},
        {"Progressing": ("False", "Ready"), "Available": ("True", "InferenceReady")},
    ),
]


@pytest.mark.parametrize(
    ("case", "before", "spec", "facts", "after"), TRANSITIONS, ids=[t[0] for t in TRANSITIONS]
)
def test_transitions(
    case: str,
    before: list[dict[str, Any]],
    spec: dict[str, Any],
    facts: dict[str, Any],
    after: dict[str, tuple[str, str] | None],
) -> None:
    isvc = make_isvc(spec, status=previous("Ready", before))
    result = plan(isvc=isvc, observed=observe(**facts))
    for type_, expected in after.items():
        found = condition(result, type_)
        assert (found[:2] if found else None) == expected, (type_, found)


def test_transition_time_moves_only_on_a_flip() -> None:
    before = [cond("Progressing", "True", "Pending"), cond("Available", "False", "Pending")]
    result = plan(isvc=make_isvc(status=previous("Pending", before)))
    by_type = {c.type: c for c in result.status.conditions or []}
    assert (
        by_type["Progressing"].last_transition_time.year == 2026
        and by_type["Progressing"].reason == "Creating"
    )
    assert by_type["Progressing"].last_transition_time != NOW  # True -> True: kept
    assert by_type["Available"].last_transition_time != NOW  # False -> False: kept


def test_replanning_an_unchanged_service_changes_nothing_but_last_updated() -> None:
    first = plan(observed=observe(deployment=live_deployment(ready=1)))
    stored = InferenceServiceStatus.model_validate(first.status.to_json())
    later = observe(now=NOW + timedelta(minutes=5), deployment=live_deployment(ready=1))
    second = plan(isvc=make_isvc(status=stored.to_json()), observed=later)
    assert second.status.last_updated == NOW + timedelta(minutes=5)
    assert not status_changed(stored, second.status)


@pytest.mark.parametrize(
    ("old", "new", "changed"),
    [
        (None, InferenceServiceStatus(phase="Ready"), True),
        (
            InferenceServiceStatus(phase="Ready"),
            InferenceServiceStatus(phase="Ready", last_updated=NOW),
            False,
        ),
        (InferenceServiceStatus(phase="Ready"), InferenceServiceStatus(phase="Creating"), True),
        (
            InferenceServiceStatus(phase="Ready", ready_replicas=1),
            InferenceServiceStatus(phase="Ready", ready_replicas=2),
            True,
        ),
    ],
)
def test_status_changed_ignores_last_updated_only(
    old: InferenceServiceStatus | None, new: InferenceServiceStatus, changed: bool
) -> None:
    assert status_changed(old, new) is changed


def test_failed_status_after_an_apply_error() -> None:
    planned = plan(observed=observe(pods=(pod("a"),), deployment=live_deployment(ready=1))).status
    failed = failed_status(
        planned, "applying Deployment ai/demo: 422 Unprocessable", previous=None, generation=3, now=NOW
    )
    assert failed.phase == "Failed" and failed.endpoint == ""
    assert (failed.ready_replicas, failed.desired_replicas, failed.replicas) == (1, 1, 1)
    by_type = {c.type: (c.status, c.reason, c.message) for c in failed.conditions or []}
    assert by_type["Degraded"] == ("True", "Failed", "applying Deployment ai/demo: 422 Unprocessable")
    assert by_type["Available"][0] == "False"
    empty = failed_status(InferenceServiceStatus(), "boom", previous=None, generation=None, now=NOW)
    assert (empty.ready_replicas, empty.desired_replicas, empty.replicas, empty.model_ready) == (
        0,
        0,
        0,
        False,
    )


ENTERED = NOW - timedelta(minutes=5)


def waiting_status(gpu_available: dict[str, Any] | None) -> InferenceServiceStatus:
    conditions = [gpu_available] if gpu_available else []
    return InferenceServiceStatus.model_validate({"phase": "WaitingForGPU", "conditions": conditions})


GPU_FALSE = {
    "type": "GPUAvailable",
    "status": "False",
    "reason": "InsufficientGPU",
    "message": "Waiting for GPU resources: nvidia.com/gpu: 4",
    "lastTransitionTime": ENTERED,
}


@pytest.mark.parametrize(
    ("old", "new_phase", "waited"),
    [
        (waiting_status(GPU_FALSE), "Creating", 300.0),  # scheduled: leaves the queue now
        (waiting_status(GPU_FALSE), "Stopped", 300.0),  # scaled to zero while waiting
        (waiting_status(GPU_FALSE), "WaitingForGPU", None),  # still waiting (e.g. a new position)
        (waiting_status(None), "Ready", None),  # entry time unknown: nothing observed
        (InferenceServiceStatus(phase="Creating"), "Ready", None),  # never waited
        (None, "WaitingForGPU", None),
    ],
)
def test_gpu_queue_wait_is_measured_from_entering_the_queue_to_leaving_it(
    old: InferenceServiceStatus | None, new_phase: str, waited: float | None
) -> None:
    assert gpu_queue_wait_seconds(old, InferenceServiceStatus(phase=new_phase), NOW) == waited


def test_more_gpus_than_any_node_has_is_creating_unschedulable_and_not_queued() -> None:
    """Four GPUs where the largest node has two: no amount of waiting helps. The service is not
    in the GPU queue (no position), and says why, naming the largest node."""
    largest = {"nvidia.com/gpu": NodeGpus(2, "gpu-0")}
    queue = GpuQueue([QueueEntry("ai", "other", 10_000, CREATED - timedelta(minutes=1))])
    never = plan(model=gpu_model(4), observed=observe(pods=(GPU_POD,), gpu_nodes=largest, gpu_queue=queue))
    status = never.status
    message = (
        "each replica needs 4 nvidia.com/gpu and the most any node has is 2, on gpu-0: "
        "not queued for GPUs until a node with 4 joins"
    )
    assert (status.phase, status.scheduling_status, status.queue_position) == (
        "Creating",
        "Unschedulable",
        None,
    )
    assert (status.scheduling_message, status.waiting_for) == (message, "nvidia.com/gpu: 4")
    assert condition(never, "Available") == ("False", "Unschedulable", message)
    assert condition(never, "GPUAvailable") == ("False", "Unschedulable", message)
    assert condition(never, "Ready") == ("False", "Creating", message)
    assert condition(never, "Progressing") == (
        "True",
        "Creating",
        "Creating inference service (0/1 replicas ready)",
    )
    assert never.deployment is not None  # still applied: a node with four GPUs may join (an autoscaler)

    # A node with four GPUs joins, all of them taken: now it waits in the queue, behind `other`.
    bigger = {"nvidia.com/gpu": NodeGpus(4, "gpu-9")}
    isvc = make_isvc(status=status.model_dump(by_alias=True, exclude_none=True, mode="json"))
    waiting = plan(
        model=gpu_model(4), isvc=isvc, observed=observe(pods=(GPU_POD,), gpu_nodes=bigger, gpu_queue=queue)
    )
    assert (waiting.status.phase, waiting.status.queue_position) == ("WaitingForGPU", 2)
    assert condition(waiting, "GPUAvailable") == (
        "False",
        "InsufficientGPU",
        "Waiting for GPU resources: nvidia.com/gpu: 4",
    )
    # The largest node goes away again: out of the queue; once it runs, GPUAvailable turns True.
    isvc = make_isvc(status=waiting.status.model_dump(by_alias=True, exclude_none=True, mode="json"))
    again = plan(model=gpu_model(4), isvc=isvc, observed=observe(pods=(GPU_POD,), gpu_nodes=largest))
    assert (again.status.phase, again.status.scheduling_status) == ("Creating", "Unschedulable")
    isvc = make_isvc(status=again.status.model_dump(by_alias=True, exclude_none=True, mode="json"))
    running = plan(model=gpu_model(4), isvc=isvc, observed=observe(deployment=live_deployment(ready=1)))
    assert condition(running, "GPUAvailable") == ("True", "NotWaitingForGPU", "Not waiting for GPU resources")
