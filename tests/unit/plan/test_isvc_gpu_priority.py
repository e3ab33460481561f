"""GPU count and resource names (per vendor; the Model's count first) and priority (the class the
pods really use; the five classes the controller keeps)."""

from types import MappingProxyType
from typing import Any

import pytest
from isvc_factories import make_model

from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.gpu import (
    effective_gpu_count,
    gpu_resource_name,
    gpu_toleration,
    gpu_vendor,
    is_metal,
)
from llmkube.plan.inferenceservice.priority import (
    effective_priority,
    is_llmkube_class,
    priority_class_name,
    priority_classes,
)


def spec(**fields: Any) -> InferenceServiceSpec:
    return InferenceServiceSpec.model_validate({"modelRef": "m", **fields})


@pytest.mark.parametrize(
    ("model_gpu", "service_gpu", "expected"),
    [
        (None, None, 0),
        (None, 2, 2),
        ({"count": 4}, 2, 4),  # the Model wins
        ({"count": 0}, 2, 2),
        ({"count": 0, "enabled": True}, None, 0),  # gpu.enabled is never consulted
        ({"enabled": True}, 1, 1),
        (None, 0, 0),
    ],
)
def test_effective_gpu_count(
    model_gpu: dict[str, Any] | None, service_gpu: int | None, expected: int
) -> None:
    hardware = {"gpu": model_gpu} if model_gpu is not None else None
    resources = {"gpu": service_gpu} if service_gpu is not None else None
    assert effective_gpu_count(spec(resources=resources), make_model(hardware=hardware)) == expected


@pytest.mark.parametrize(
    ("hardware", "vendor", "resource"),
    [
        (None, "nvidia", "nvidia.com/gpu"),
        ({"accelerator": "cuda"}, "nvidia", "nvidia.com/gpu"),
        ({"accelerator": "rocm"}, "amd", "amd.com/gpu"),
        ({"accelerator": "cuda", "gpu": {"vendor": "amd"}}, "amd", "amd.com/gpu"),
        ({"accelerator": "intel"}, "intel", "gpu.intel.com/i915"),
        ({"accelerator": "cuda", "gpu": {"vendor": "intel"}}, "intel", "gpu.intel.com/i915"),
        ({"accelerator": "rocm", "gpu": {"vendor": "intel"}}, "intel", "gpu.intel.com/i915"),
        ({"accelerator": "cpu", "gpu": {"count": 1}}, "nvidia", "nvidia.com/gpu"),
    ],
)
def test_gpu_vendor_and_resource(hardware: dict[str, Any] | None, vendor: str, resource: str) -> None:
    model = make_model(hardware=hardware)
    assert gpu_vendor(model) == vendor
    assert gpu_resource_name(model, OperatorConfig()) == resource


def test_resource_name_overrides() -> None:
    config = OperatorConfig(
        intel_gpu_resource="gpu.intel.com/xe",
        gpu_resource_overrides=MappingProxyType({"amd": "amd.com/mi300", "nvidia": ""}),
    )
    assert gpu_resource_name(make_model(hardware={"accelerator": "intel"}), config) == "gpu.intel.com/xe"
    assert gpu_resource_name(make_model(hardware={"accelerator": "rocm"}), config) == "amd.com/mi300"
    assert gpu_resource_name(make_model(), config) == "nvidia.com/gpu"  # an empty override is no override
    assert OperatorConfig(intel_gpu_resource="").gpu_resource("intel") == "gpu.intel.com/i915"
    overridden = OperatorConfig(
        intel_gpu_resource="gpu.intel.com/xe", gpu_resource_overrides=MappingProxyType({"intel": "x/gpu"})
    )
    assert overridden.gpu_resource("intel") == "x/gpu"


def test_known_gpu_resources_cover_every_vendor_and_override() -> None:
    config = OperatorConfig(gpu_resource_overrides=MappingProxyType({"amd": "amd.com/mi300"}))
    assert config.known_gpu_resources() == (
        "nvidia.com/gpu",
        "amd.com/gpu",
        "gpu.intel.com/i915",
        "gpu.intel.com/xe",
        "amd.com/mi300",
    )


def test_gpu_toleration() -> None:
    assert gpu_toleration("amd.com/gpu") == {
        "key": "amd.com/gpu",
        "operator": "Equal",
        "value": "present",
        "effect": "NoSchedule",
    }


@pytest.mark.parametrize(
    ("accelerator", "metal"), [(None, False), ("cpu", False), ("metal", True), ("cuda", False)]
)
def test_is_metal(accelerator: str | None, metal: bool) -> None:
    hardware = {"accelerator": accelerator} if accelerator else None
    assert is_metal(make_model(hardware=hardware)) is metal


@pytest.mark.parametrize(
    ("fields", "class_name"),
    [
        ({}, "llmkube-normal"),
        ({"priority": "critical"}, "llmkube-critical"),
        ({"priority": "high"}, "llmkube-high"),
        ({"priority": "normal"}, "llmkube-normal"),
        ({"priority": "low"}, "llmkube-low"),
        ({"priority": "batch"}, "llmkube-batch"),
        ({"priority": None}, "llmkube-normal"),
        ({"priority": "batch", "priorityClassName": "team-gold"}, "team-gold"),
        ({"priorityClassName": ""}, "llmkube-normal"),
    ],
)
def test_priority_class_name(fields: dict[str, Any], class_name: str) -> None:
    assert priority_class_name(spec(**fields)) == class_name


def test_unknown_priority_maps_to_normal() -> None:
    # model_construct skips validation on purpose: a value from a newer schema must not crash us.
    future = InferenceServiceSpec.model_construct(model_ref="m", priority="urgent")  # type: ignore[arg-type]
    assert priority_class_name(future) == "llmkube-normal"


@pytest.mark.parametrize(
    ("class_name", "observed", "value"),
    [
        ("llmkube-high", {}, 100_000),  # our own class, not yet observed: the documented value
        ("llmkube-high", {"llmkube-high": 123}, 123),  # what the cluster really has
        ("team-gold", {"team-gold": 500_000}, 500_000),  # a custom class counts
        ("team-gold", {}, None),  # missing: reported by validation
    ],
)
def test_effective_priority(class_name: str, observed: dict[str, int], value: int | None) -> None:
    assert effective_priority(class_name, observed) == value


def test_priority_class_intents() -> None:
    classes = priority_classes()
    assert [(c["metadata"]["name"], c["value"], c["preemptionPolicy"]) for c in classes] == [
        ("llmkube-critical", 1_000_000, "PreemptLowerPriority"),
        ("llmkube-high", 100_000, "PreemptLowerPriority"),
        ("llmkube-normal", 10_000, "PreemptLowerPriority"),
        ("llmkube-low", 1_000, "PreemptLowerPriority"),
        ("llmkube-batch", 100, "Never"),
    ]
    for c in classes:
        assert c["apiVersion"] == "scheduling.k8s.io/v1" and c["kind"] == "PriorityClass"
        # Never the cluster default; left unset because the API omits `false` (a no-op re-apply).
        assert "globalDefault" not in c and c["description"]
        assert c["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "llmkube"}
        assert is_llmkube_class(c["metadata"]["name"])
    assert not is_llmkube_class("team-gold")
