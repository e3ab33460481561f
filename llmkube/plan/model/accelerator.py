"""`status.acceleratorReady`: is the requested accelerator present on some Node?"""

from collections.abc import Mapping

from llmkube.api.model import HardwareSpec

NVIDIA_GPU_RESOURCE = "nvidia.com/gpu"
AMD_GPU_RESOURCE = "amd.com/gpu"

# Accelerators that need no extended resource: CPU, and metal (an off-cluster host agent).
_ALWAYS_AVAILABLE = frozenset({"", "cpu", "metal"})


def accelerator_resource(hardware: HardwareSpec | None, intel_resource: str) -> str | None:
    """The extended resource a Node must advertise, or None when nothing is needed."""
    accelerator = (hardware.accelerator if hardware else None) or ""
    if accelerator in _ALWAYS_AVAILABLE:
        return None
    if accelerator == "cuda":
        return NVIDIA_GPU_RESOURCE
    if accelerator == "rocm":
        return AMD_GPU_RESOURCE
    if accelerator == "vulkan":
        # Vulkan runs on any vendor's GPU: the vendor's device plugin advertises it.
        vendor = (hardware.gpu.vendor if hardware and hardware.gpu else None) or "nvidia"
        return {"nvidia": NVIDIA_GPU_RESOURCE, "amd": AMD_GPU_RESOURCE}.get(vendor, intel_resource)
    # intel, and anything a newer schema might add: the reference falls back to the Intel name.
    return intel_resource


def accelerator_ready(
    hardware: HardwareSpec | None, gpu_capacity: Mapping[str, int] | None, intel_resource: str
) -> bool:
    """True when no GPU is needed, when some Node has non-zero capacity of the resource, or when the
    node list could not be read (`gpu_capacity` None): failing open never blocks a Model on an RBAC hiccup.
    """
    resource = accelerator_resource(hardware, intel_resource)
    if resource is None or gpu_capacity is None:
        return True
    return gpu_capacity.get(resource, 0) > 0
