"""The summary conditions of an InferenceService: Ready only when every replica serves the current
spec, Reconciling and Stalled for kstatus (plan/conditions/summary.py,
plan/inferenceservice/rollout.py), through transitions.
What tools make of them is tested with the tools' own code: tests/gitops (Flux's kstatus and CEL
evaluator) and tests/unit/gitops (Argo CD's Lua checks)."""

from datetime import timedelta
from typing import Any

import pytest
from isvc_factories import NOW, gpu_model, live_deployment, make_isvc, make_model, observe, pod
from isvc_planning import condition, plan

from llmkube.plan.inferenceservice.planner import InferenceServicePlan
from llmkube.plan.inferenceservice.rollout import Rollout, rollout_of
from llmkube.plan.inferenceservice.status import READY_MESSAGE, with_rollout

GPU_POD = pod("demo-1", "Pending", unschedulable="0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")


def summary(result: InferenceServicePlan) -> dict[str, tuple[str, str] | None]:
    return {
        t: (lambda c: c[:2] if c else None)(condition(result, t)) for t in ("Ready", "Reconciling", "Stalled")
    }


# (case, spec, model, observed facts, phase, Ready, Reconciling, Stalled)
CASES: list[tuple[str, dict[str, Any], Any, dict[str, Any], str, Any, Any, Any]] = [
    (
        "serving the current spec",
        {},
        make_model(),
        {"deployment": live_deployment(ready=1)},
        "Ready",
        ("True", "Ready"),
        ("False", "Ready"),
        None,
    ),
    (
        "new template not yet observed by the Deployment controller: old pods still serve",
        {},
        make_model(),
        {"deployment": live_deployment(ready=1, generation=3, observed_generation=2)},
        "Ready",  # the reference's phase counts ready pods, old ones included
        ("False", "RollingOut"),
        ("True", "RollingOut"),
        None,
    ),
    (
        "rolling out: the new pod is not updated everywhere, an old one still runs",
        {"replicas": 2},
        make_model(),
        {"deployment": live_deployment(ready=2, replicas=2, updated=1, pods=3)},
        "Ready",
        ("False", "RollingOut"),
        ("True", "RollingOut"),
        None,
    ),
    (
        "partly ready",
        {"replicas": 3},
        make_model(),
        {"deployment": live_deployment(ready=1, replicas=3, updated=3, pods=3)},
        "Progressing",
        ("False", "Progressing"),
        ("True", "Progressing"),
        None,
    ),
    (
        "creating",
        {},
        make_model(),
        {"deployment": live_deployment(ready=0)},
        "Creating",
        ("False", "Creating"),
        ("True", "Creating"),
        None,
    ),
    (
        "waiting for GPUs",
        {},
        gpu_model(1),
        {"pods": (GPU_POD,)},
        "WaitingForGPU",
        ("False", "WaitingForGPU"),
        ("True", "WaitingForGPU"),
        None,
    ),
    (
        "waiting for the Model",
        {},
        make_model(phase="Copying"),
        {},
        "Pending",
        ("False", "Pending"),
        ("True", "Pending"),
        None,
    ),
    (
        "stopped on purpose",
        {"replicas": 0},
        make_model(),
        {"deployment": live_deployment(ready=0, replicas=0)},
        "Stopped",
        ("True", "Stopped"),  # what the spec asks: zero replicas
        ("False", "Stopped"),
        None,
    ),
    (
        "failed: the Model is missing",
        {},
        None,
        {},
        "Failed",
        ("False", "ModelNotFound"),  # the summary carries the reason Degraded gives
        ("False", "ModelNotFound"),
        ("True", "ModelNotFound"),
    ),
    (
        "failed: invalid spec",
        {"resources": {"memory": "lots"}},
        make_model(),
        {},
        "Failed",
        ("False", "InvalidSpec"),
        ("False", "InvalidSpec"),
        ("True", "InvalidSpec"),
    ),
]


@pytest.mark.parametrize(
    ("spec", "model", "facts", "phase", "ready", "reconciling", "stalled"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_summary_conditions_of_every_phase(
    spec: dict[str, Any],
    model: Any,
    facts: dict[str, Any],
    phase: str,
    ready: Any,
    reconciling: Any,
    stalled: Any,
) -> None:
    result = plan(spec, model, observed=observe(**facts))
    assert result.status.phase == phase
    assert summary(result) == {"Ready": ready, "Reconciling": reconciling, "Stalled": stalled}
    ready_condition = next(c for c in result.status.conditions or () if c.type == "Ready")
    assert ready_condition.observed_generation == 3  # the generation make_isvc gives


def test_messages_say_what_is_under_way() -> None:
    rolling = plan(
        {"replicas": 2}, observed=observe(deployment=live_deployment(ready=2, replicas=2, updated=1, pods=3))
    )
    assert condition(rolling, "Ready") == (
        "False",
        "RollingOut",
        "Rolling out the current spec: 1/2 replicas updated, 2 older still running",
    )
    unseen = plan(observed=observe(deployment=live_deployment(ready=1, generation=4, observed_generation=3)))
    assert condition(unseen, "Ready") == (
        "False",
        "RollingOut",
        "Rolling out the current spec: the Deployment controller has not observed it yet",
    )
    ready = plan(observed=observe(deployment=live_deployment(ready=1)))
    assert condition(ready, "Ready") == ("True", "Ready", READY_MESSAGE)
    creating = plan(observed=observe(deployment=live_deployment(ready=0)))
    assert condition(creating, "Ready") == ("False", "Creating", "No replica is ready yet (0/1)")
    missing = plan(model=None)
    assert condition(missing, "Ready") == (
        "False",
        "ModelNotFound",
        'Model "tiny" not found in namespace "ai"',
    )


def test_rollout_of_a_deployment() -> None:
    assert rollout_of(None) is None
    assert rollout_of(live_deployment(ready=2, replicas=2)) == Rollout(observed=True, updated=2, total=2)
    lagging = live_deployment(ready=1, generation=5, observed_generation=4)
    assert rollout_of(lagging) == Rollout(observed=False, updated=1, total=1)
    fresh = live_deployment(ready=None, generation=1, observed_generation=None)  # just created
    assert rollout_of(fresh) == Rollout(observed=False, updated=0, total=0)
    assert not Rollout(observed=True, updated=2, total=3).complete(2)  # an old pod still runs
    assert not Rollout(observed=True, updated=1, total=1).complete(2)
    assert Rollout(observed=True, updated=2, total=2).complete(2)


# -- transitions: a running service changed ----------------------------------------------------


def test_a_spec_change_takes_ready_away_until_the_new_template_serves_everywhere() -> None:
    """Generation 3 serves; the user changes the spec (generation 4); the controller applies the new
    template (the apply returns the Deployment with a new generation, not yet observed); the
    Deployment controller rolls it out; Ready comes back for generation 4 only then."""
    serving = plan(observed=observe(deployment=live_deployment(ready=1)))
    assert condition(serving, "Ready") == ("True", "Ready", READY_MESSAGE)
    first_ready = next(c for c in serving.status.conditions or () if c.type == "Ready")

    changed = make_isvc({"contextSize": 8192}, generation=4, status=serving.status.to_json())
    planned = plan(
        isvc=changed, observed=observe(deployment=live_deployment(ready=1), now=NOW + timedelta(minutes=1))
    )
    assert condition(planned, "Ready") == (
        "True",
        "Ready",
        READY_MESSAGE,
    )  # the cache still shows the old one
    applied = live_deployment(ready=1, generation=3, observed_generation=2)  # what the apply returned
    after_apply = with_rollout(
        planned.status, rollout_of(applied), generation=4, now=NOW + timedelta(minutes=1)
    )
    ready = next(c for c in after_apply.conditions or () if c.type == "Ready")
    assert (ready.status, ready.reason, ready.observed_generation) == ("False", "RollingOut", 4)
    assert ready.last_transition_time == NOW + timedelta(minutes=1)
    reconciling = next(c for c in after_apply.conditions or () if c.type == "Reconciling")
    assert reconciling.status == "True"
    assert after_apply.phase == "Ready"  # the phase keeps the reference's meaning

    midway = make_isvc({"contextSize": 8192}, generation=4, status=after_apply.to_json())
    rolling = plan(
        isvc=midway,
        observed=observe(
            deployment=live_deployment(ready=1, generation=3, observed_generation=3, updated=1, pods=2),
            now=NOW + timedelta(minutes=2),
        ),
    )
    assert condition(rolling, "Ready") == (
        "False",
        "RollingOut",
        "Rolling out the current spec: 1/1 replicas updated, 1 older still running",
    )

    done = make_isvc({"contextSize": 8192}, generation=4, status=rolling.status.to_json())
    served = plan(
        isvc=done,
        observed=observe(
            deployment=live_deployment(ready=1, generation=3, observed_generation=3),
            now=NOW + timedelta(minutes=3),
        ),
    )
    ready = next(c for c in served.status.conditions or () if c.type == "Ready")
    assert (ready.status, ready.observed_generation, ready.last_transition_time) == (
        "True",
        4,
        NOW + timedelta(minutes=3),
    )
    assert ready.last_transition_time != first_ready.last_transition_time


def test_stalled_turns_false_when_the_failure_is_gone_and_stays() -> None:
    failed = plan(model=None)
    assert condition(failed, "Stalled") == (
        "True",
        "ModelNotFound",
        'Model "tiny" not found in namespace "ai"',
    )
    recovered = plan(
        isvc=make_isvc(status=failed.status.to_json()),
        observed=observe(deployment=live_deployment(ready=1), now=NOW + timedelta(minutes=1)),
    )
    assert condition(recovered, "Stalled") == (
        "False",
        "Recovered",
        f"No longer failing: {READY_MESSAGE}",
    )
    again = plan(
        isvc=make_isvc(status=recovered.status.to_json()),
        observed=observe(deployment=live_deployment(ready=1), now=NOW + timedelta(minutes=2)),
    )
    assert again.status.model_dump(exclude={"last_updated"}) == recovered.status.model_dump(
        exclude={"last_updated"}
    )


def test_a_metal_service_is_ready_by_its_endpoints() -> None:
    """No Deployment of ours: Ready follows the phase (the host agent's endpoints)."""
    metal = make_model(hardware={"accelerator": "metal"})
    waiting = plan(model=metal)
    assert condition(waiting, "Ready") is not None
    assert condition(waiting, "Ready")[:2] == ("False", waiting.status.phase)  # type: ignore[index]
