from collections.abc import Mapping

import pytest

from llmkube.api.model import HardwareSpec
from llmkube.plan.model import accelerator_ready, accelerator_resource

INTEL = "gpu.intel.com/i915"


def hw(accelerator: str | None) -> HardwareSpec:
    return HardwareSpec.model_validate({"accelerator": accelerator})


@pytest.mark.parametrize(
    ("hardware", "resource"),
    [
        (None, None),
        (hw(None), None),
        (hw("cpu"), None),
        (hw("metal"), None),
        (hw("cuda"), "nvidia.com/gpu"),
        (hw("rocm"), "amd.com/gpu"),
        (hw("intel"), INTEL),
        # Vulkan: the resource of the GPU's vendor (NVIDIA by default).
        (hw("vulkan"), "nvidia.com/gpu"),
        (HardwareSpec.model_validate({"accelerator": "vulkan", "gpu": {"vendor": "amd"}}), "amd.com/gpu"),
        (HardwareSpec.model_validate({"accelerator": "vulkan", "gpu": {"vendor": "intel"}}), INTEL),
    ],
)
def test_accelerator_resource(hardware: HardwareSpec | None, resource: str | None) -> None:
    assert accelerator_resource(hardware, INTEL) == resource


def test_intel_resource_name_is_configurable() -> None:
    assert accelerator_resource(hw("intel"), "gpu.intel.com/xe") == "gpu.intel.com/xe"


@pytest.mark.parametrize(
    ("hardware", "capacity", "ready"),
    [
        (None, {}, True),  # no hardware: CPU
        (hw("cpu"), {}, True),
        (hw("metal"), {}, True),  # off-cluster agent: no in-cluster signal
        (hw("cuda"), {"nvidia.com/gpu": 2}, True),
        (hw("cuda"), {"nvidia.com/gpu": 0}, False),  # zero capacity is not capacity
        (hw("cuda"), {"amd.com/gpu": 4}, False),  # the wrong vendor does not count
        (hw("cuda"), {}, False),
        (hw("rocm"), {"amd.com/gpu": 1}, True),
        (hw("rocm"), {"nvidia.com/gpu": 1}, False),
        (hw("intel"), {INTEL: 1}, True),
        (hw("intel"), {"nvidia.com/gpu": 1}, False),
        (hw("cuda"), None, True),  # node list failed: fail open
    ],
)
def test_accelerator_ready(
    hardware: HardwareSpec | None, capacity: Mapping[str, int] | None, ready: bool
) -> None:
    assert accelerator_ready(hardware, capacity, INTEL) is ready
