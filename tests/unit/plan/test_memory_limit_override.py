"""The memory limit is the memory request by default (plan/inferenceservice/hardening.py); the annotation
inference.llmkube.dev/memory-limit lets the user lift it (`none`) or raise it, and a value the API
server would refuse (below the request) or cannot read fails the service naming the annotation."""

from typing import Any

import pytest
from isvc_factories import make_isvc
from isvc_planning import plan

from llmkube.plan.inferenceservice.hardening import MEMORY_LIMIT_ANNOTATION

PATH = f"metadata.annotations[{MEMORY_LIMIT_ANNOTATION}]"


def planned(resources: dict[str, Any] | None, annotation: str | None) -> Any:
    isvc = make_isvc({"resources": resources} if resources is not None else None)
    if annotation is not None:
        isvc.metadata.annotations = {MEMORY_LIMIT_ANNOTATION: annotation}
    return plan(isvc=isvc)


def resources_of(result: Any) -> dict[str, Any] | None:
    assert result.deployment is not None, result.status
    container = result.deployment["spec"]["template"]["spec"]["containers"][0]
    found: dict[str, Any] | None = container.get("resources")
    return found


@pytest.mark.parametrize(
    ("resources", "annotation", "expected"),
    [
        # the default: limit = request
        ({"memory": "4Gi"}, None, {"requests": {"memory": "4Gi"}, "limits": {"memory": "4Gi"}}),
        # lifted
        ({"memory": "4Gi"}, "none", {"requests": {"memory": "4Gi"}}),
        ({"memory": "4Gi"}, " None ", {"requests": {"memory": "4Gi"}}),
        # raised (burstable), or equal
        ({"memory": "4Gi"}, "8Gi", {"requests": {"memory": "4Gi"}, "limits": {"memory": "8Gi"}}),
        ({"memory": "4Gi"}, "4096Mi", {"requests": {"memory": "4Gi"}, "limits": {"memory": "4Gi"}}),
        # hostMemory is the request when set
        (
            {"memory": "4Gi", "hostMemory": "32Gi"},
            "48Gi",
            {"requests": {"memory": "32Gi"}, "limits": {"memory": "48Gi"}},
        ),
        # without a request: no limit by default, the annotation's limit alone if asked for
        (None, None, None),
        (None, "2Gi", {"limits": {"memory": "2Gi"}}),
    ],
)
def test_the_memory_limit_follows_the_request_unless_the_annotation_says(
    resources: dict[str, Any] | None, annotation: str | None, expected: dict[str, Any] | None
) -> None:
    assert resources_of(planned(resources, annotation)) == expected


@pytest.mark.parametrize(
    ("resources", "annotation", "message"),
    [
        (
            {"memory": "4Gi"},
            "2Gi",
            '"2Gi" is less than the memory request "4Gi": the limit must be at least the request',
        ),
        ({"hostMemory": "32Gi"}, "16Gi", '"16Gi" is less than the memory request "32Gi"'),
        ({"memory": "4Gi"}, "lots", '"lots" is neither "none" nor a quantity'),
        (None, "0", '"0" must be more than 0'),
        (None, "-1Gi", '"-1Gi" must be more than 0'),
    ],
)
def test_an_unusable_memory_limit_fails_the_service_naming_the_annotation(
    resources: dict[str, Any] | None, annotation: str, message: str
) -> None:
    result = planned(resources, annotation)
    assert result.status.phase == "Failed"
    assert result.deployment is None
    degraded = {c.type: c for c in result.status.conditions or []}["Degraded"]
    assert (degraded.status, degraded.reason) == ("True", "InvalidSpec")
    assert degraded.message.startswith(f"{PATH}: {message}"), degraded.message
    assert any(event.reason == "InvalidSpec" and PATH in event.message for event in result.events)
