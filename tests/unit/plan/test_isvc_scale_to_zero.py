"""Scale to zero (plan/inferenceservice/scale_to_zero.py): the sleep and wake decision on a fake
clock, then the whole planner: a sleeping service has a Deployment at 0 with the mark, no HPA, and
is Stopped with the reason ScaledToZero; a router's scale write or a request wakes it."""

from datetime import datetime, timedelta
from typing import Any

import pytest
from isvc_factories import NOW, live_deployment, live_object, make_isvc, observe
from isvc_planning import condition, plan

from llmkube.api.inferenceservice import InferenceService
from llmkube.api.meta import Condition
from llmkube.plan.inferenceservice.scale_to_zero import (
    AWAKE,
    CONDITION,
    IDLE,
    LAST_REQUEST_ANNOTATION,
    SCALE_TO_ZERO_ANNOTATION,
    SCALED_TO_ZERO,
    SLEEPING_ANNOTATION,
    WAKING,
    WOKE,
    decide,
    idle_setting,
    last_request,
    stamp,
)

MINUTE = timedelta(minutes=1)


def _condition(status: str, reason: str, at: datetime, message: str = "said before") -> Condition:
    return Condition.model_validate(
        {"type": CONDITION, "status": status, "reason": reason, "message": message, "lastTransitionTime": at}
    )


@pytest.mark.parametrize(
    ("text", "after", "problem"),
    [
        (None, None, False),
        ("15m", 900.0, False),
        ("90s", 90.0, False),
        ("1h30m", 5400.0, False),
        ("soon", None, True),
        ("0", None, True),
        ("500ms", None, True),
    ],
)
def test_the_idle_period_is_a_go_duration(text: str | None, after: float | None, problem: bool) -> None:
    setting = idle_setting({SCALE_TO_ZERO_ANNOTATION: text} if text is not None else {})
    assert setting.after == after
    assert (setting.problem is not None) == problem


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-03-01T11:58:00Z", NOW - 2 * MINUTE),
        ("2026-03-01T11:58:00+00:00", NOW - 2 * MINUTE),
        ("2026-03-01T11:58:00", None),  # no zone: not a time anyone can compare
        ("yesterday", None),
        ("", None),
    ],
)
def test_the_last_request_is_an_rfc3339_time(text: str, expected: datetime | None) -> None:
    assert last_request({LAST_REQUEST_ANNOTATION: text}) == expected


# (case, condition (status, reason, minutes ago) or None, last request minutes ago or None,
#  marked, deployment replicas, ready) -> (asleep, condition status, reason, event reason, requeue)
CASES: list[tuple[str, tuple[str, str, int] | None, int | None, bool, int, int, tuple[Any, ...]]] = [
    ("turned on: the clock starts now", None, None, False, 1, 1, (False, "False", AWAKE, None, 600.0)),
    ("turned on long after the last request", None, 60, False, 1, 1, (False, "False", AWAKE, None, 600.0)),
    (
        "awake, a request 4 minutes ago",
        ("False", AWAKE, 30),
        4,
        False,
        1,
        1,
        (False, "False", AWAKE, None, 360.0),
    ),
    (
        "awake, woken 3 minutes ago, no request since",
        ("False", AWAKE, 3),
        None,
        False,
        1,
        1,
        (False, "False", AWAKE, None, 420.0),
    ),
    (
        "idle for exactly the period",
        ("False", AWAKE, 30),
        10,
        False,
        1,
        1,
        (True, "True", IDLE, SCALED_TO_ZERO, None),
    ),
    ("idle for longer", ("False", AWAKE, 30), 25, False, 1, 1, (True, "True", IDLE, SCALED_TO_ZERO, None)),
    (
        "never a request since it was turned on",
        ("False", AWAKE, 11),
        None,
        False,
        1,
        1,
        (True, "True", IDLE, SCALED_TO_ZERO, None),
    ),
    ("asleep, nothing new", ("True", IDLE, 5), 15, True, 0, 0, (True, "True", IDLE, None, None)),
    (
        "asleep, a cache that has not seen the sleep yet",
        ("True", IDLE, 0),
        15,
        False,
        1,
        1,
        (True, "True", IDLE, None, None),
    ),
    (
        "asleep, a router scaled it",
        ("True", IDLE, 5),
        15,
        True,
        1,
        0,
        (False, "False", WAKING, WAKING, 600.0),
    ),
    (
        "asleep, a request seen after the sleep",
        ("True", IDLE, 5),
        1,
        True,
        0,
        0,
        (False, "False", WAKING, WAKING, 600.0),
    ),
    (
        "waking, no replica ready yet",
        ("False", WAKING, 1),
        1,
        False,
        1,
        0,
        (False, "False", WAKING, None, 540.0),
    ),
    (
        "waking, a replica is ready",
        ("False", WAKING, 1),
        1,
        False,
        1,
        1,
        (False, "False", AWAKE, WOKE, 540.0),
    ),
    (
        "woken but never ready, idle again",
        ("False", WAKING, 10),
        10,
        False,
        1,
        0,
        (True, "True", IDLE, SCALED_TO_ZERO, None),
    ),
]


@pytest.mark.parametrize(
    ("stored", "asked", "marked", "replicas", "ready", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_sleep_and_wake(
    stored: tuple[str, str, int] | None,
    asked: int | None,
    marked: bool,
    replicas: int,
    ready: int,
    expected: tuple[Any, ...],
) -> None:
    existing = _condition(stored[0], stored[1], NOW - stored[2] * MINUTE) if stored else None
    decided = decide(
        600.0,
        existing,
        request=NOW - asked * MINUTE if asked is not None else None,
        marked=marked,
        deployment_replicas=replicas,
        ready=ready,
        now=NOW,
    )
    asleep, status, reason, event, requeue = expected
    assert decided.asleep is asleep
    assert decided.condition is not None
    assert decided.condition[:2] == (status, reason)
    assert (decided.event.reason if decided.event else None) == event
    assert decided.requeue_after == requeue
    if asleep:
        assert decided.slept_at is not None
        assert decided.message


def test_an_unchanged_service_decides_the_same_again() -> None:
    """What it stored is what it decides next time: no status write while nothing changes."""
    awake = decide(600.0, None, request=None, marked=False, deployment_replicas=1, ready=1, now=NOW)
    assert awake.condition is not None
    again = decide(
        600.0,
        _condition(awake.condition[0], awake.condition[1], NOW, awake.condition[2]),
        request=None,
        marked=False,
        deployment_replicas=1,
        ready=1,
        now=NOW + MINUTE,
    )
    assert again.condition == awake.condition and again.event is None
    slept_at = NOW + 11 * MINUTE
    asleep = decide(
        600.0,
        _condition("False", AWAKE, NOW),
        request=None,
        marked=False,
        deployment_replicas=1,
        ready=1,
        now=slept_at,
    )
    assert asleep.condition is not None
    still = decide(
        600.0,
        _condition("True", IDLE, slept_at, asleep.condition[2]),
        request=None,
        marked=True,
        deployment_replicas=0,
        ready=0,
        now=slept_at + 3 * MINUTE,
    )
    assert still.condition == asleep.condition and still.event is None
    assert still.slept_at is not None and stamp(still.slept_at) == stamp(slept_at)


def test_off_takes_the_condition_away() -> None:
    decided = decide(
        None,
        _condition("True", IDLE, NOW),
        request=None,
        marked=True,
        deployment_replicas=0,
        ready=0,
        now=NOW,
    )
    assert decided.asleep is False and decided.condition is None


# -- the planner ---------------------------------------------------------------------------------


def _isvc(
    spec: dict[str, Any] | None = None,
    *,
    after: str = "10m",
    request: datetime | None = None,
    stored: tuple[str, str, datetime] | None = None,
) -> InferenceService:
    annotations = {SCALE_TO_ZERO_ANNOTATION: after}
    if request is not None:
        annotations[LAST_REQUEST_ANNOTATION] = stamp(request)
    status = None
    if stored is not None:
        state, reason, at = stored
        status = {
            "phase": "Stopped" if state == "True" else "Ready",
            "conditions": [
                {
                    "type": CONDITION,
                    "status": state,
                    "reason": reason,
                    "message": "m",
                    "lastTransitionTime": at,
                }
            ],
        }
    isvc = make_isvc(spec, status=status)
    return isvc.model_copy(update={"metadata": isvc.metadata.model_copy(update={"annotations": annotations})})


def _asleep_deployment(replicas: int = 0, ready: int = 0) -> dict[str, Any]:
    live = live_deployment(replicas=replicas, ready=ready)
    live["metadata"]["annotations"] = {SLEEPING_ANNOTATION: stamp(NOW - 5 * MINUTE)}
    return live


AUTOSCALING = {"autoscaling": {"minReplicas": 1, "maxReplicas": 4}}


def test_an_idle_service_sleeps_its_deployment_at_zero_and_its_hpa_gone() -> None:
    hpa = live_object("autoscaling/v2", "HorizontalPodAutoscaler")
    result = plan(
        isvc=_isvc(AUTOSCALING, request=NOW - 20 * MINUTE, stored=("False", AWAKE, NOW - 30 * MINUTE)),
        observed=observe(deployment=live_deployment(replicas=2, ready=2), hpa=hpa),
    )
    assert result.deployment is not None
    assert result.deployment["spec"]["replicas"] == 0
    assert result.deployment["metadata"]["annotations"] == {SLEEPING_ANNOTATION: stamp(NOW)}
    assert result.hpa is None
    assert [ref.kind for ref in result.deletes] == ["HorizontalPodAutoscaler"]
    assert result.status.phase == "Stopped"
    assert result.status.scheduling_status == SCALED_TO_ZERO
    assert condition(result, "Available") == ("False", SCALED_TO_ZERO, condition(result, CONDITION)[2])  # type: ignore[index]
    assert condition(result, CONDITION)[:2] == ("True", IDLE)  # type: ignore[index]
    assert [e.reason for e in result.events] == [SCALED_TO_ZERO]
    assert result.requeue_after is None


def test_a_users_replicas_zero_is_stopped_not_scaled_to_zero() -> None:
    result = plan(isvc=_isvc({"replicas": 0}), observed=observe(deployment=live_deployment(replicas=0)))
    assert result.status.phase == "Stopped"
    assert result.status.scheduling_status is None
    assert condition(result, "Available") == ("False", "Stopped", "Scaled to zero: spec.replicas is 0")
    assert condition(result, CONDITION) is None


def test_a_sleeping_service_stays_asleep_quietly() -> None:
    result = plan(
        isvc=_isvc(AUTOSCALING, request=NOW - 20 * MINUTE, stored=("True", IDLE, NOW - 5 * MINUTE)),
        observed=observe(deployment=_asleep_deployment()),
    )
    assert result.deployment is not None
    assert result.deployment["spec"]["replicas"] == 0
    assert result.deployment["metadata"]["annotations"] == {SLEEPING_ANNOTATION: stamp(NOW - 5 * MINUTE)}
    assert result.hpa is None and result.events == ()
    assert result.status.phase == "Stopped"


def test_a_routers_scale_write_wakes_it_and_the_hpa_comes_back() -> None:
    result = plan(
        isvc=_isvc(AUTOSCALING, request=NOW - 20 * MINUTE, stored=("True", IDLE, NOW - 5 * MINUTE)),
        observed=observe(deployment=_asleep_deployment(replicas=1)),
    )
    assert result.deployment is not None
    assert "replicas" not in result.deployment["spec"]  # the HPA's from now on (min 1)
    assert "annotations" not in result.deployment["metadata"]
    assert result.hpa is not None and result.hpa["spec"]["minReplicas"] == 1
    assert condition(result, CONDITION)[:2] == ("False", WAKING)  # type: ignore[index]
    assert [e.reason for e in result.events] == [WAKING]
    assert result.status.phase == "Creating"


def test_a_request_seen_first_wakes_it_without_a_scale_write() -> None:
    result = plan(
        isvc=_isvc(AUTOSCALING, request=NOW - MINUTE / 2, stored=("True", IDLE, NOW - 5 * MINUTE)),
        observed=observe(deployment=_asleep_deployment(replicas=0)),
    )
    assert result.deployment is not None
    assert result.deployment["spec"]["replicas"] == 1  # an HPA never scales a target at 0
    assert result.status.desired_replicas == 1


def test_without_autoscaling_it_wakes_to_its_replicas() -> None:
    result = plan(
        isvc=_isvc({"replicas": 2}, stored=("True", IDLE, NOW - 5 * MINUTE)),
        observed=observe(deployment=_asleep_deployment(replicas=1)),
    )
    assert result.deployment is not None
    assert result.deployment["spec"]["replicas"] == 2


def test_a_bad_idle_period_is_a_spec_warning() -> None:
    result = plan(isvc=_isvc(after="whenever"), observed=observe(deployment=live_deployment(ready=1)))
    assert condition(result, "SpecValid")[0] == "False"  # type: ignore[index]
    assert SCALE_TO_ZERO_ANNOTATION in condition(result, "SpecValid")[2]  # type: ignore[index]
    assert condition(result, CONDITION) is None
    assert result.status.phase == "Ready"
