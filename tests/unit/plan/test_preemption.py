"""The Preempted condition (plan/inferenceservice/preemption.py): set from what the scheduler
wrote on the pod and in its Event, kept while the service is short of its replicas, settled False
once it serves again."""

from datetime import timedelta
from typing import Any

import pytest
from isvc_factories import NOW, gpu_model, live_deployment, make_isvc, observe, pod
from isvc_planning import condition, plan

from llmkube.plan.inferenceservice.preemption import (
    Preemption,
    preemption_mark,
    preemptor_in_note,
    serving_again,
)

AT = NOW - timedelta(seconds=30)
GPU_POD = pod("demo-1", "Pending", unschedulable="0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")
BY_US = Preemption(
    "demo-7d9f-abcde",
    "gpu-0",
    AT,
    by="pod team-b/urgent-5c8-xyz",
    by_service="team-b/urgent",
    by_priority=1_000_000,
)


def ready_pod(name: str = "demo-2", **metadata: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ai", **metadata},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def marked(**condition: Any) -> dict[str, Any]:
    mark = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": "default-scheduler: preempting to accommodate a higher priority pod",
        "lastTransitionTime": "2026-03-01T11:59:30Z",
        **condition,
    }
    return {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}, mark]}}


@pytest.mark.parametrize(
    ("the_pod", "expected"),
    [
        (marked(), (True, AT)),
        (marked(lastTransitionTime=None), (True, None)),
        (marked(status="False"), (False, None)),
        (marked(reason="TerminationByKubelet"), (False, None)),  # the kubelet's disruption, not ours
        (marked(type="Ready"), (False, None)),
        ({"status": {"phase": "Running"}}, (False, None)),
    ],
)
def test_preemption_mark(the_pod: dict[str, Any], expected: tuple[bool, Any]) -> None:
    assert preemption_mark(the_pod) == expected


UID = "cdabceaf-3f46-480f-a341-e7286d4975e6"


@pytest.mark.parametrize(
    ("note", "expected"),
    [
        (f"Preempted by pod {UID} on node kwok-gpu-0", ("pod", UID)),  # kube-scheduler v1.37, verbatim
        (f"Preempted by podgroup {UID} on node gpu-0", ("podgroup", UID)),
        (f"Preempted by pod {UID} on node gpu-0 (in kube-scheduler memory).", ("pod", UID)),
        (f"Preempted by pod {UID}", None),
        (f"preempted by pod {UID} on node gpu-0", None),
        (f"Preempted by pod {UID} on node gpu-0; and more", None),
        ("Preempted by pod not-a-uid on node gpu-0", None),
        (None, None),
    ],
)
def test_preemptor_in_note(note: Any, expected: tuple[str, str] | None) -> None:
    assert preemptor_in_note(note) == expected


@pytest.mark.parametrize(
    ("pods", "desired", "expected"),
    [
        ([ready_pod()], 1, True),
        ([ready_pod(), ready_pod("b")], 3, False),
        ([ready_pod(deletionTimestamp="2026-03-01T11:59:31Z")], 1, False),  # the preempted pod, going
        ([marked()], 1, False),  # marked but not yet deleted: still counted Ready by the Deployment
        ([pod("p", "Running")], 1, False),  # running, not ready
        ([], 0, True),  # stopped: nothing wanted
    ],
)
def test_serving_again_is_read_from_the_pods(pods: list[Any], desired: int, expected: bool) -> None:
    assert serving_again(pods, desired) is expected


@pytest.mark.parametrize(
    ("preemption", "message"),
    [
        (
            BY_US,
            "pod demo-7d9f-abcde was preempted by the scheduler at 2026-03-01T11:59:30Z on node gpu-0, "
            "for pod team-b/urgent-5c8-xyz (InferenceService team-b/urgent, priority 1000000)",
        ),
        (
            Preemption("p", "gpu-0", AT, by="pod other/batch-job"),  # not one of ours
            "pod p was preempted by the scheduler at 2026-03-01T11:59:30Z on node gpu-0, "
            "for pod other/batch-job",
        ),
        (
            Preemption("p", "", None),  # the Event is not there (yet)
            "pod p was preempted by the scheduler, for a pod of higher priority",
        ),
    ],
)
def test_describe(preemption: Preemption, message: str) -> None:
    assert preemption.describe() == message


def stored(result: Any) -> Any:
    return make_isvc(status=result.status.model_dump(by_alias=True, exclude_none=True, mode="json"))


def test_preempted_from_the_mark_until_the_service_serves_again() -> None:
    serving = plan(
        model=gpu_model(1), observed=observe(deployment=live_deployment(ready=1), pods=(ready_pod(),))
    )
    assert condition(serving, "Preempted") is None  # never preempted: no condition

    # The pod was preempted: the service waits for GPUs again, and says why.
    waiting = plan(
        model=gpu_model(1),
        isvc=stored(serving),
        observed=observe(pods=(GPU_POD,), deployment=live_deployment(ready=0), preemption=BY_US),
    )
    assert waiting.status.phase == "WaitingForGPU"
    assert condition(waiting, "Preempted") == ("True", "PreemptionByScheduler", BY_US.describe())
    (preempted,) = [c for c in waiting.status.conditions or () if c.type == "Preempted"]
    assert preempted.last_transition_time == AT  # when the scheduler marked it, not when we heard

    # Reported: later reconciles keep it as it is, a restarted controller too (no record at all).
    still = plan(
        model=gpu_model(1),
        isvc=stored(waiting),
        observed=observe(pods=(GPU_POD,), deployment=live_deployment(ready=0)),
    )
    assert condition(still, "Preempted") == condition(waiting, "Preempted")

    # The Deployment still counts the preempted pod as ready for a moment: not over yet.
    stale = plan(
        model=gpu_model(1),
        isvc=stored(still),
        observed=observe(
            deployment=live_deployment(ready=1), pods=(ready_pod(deletionTimestamp="2026-03-01T11:59:31Z"),)
        ),
    )
    assert stale.status.phase == "Ready"
    assert condition(stale, "Preempted") == condition(waiting, "Preempted")

    # Serving again: False, with the account of the last preemption.
    back = plan(
        model=gpu_model(1),
        isvc=stored(still),
        observed=observe(deployment=live_deployment(ready=1), pods=(ready_pod(),)),
    )
    assert back.status.phase == "Ready"
    assert condition(back, "Preempted") == (
        "False",
        "Recovered",
        f"The service is Ready again; the last preemption: {BY_US.describe()}",
    )
    (settled,) = [c for c in back.status.conditions or () if c.type == "Preempted"]
    assert settled.last_transition_time == NOW


def test_a_second_preemption_while_short_updates_the_account_not_the_transition_time() -> None:
    first = plan(
        model=gpu_model(1),
        observed=observe(pods=(GPU_POD,), deployment=live_deployment(ready=0), preemption=BY_US),
    )
    later = Preemption("demo-7d9f-fghij", "gpu-1", AT + timedelta(seconds=20), by="pod team-c/x")
    second = plan(
        model=gpu_model(1),
        isvc=stored(first),
        observed=observe(pods=(GPU_POD,), deployment=live_deployment(ready=0), preemption=later),
    )
    assert condition(second, "Preempted") == ("True", "PreemptionByScheduler", later.describe())
    (kept,) = [c for c in second.status.conditions or () if c.type == "Preempted"]
    assert kept.last_transition_time == AT


def test_stopping_a_preempted_service_settles_it() -> None:
    preempted = plan(
        model=gpu_model(1),
        observed=observe(pods=(GPU_POD,), deployment=live_deployment(ready=0), preemption=BY_US),
    )
    stopped = plan(
        {"replicas": 0},
        gpu_model(1),
        isvc=make_isvc(
            {"replicas": 0}, status=preempted.status.model_dump(by_alias=True, exclude_none=True, mode="json")
        ),
        observed=observe(deployment=live_deployment(ready=0, replicas=0)),
    )
    assert stopped.status.phase == "Stopped"
    found = condition(stopped, "Preempted")
    assert (
        found is not None
        and found[:2] == ("False", "Recovered")
        and found[2].startswith("The service is Stopped")
    )
