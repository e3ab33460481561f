"""Drain before a pod stops (plan/inferenceservice/drain.py): the annotations, the preStop hook and
grace period a drained pod template carries, the Service held during a Recreate drain, and the
Draining condition read from the pods."""

from datetime import timedelta
from typing import Any

import pytest
from isvc_factories import NOW, gpu_model, make_isvc, observe
from isvc_planning import condition, container, plan, pod_spec

from llmkube.api.base import KubeObject
from llmkube.api.inferenceservice import InferenceService
from llmkube.plan.inferenceservice.drain import (
    DRAIN_TIMEOUT_ANNOTATION,
    DRAINING,
    HOLD_LABEL,
    HOOK_SCRIPT,
    ROLLOUT_ANNOTATION,
    STOP_SECONDS,
    DrainHook,
    DrainPolicy,
    drain_hook,
    drain_policy,
)
from llmkube.plan.inferenceservice.names import selector_labels

TIMEOUT_PATH = f"metadata.annotations[{DRAIN_TIMEOUT_ANNOTATION}]"
ROLLOUT_PATH = f"metadata.annotations[{ROLLOUT_ANNOTATION}]"


@pytest.mark.parametrize(
    ("annotations", "policy"),
    [
        (None, DrainPolicy(enabled=False)),
        ({ROLLOUT_ANNOTATION: "drain"}, DrainPolicy(enabled=True)),
        ({ROLLOUT_ANNOTATION: " Drain "}, DrainPolicy(enabled=True)),
        ({ROLLOUT_ANNOTATION: "immediate"}, DrainPolicy(enabled=False)),
        ({ROLLOUT_ANNOTATION: "drain", DRAIN_TIMEOUT_ANNOTATION: "90"}, DrainPolicy(True, 90)),
        ({ROLLOUT_ANNOTATION: "drain", DRAIN_TIMEOUT_ANNOTATION: "90s"}, DrainPolicy(True, 90)),
        ({ROLLOUT_ANNOTATION: "drain", DRAIN_TIMEOUT_ANNOTATION: "2.5m"}, DrainPolicy(True, 150)),
        ({ROLLOUT_ANNOTATION: "drain", DRAIN_TIMEOUT_ANNOTATION: "0.2"}, DrainPolicy(True, 1)),
        ({ROLLOUT_ANNOTATION: "drain", DRAIN_TIMEOUT_ANNOTATION: "1h"}, DrainPolicy(True, 3600)),
        (
            {ROLLOUT_ANNOTATION: "drain", DRAIN_TIMEOUT_ANNOTATION: "2h"},
            DrainPolicy(True, 3600, ((TIMEOUT_PATH, '"2h" is more than 3600 s: 3600 s applies'),)),
        ),
        (
            {ROLLOUT_ANNOTATION: "drain", DRAIN_TIMEOUT_ANNOTATION: "soon"},
            DrainPolicy(
                True,
                None,
                ((TIMEOUT_PATH, '"soon" is not a duration like 300, 90s, 5m or 1h: the default applies'),),
            ),
        ),
        (
            {ROLLOUT_ANNOTATION: "drain", DRAIN_TIMEOUT_ANNOTATION: "0"},
            DrainPolicy(
                True,
                None,
                ((TIMEOUT_PATH, '"0" is not a duration like 300, 90s, 5m or 1h: the default applies'),),
            ),
        ),
        (
            {ROLLOUT_ANNOTATION: "yes"},
            DrainPolicy(
                False,
                None,
                ((ROLLOUT_PATH, '"yes" is neither "drain" nor "immediate": pods are not drained'),),
            ),
        ),
    ],
)
def test_drain_policy(annotations: dict[str, str] | None, policy: DrainPolicy) -> None:
    assert drain_policy(annotations) == policy


@pytest.mark.parametrize(
    ("policy", "strategy", "metrics", "hook"),
    [
        (DrainPolicy(False), "Recreate", ("a",), None),
        (DrainPolicy(True), "Recreate", (), None),  # nothing to read: no hook
        (DrainPolicy(True), "Recreate", ("a", "b"), DrainHook(120, 5, 8080, ("a", "b"))),
        (DrainPolicy(True), "RollingUpdate", ("a",), DrainHook(300, 2, 8080, ("a",))),
        (DrainPolicy(True, 45), "RollingUpdate", ("a",), DrainHook(45, 2, 8080, ("a",))),
        (DrainPolicy(True, 45), "Recreate", ("a",), DrainHook(45, 5, 8080, ("a",))),
    ],
)
def test_drain_hook(
    policy: DrainPolicy, strategy: Any, metrics: tuple[str, ...], hook: DrainHook | None
) -> None:
    assert drain_hook(policy, strategy, 8080, metrics) == hook


def drained(
    spec: dict[str, Any] | None = None, annotations: dict[str, str] | None = None, **kw: Any
) -> InferenceService:
    isvc = make_isvc(spec, **kw)
    given = {ROLLOUT_ANNOTATION: "drain"} if annotations is None else annotations
    return isvc.model_copy(update={"metadata": isvc.metadata.model_copy(update={"annotations": given})})


def test_a_drained_llamacpp_pod_carries_the_hook_and_its_grace() -> None:
    result = plan(isvc=drained(annotations={ROLLOUT_ANNOTATION: "drain", DRAIN_TIMEOUT_ANNOTATION: "60s"}))
    assert container(result)["lifecycle"] == {
        "preStop": {
            "exec": {
                "command": [
                    "/bin/sh",
                    "-c",
                    HOOK_SCRIPT,
                    "llmkube-drain",
                    "8080",
                    "60",
                    "2",
                    "llamacpp:requests_processing",
                    "llamacpp:requests_deferred",
                ]
            }
        }
    }
    assert pod_spec(result)["terminationGracePeriodSeconds"] == 2 + 60 + STOP_SECONDS
    assert [event for event in result.events if event.reason == "IgnoredSetting"] == []


@pytest.mark.parametrize(
    ("spec", "port", "metrics"),
    [
        ({"runtime": "vllm"}, "8000", ["vllm:num_requests_running", "vllm:num_requests_waiting"]),
        ({"runtime": "tgi"}, "80", ["tgi_batch_current_size", "tgi_queue_size"]),
        ({"containerPort": 9000}, "9000", ["llamacpp:requests_processing", "llamacpp:requests_deferred"]),
    ],
)
def test_the_hook_reads_each_runtimes_own_gauges_on_its_port(
    spec: dict[str, Any], port: str, metrics: list[str]
) -> None:
    command = container(plan(isvc=drained(spec)))["lifecycle"]["preStop"]["exec"]["command"]
    assert command[4] == port and command[7:] == metrics


def test_a_gpu_service_drains_with_the_recreate_defaults() -> None:
    result = plan(isvc=drained(), model=gpu_model())
    assert result.deployment is not None and result.deployment["spec"]["strategy"] == {"type": "Recreate"}
    command = container(result)["lifecycle"]["preStop"]["exec"]["command"]
    assert command[5:7] == ["120", "5"]
    assert pod_spec(result)["terminationGracePeriodSeconds"] == 5 + 120 + STOP_SECONDS


@pytest.mark.parametrize(
    "annotations", [{}, {ROLLOUT_ANNOTATION: "immediate"}, {ROLLOUT_ANNOTATION: "maybe"}]
)
def test_without_the_drain_the_pod_template_is_as_before(annotations: dict[str, str]) -> None:
    before = plan()
    after = plan(isvc=drained(annotations=annotations))
    assert after.deployment == before.deployment
    assert "lifecycle" not in container(after) and "terminationGracePeriodSeconds" not in pod_spec(after)


@pytest.mark.parametrize(
    ("spec", "annotations", "message"),
    [
        (
            {},
            {ROLLOUT_ANNOTATION: "maybe"},
            f'{ROLLOUT_PATH}: "maybe" is neither "drain" nor "immediate": pods are not drained',
        ),
        (
            {},
            {ROLLOUT_ANNOTATION: "drain", DRAIN_TIMEOUT_ANNOTATION: "-3"},
            f'{TIMEOUT_PATH}: "-3" is not a duration like 300, 90s, 5m or 1h: the default applies',
        ),
        (
            {"runtime": "generic", "image": "example/server:1"},
            {ROLLOUT_ANNOTATION: "drain"},
            f'{ROLLOUT_PATH}: runtime "generic" exports no count of requests in flight: '
            "its pods are not drained",
        ),
    ],
)
def test_annotations_that_do_nothing_are_warnings(
    spec: dict[str, Any], annotations: dict[str, str], message: str
) -> None:
    result = plan(isvc=drained(spec, annotations))
    spec_valid = condition(result, "SpecValid")
    assert spec_valid is not None and spec_valid[0] == "False" and message in spec_valid[2]
    assert any(event.reason == "IgnoredSetting" and message in event.message for event in result.events)
    assert result.deployment is not None  # planning goes on


def running_pod(name: str, *, deleted_at: Any = None, running: bool = True) -> KubeObject:
    metadata: dict[str, Any] = {"name": name, "namespace": "ai", "labels": {"app": "demo"}}
    if deleted_at is not None:
        metadata["deletionTimestamp"] = deleted_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    state = {"running": {"startedAt": "2026-03-01T11:00:00Z"}} if running else {"terminated": {"exitCode": 0}}
    return {
        "metadata": metadata,
        "status": {"phase": "Running", "containerStatuses": [{"name": "llama-server", "state": state}]},
    }


GRACE = 2 + 300 + STOP_SECONDS  # a CPU service's default drain


def test_a_rolling_drain_in_progress_is_a_condition_an_event_and_a_look_at_the_deadline() -> None:
    # Deleted 10 s ago: its hook gives up at deletion + settle + timeout.
    deleted_at = NOW - timedelta(seconds=10) + timedelta(seconds=GRACE)
    pods = (running_pod("demo-new"), running_pod("demo-old", deleted_at=deleted_at))
    result = plan(isvc=drained(), observed=observe(pods=pods))
    deadline = "2026-03-01T12:04:52Z"  # NOW - 10 s + 2 s + 300 s
    message = (
        f"demo-old finishes the requests it holds before stopping, at the latest at {deadline}; "
        "new requests go to the new pods"
    )
    assert condition(result, DRAINING) == ("True", "WaitingForRequests", message)
    assert [(e.type, e.reason, e.message) for e in result.events if e.condition == DRAINING] == [
        ("Normal", "DrainStarted", message)
    ]
    assert result.requeue_after == pytest.approx(292.5)
    # A rolling drain leaves the Service alone: the new pods take the new requests.
    assert result.service is not None and HOLD_LABEL not in result.service["spec"]["selector"]


def test_a_recreate_drain_holds_the_service_until_the_old_pods_are_gone() -> None:
    grace = 5 + 120 + STOP_SECONDS
    deleted_at = NOW + timedelta(seconds=grace)  # deleted just now
    result = plan(
        isvc=drained(),
        model=gpu_model(),
        observed=observe(pods=(running_pod("demo-old", deleted_at=deleted_at),)),
    )
    assert result.service is not None
    assert result.service["spec"]["selector"] == {**selector_labels("demo"), HOLD_LABEL: "holding"}
    drained_condition = condition(result, DRAINING)
    assert drained_condition is not None and drained_condition[0] == "True"
    assert "new requests are refused until the new pod serves (a router retries them)" in drained_condition[2]
    # The old pod is gone: the Service selects pods again.
    after = plan(
        isvc=drained(status=result.status.model_dump(by_alias=True, mode="json")),
        model=gpu_model(),
        observed=observe(pods=()),
    )
    assert after.service is not None and after.service["spec"]["selector"] == selector_labels("demo")
    assert condition(after, DRAINING) == (
        "False",
        "Drained",
        "The old pods finished their requests before they stopped",
    )


def test_a_pod_still_there_at_its_deadline_was_cut_by_the_timeout() -> None:
    deleted_at = NOW - timedelta(seconds=303) + timedelta(seconds=GRACE)  # its hook gave up 1 s ago
    pods = (running_pod("demo-new"), running_pod("demo-old", deleted_at=deleted_at))
    result = plan(isvc=drained(), observed=observe(pods=pods))
    message = (
        "The drain's timeout (300 s) passed with demo-old still holding requests: the server is stopped now"
    )
    assert condition(result, DRAINING) == ("True", "DrainTimedOut", message)
    assert [(e.type, e.reason) for e in result.events if e.condition == DRAINING] == [
        ("Warning", "DrainTimedOut")
    ]
    after = plan(
        isvc=drained(status=result.status.model_dump(by_alias=True, mode="json")),
        observed=observe(pods=pods[:1]),
    )
    assert condition(after, DRAINING) == (
        "False",
        "DrainTimedOut",
        "The last drain was cut by its timeout: see the DrainTimedOut event",
    )
    # Announced once: the stored condition already says it.
    again = plan(
        isvc=drained(status=result.status.model_dump(by_alias=True, mode="json")), observed=observe(pods=pods)
    )
    assert [e for e in again.events if e.condition == DRAINING] == []


@pytest.mark.parametrize(
    ("annotations", "pods"),
    [
        # No drain asked: a pod being deleted is no drain of ours.
        ({}, (running_pod("demo-old", deleted_at=NOW + timedelta(seconds=30)),)),
        # A deleted pod whose server has stopped is no longer draining.
        (None, (running_pod("demo-old", deleted_at=NOW + timedelta(seconds=30), running=False),)),
        # Nothing deleted.
        (None, (running_pod("demo"),)),
    ],
)
def test_no_draining_condition_without_a_drain(
    annotations: dict[str, str] | None, pods: tuple[KubeObject, ...]
) -> None:
    result = plan(isvc=drained(annotations=annotations), observed=observe(pods=pods))
    assert condition(result, DRAINING) is None
    assert not [e for e in result.events if e.condition == DRAINING]
