"""Running the whole planner from small wire-form documents, and reading the result."""

from typing import Any

from isvc_factories import make_isvc, make_model, observe

from llmkube.api.base import KubeObject
from llmkube.api.inferenceservice import InferenceService
from llmkube.api.model import Model
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.observed import ObservedState
from llmkube.plan.inferenceservice.planner import InferenceServicePlan, plan_inference_service


class _DefaultModel:
    """Marker: "the usual Ready Model"; pass None for a missing Model."""


DEFAULT_MODEL = _DefaultModel()


def plan(
    spec: dict[str, Any] | None = None,
    model: Model | _DefaultModel | None = DEFAULT_MODEL,
    *,
    observed: ObservedState | None = None,
    config: OperatorConfig | None = None,
    isvc: InferenceService | None = None,
) -> InferenceServicePlan:
    return plan_inference_service(
        isvc or make_isvc(spec),
        make_model() if isinstance(model, _DefaultModel) else model,
        observed or observe(),
        config or OperatorConfig(),
    )


def container(result: InferenceServicePlan) -> KubeObject:
    assert result.deployment is not None
    containers: list[KubeObject] = result.deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def pod_spec(result: InferenceServicePlan) -> KubeObject:
    assert result.deployment is not None
    spec: KubeObject = result.deployment["spec"]["template"]["spec"]
    return spec


def args(result: InferenceServicePlan) -> list[str]:
    value: list[str] = container(result).get("args", [])
    return value


def env_names(result: InferenceServicePlan) -> list[str]:
    return [e["name"] for e in container(result).get("env", [])]


def condition(result: InferenceServicePlan, type_: str) -> tuple[str, str, str] | None:
    for c in result.status.conditions or []:
        if c.type == type_:
            return (c.status, c.reason, c.message)
    return None
