"""The controller's verdict on a metal service's spec (plan/inferenceservice/agent_verdict.py): the
condition its host agents read before they start anything, through the changes a tenant makes."""

from typing import Any

import pytest
from isvc_factories import make_isvc, make_model
from isvc_planning import condition, plan

from llmkube.api.inferenceservice import InferenceService
from llmkube.plan.inferenceservice.agent_verdict import verdict_of
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.tenancy import TenancyPolicy

METAL = make_model(hardware={"accelerator": "metal"})


def judged(
    spec: dict[str, Any], *, status: dict[str, Any] | None = None, generation: int = 3
) -> InferenceService:
    """The service with the status the controller's plan gives it (as a reconcile would write it)."""
    isvc = make_isvc(spec, status=status, generation=generation)
    result = plan(isvc=isvc, model=METAL, config=OperatorConfig(tenancy=TenancyPolicy()))
    return make_isvc(spec, status=result.status.to_json(), generation=generation)


def test_an_allowed_spec_is_accepted_for_its_generation_with_its_priority() -> None:
    service = judged({"priorityClassName": "llmkube-high"})
    assert condition(plan(isvc=service, model=METAL), "Accepted")[:2] == ("True", "Accepted")  # type: ignore[index]
    verdict = verdict_of(service)
    assert verdict.accepted is True


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ({"priorityClassName": "system-node-critical"}, "PolicyViolation"),
        ({"endpoint": {"type": "LoadBalancer"}}, "PolicyViolation"),
        ({"resources": {"memory": "lots"}}, "InvalidSpec"),
    ],
)
def test_a_refused_spec_is_refused_for_its_generation(spec: dict[str, Any], reason: str) -> None:
    service = judged(spec)
    verdict = verdict_of(service)
    assert verdict.accepted is False
    assert verdict.reason == reason
    assert verdict.priority == 0  # never the refused class's value
    assert verdict.message


def test_an_edit_is_not_served_before_it_is_judged() -> None:
    """Accepted at generation 3; the tenant edits the spec (generation 4): until the controller
    has judged the new spec, the verdict says nothing about it."""
    accepted = judged({})
    edited = make_isvc(
        {"priorityClassName": "system-node-critical"}, status=accepted.status.to_json(), generation=4
    )
    assert verdict_of(edited).accepted is None
    refused = judged(
        {"priorityClassName": "system-node-critical"}, status=accepted.status.to_json(), generation=4
    )
    assert verdict_of(refused).accepted is False
    again = judged({}, status=refused.status.to_json(), generation=5)
    assert verdict_of(again).accepted is True


def test_a_service_moved_into_the_cluster_loses_the_verdict() -> None:
    metal = judged({})
    in_cluster = plan(isvc=metal, model=make_model())
    assert condition(in_cluster, "Accepted") is None
