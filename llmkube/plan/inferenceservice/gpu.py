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
    # The schema bounds both counts to 0..8: a set count is positive.
    return spec.resources.gpu if spec.resources and spec.resources.gpu else 0


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
    """The Model's `hardware.gpu.resourceName` (v0.9: any extended resource, e.g. amd.com/gpu or a
    DRI render node), else the admin's name for the vendor, else the vendor's own."""
    gpu = model.spec.hardware.gpu if model.spec.hardware else None
    if gpu is not None and gpu.resource_name:
        return gpu.resource_name
    return config.gpu_resource(gpu_vendor(model))


def gpu_toleration_key(model: Model, resource_name: str) -> str:
    """The taint key GPU pods tolerate: `hardware.gpu.tolerationKey` (v0.9), else the resource name."""
    gpu = model.spec.hardware.gpu if model.spec.hardware else None
    return gpu.toleration_key if gpu is not None and gpu.toleration_key else resource_name


def gpu_resource_claims(model: Model) -> list[KubeObject]:
    """The Model's DRA claims (v0.9 `hardware.gpu.resourceClaims`): the pod's resourceClaims, which
    its container then names instead of requesting an extended resource."""
    gpu = model.spec.hardware.gpu if model.spec.hardware else None
    return [dict(claim) for claim in (gpu.resource_claims or [])] if gpu is not None else []


def is_metal(model: Model) -> bool:
    hardware = model.spec.hardware
    return bool(hardware and (hardware.accelerator or "").lower() == "metal")


def gpu_toleration(resource_name: str) -> KubeObject:
    """GPU nodes are commonly tainted `<resource>=present:NoSchedule`; GPU pods tolerate that."""
    return {"key": resource_name, "operator": "Equal", "value": "present", "effect": "NoSchedule"}
