"""The reference operator's v0.9.19 samples that use the v0.9 fields (tests/reference_samples/),
planned as they are: the Deployment, Service and HPA its docs describe for each, and the status."""

from pathlib import Path
from typing import Any

import pytest
import yaml
from isvc_factories import NOW, UID
from isvc_planning import condition

from llmkube.api.inferenceservice import InferenceService
from llmkube.api.model import Model
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.images import DEFAULT_RUNTIME_IMAGES
from llmkube.plan.inferenceservice.observed import ObservedState
from llmkube.plan.inferenceservice.planner import InferenceServicePlan, plan_inference_service

SAMPLES = Path(__file__).resolve().parents[2] / "reference_samples"
# The ephemeral-cache sample names the reference's basic sample Model
# (config/samples/inference_v1alpha1_model.yaml).
SAMPLE_MODEL = {
    "metadata": {"name": "model-sample"},
    "spec": {"source": "https://example.com/tinyllama.gguf"},
}


def planned(sample: str) -> tuple[dict[str, Any], InferenceServicePlan]:
    docs = {d["kind"]: d for d in yaml.safe_load_all((SAMPLES / sample).read_text()) if d}
    meta = {"namespace": "default", "generation": 1, "uid": UID, "creationTimestamp": "2026-01-01T00:00:00Z"}
    service = docs["InferenceService"]
    isvc = InferenceService.model_validate({**service, "metadata": {**service["metadata"], **meta}})
    model_doc = docs.get("Model", SAMPLE_MODEL)
    model = Model.model_validate(
        {
            **model_doc,
            "metadata": {**model_doc["metadata"], "namespace": "default", "generation": 1},
            "status": {"phase": "Ready", "cacheKey": "0123456789abcdef", "observedGeneration": 1},
        }
    )
    return service, plan_inference_service(isvc, model, ObservedState(now=NOW), OperatorConfig())


def main(result: InferenceServicePlan) -> dict[str, Any]:
    assert result.deployment is not None
    container: dict[str, Any] = result.deployment["spec"]["template"]["spec"]["containers"][0]
    return container


def test_every_sample_round_trips_through_the_types() -> None:
    for path in sorted(SAMPLES.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                kind = {"InferenceService": InferenceService, "Model": Model}[doc["kind"]]
                assert kind.model_validate(doc).to_json() == doc, path.name


def test_ephemeral_cache_downloads_into_a_bounded_empty_dir_and_makes_no_claim() -> None:
    _, result = planned("inferenceservice_ephemeral_cache.yaml")
    assert result.status.phase == "Creating"
    assert result.cache_pvc is None and result.service_cache is None and result.hpa is None
    pod = result.deployment["spec"]["template"]["spec"] if result.deployment else {}
    assert pod["volumes"][0] == {"name": "model-storage", "emptyDir": {"sizeLimit": "40Gi"}}
    assert [c["name"] for c in pod["initContainers"]] == ["model-downloader"]
    resources = main(result)["resources"]
    assert resources["requests"] == {"cpu": "4", "memory": "8Gi", "ephemeral-storage": "40Gi"}
    assert resources["limits"]["ephemeral-storage"] == "40Gi"
    assert result.service is not None and result.service["spec"]["type"] == "ClusterIP"


def test_amd_rocm_igpu_runs_the_rocm_build_on_an_amd_gpu() -> None:
    _, result = planned("model_amd_rocm_igpu.yaml")
    assert result.status.phase == "Creating"
    container = main(result)
    assert container["image"] == DEFAULT_RUNTIME_IMAGES["llamacpp-rocm"]
    assert container["resources"]["limits"]["amd.com/gpu"] == "1"
    assert container["args"][container["args"].index("--ctx-size") + 1] == "32768"
    assert container["args"][container["args"].index("--flash-attn") :][:2] == ["--flash-attn", "on"]
    assert result.deployment is not None and result.deployment["spec"]["strategy"] == {"type": "Recreate"}


def test_amd_vulkan_igpu_requests_the_dri_render_resource() -> None:
    service, result = planned("model_amd_vulkan_igpu.yaml")
    assert result.status.phase == "Creating"
    container = main(result)
    assert container["image"] == service["spec"]["image"]  # the sample's own image wins
    assert container["resources"]["limits"]["squat.ai/dri-render"] == "1"
    assert "amd.com/gpu" not in container["resources"]["limits"]
    pod = result.deployment["spec"]["template"]["spec"] if result.deployment else {}
    assert pod["tolerations"][0] == {
        "key": "squat.ai/dri-render",
        "operator": "Equal",
        "value": "present",
        "effect": "NoSchedule",
    }


@pytest.mark.parametrize("sample", sorted(p.name for p in SAMPLES.glob("*.yaml")))
def test_every_setting_of_the_samples_is_applied(sample: str) -> None:
    _, result = planned(sample)
    # SpecValid is written only to say that something is ignored (or that nothing is, any more).
    assert condition(result, "SpecValid") is None
