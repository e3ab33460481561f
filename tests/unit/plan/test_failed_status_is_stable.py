"""While an apply keeps failing, each retry plans again and reports the failure
again; the status it writes must be the one already stored (no write, no new transition time)."""

from datetime import timedelta

from isvc_factories import NOW, live_deployment, make_isvc, observe, pod
from isvc_planning import plan

from llmkube.api.inferenceservice import InferenceServiceStatus
from llmkube.plan.inferenceservice.status import failed_status, status_changed

ERROR = "API request failed: 422 Invalid: the Deployment was refused"


def retry(stored: InferenceServiceStatus | None, minutes: int, **observed: object) -> InferenceServiceStatus:
    """One reconcile that fails to apply: plan from the stored status, then report the failure."""
    now = NOW + timedelta(minutes=minutes)
    planned = plan(
        isvc=make_isvc({}, status=stored.to_json() if stored else None), observed=observe(now=now, **observed)
    ).status
    return failed_status(planned, ERROR, previous=stored, generation=3, now=now)


def transitions(status: InferenceServiceStatus) -> dict[str, object]:
    return {c.type: c.last_transition_time for c in status.conditions or ()}


def test_a_failure_that_repeats_writes_nothing_new() -> None:
    first = retry(None, 0)
    assert first.phase == "Failed"
    second = retry(first, 1)
    third = retry(second, 5)
    assert not status_changed(first, second) and not status_changed(second, third)
    assert transitions(third) == transitions(first)


def test_a_failure_of_a_running_service_keeps_its_transition_times() -> None:
    running = {"deployment": live_deployment(ready=1), "pods": (pod("a"),)}
    ready = plan(observed=observe(**running)).status
    assert ready.phase == "Ready"
    first = retry(ready, 1, **running)
    later = retry(first, 9, **running)
    assert not status_changed(first, later)
    degraded = {c.type: c for c in later.conditions or ()}["Degraded"]
    assert (degraded.status, degraded.last_transition_time) == ("True", NOW + timedelta(minutes=1))


def test_recovery_after_the_failure_is_one_transition() -> None:
    failed = retry(retry(None, 0), 1)
    healed = plan(
        isvc=make_isvc({}, status=failed.to_json()), observed=observe(now=NOW + timedelta(minutes=2))
    ).status
    assert healed.phase == "Creating"
    assert {c.type: c.status for c in healed.conditions or ()}["Degraded"] == "False"
