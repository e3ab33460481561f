"""GPU count, vendor and extended-resource name; the count is the same everywhere it is used."""

from llmkube.api.base import KubeObject
from llmkube.api.enums import GPUVendor
from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.api.model import Model
from llmkube.plan.inferenceservice.config import OperatorConfig


def effective_gpu_count(spec: InferenceServiceSpec, model: Model) -> int:
    """The Model's count wins when positive, then the service's; `gpu.enabled` is never consulted."""
    hardware = model.spec.hardware
    model_count = hardware.gpu.count if hardware and hardware.gpu and hardware.gpu.count else 0
    if model_count > 0:
        return model_count
    service_count = spec.resources.gpu if spec.resources and spec.resources.gpu else 0
    return max(service_count, 0)


def gpu_vendor(model: Model) -> GPUVendor:
    """Intel when accelerator or vendor says so, then AMD (ROCm), else NVIDIA (the reference
    operator asked AMD models for NVIDIA GPUs)."""
    hardware = model.spec.hardware
    accelerator = (hardware.accelerator or "").lower() if hardware else ""
    vendor = (hardware.gpu.vendor or "").lower() if hardware and hardware.gpu else ""
    if "intel" in (accelerator, vendor):
        return "intel"
    if accelerator == "rocm" or vendor == "amd":
        return "amd"
    return "nvidia"


def gpu_resource_name(model: Model, config: OperatorConfig) -> str:
    return config.gpu_resource(gpu_vendor(model))


def is_metal(model: Model) -> bool:
    hardware = model.spec.hardware
    return bool(hardware and (hardware.accelerator or "").lower() == "metal")


def gpu_toleration(resource_name: str) -> KubeObject:
    """GPU nodes are commonly tainted `<resource>=present:NoSchedule`; GPU pods tolerate that."""
    return {"key": resource_name, "operator": "Equal", "value": "present", "effect": "NoSchedule"}
