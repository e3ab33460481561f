"""Every runtime's objects are accepted by the API server: each sample in manifests/samples/ is
planned with `plan_inference_service` against a Ready Model, and everything the plan applies is
created with server-side dry-run (`?dryRun=All`) as the controller's own identity."""

import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from e2e_support import RunningController
from llmkube_testing.rest import KubeRest, RestError, load_yaml_documents

from llmkube.api.inferenceservice import InferenceService
from llmkube.api.model import Model, ModelStatus
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.observed import ObservedState
from llmkube.plan.inferenceservice.planner import plan_inference_service
from llmkube.plan.model.source import SourceKind, cache_key, classify_source

SAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "samples"


def ready_status(source: str) -> ModelStatus:
    """What the Model controller writes for sources the workload resolves (http(s), HF repo ids)."""
    remote = classify_source(source) is SourceKind.HTTP
    return ModelStatus.model_validate(
        {"phase": "Ready", "size": "0", "cacheKey": cache_key(source) if remote else ""}
    )


def objects_of(sample: Path, namespace: str) -> tuple[Any, list[dict[str, Any]]]:
    docs = {doc["kind"]: doc for doc in load_yaml_documents(sample)}
    meta = {"namespace": namespace, "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z"}
    isvc = InferenceService.model_validate(
        {
            **docs["InferenceService"],
            "metadata": {**docs["InferenceService"]["metadata"], **meta, "uid": str(uuid.uuid4())},
        }
    )
    model = Model.model_validate({**docs["Model"], "metadata": {**docs["Model"]["metadata"], **meta}})
    model = model.model_copy(update={"status": ready_status(model.spec.source)})
    plan = plan_inference_service(isvc, model, ObservedState(now=datetime.now(UTC)), OperatorConfig())
    objects = [obj for obj in (plan.deployment, plan.service, plan.hpa, plan.cache_pvc) if obj is not None]
    return plan, objects


@pytest.mark.parametrize("sample", sorted(SAMPLES.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_planned_object_of_a_sample_is_accepted_by_the_api_server(
    operator: RunningController, full_namespace: str, sample: Path
) -> None:
    assert operator.cluster.controller_kubeconfig is not None
    as_controller = KubeRest.from_kubeconfig(operator.cluster.controller_kubeconfig)
    plan, objects = objects_of(sample, full_namespace)
    assert plan.status.phase == "Creating", [c.message for c in plan.status.conditions or []]
    kinds = [obj["kind"] for obj in objects]
    assert kinds[:2] == ["Deployment", "Service"]
    created = []
    for obj in objects:
        path = as_controller.path_for(obj["apiVersion"], obj["kind"], full_namespace)
        try:
            stored = as_controller.request("POST", path, obj, query={"dryRun": "All"})
        except RestError as error:
            pytest.fail(f"{sample.name}: the API server refused the {obj['kind']}: {error}")
        assert (stored["kind"], stored["metadata"]["name"]) == (obj["kind"], obj["metadata"]["name"])
        created.append(stored)
    # Dry run: nothing was persisted.
    admin = operator.cluster.admin()
    for obj in objects:
        assert (
            admin.get_or_none(obj["apiVersion"], obj["kind"], obj["metadata"]["name"], full_namespace) is None
        )
    # What the server would run is what was planned (no container lost, arguments intact).
    stored_containers = created[0]["spec"]["template"]["spec"]["containers"]
    planned_containers = objects[0]["spec"]["template"]["spec"]["containers"]
    assert [(c["name"], c.get("args")) for c in stored_containers] == [
        (c["name"], c.get("args")) for c in planned_containers
    ]
    # The HPA only with autoscaling; the cache claim only when an init container fills it.
    docs = {doc["kind"]: doc for doc in load_yaml_documents(sample)}
    spec = docs["InferenceService"]["spec"]
    cached = classify_source(docs["Model"]["spec"]["source"]) is SourceKind.HTTP and not spec.get(
        "skipModelInit"
    )
    expected = {"Deployment", "Service"}
    expected |= {"HorizontalPodAutoscaler"} if spec.get("autoscaling") else set()
    expected |= {"PersistentVolumeClaim"} if cached else set()
    assert set(kinds) == expected
