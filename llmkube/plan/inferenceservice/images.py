"""Which image a runtime runs when the InferenceService names none: by runtime, and for llama.cpp by
the GPU backend the Model's hardware calls for.

llama.cpp publishes one server image per backend (`server`, `server-cuda`, `server-rocm`,
`server-vulkan`, `server-intel`, each also as `...-b<build>`, cut from the same build): the CPU
build with an `nvidia.com/gpu` limit serves on the CPU and ignores `--n-gpu-layers`, so a GPU
service must get the build for its GPU. Every default is pinned by tag (never `:latest`) so that
an upgrade of llmkube, not a push upstream, changes what runs; an admin overrides any of them
(an air-gapped registry, a newer build) with `--runtime-images KEY=IMAGE` (Helm `runtimeImages`),
the keys below. A service's own `spec.image` wins over all of it.
"""

from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal

from llmkube.api.model import Model
from llmkube.plan.inferenceservice.gpu import gpu_vendor

LlamaCppBackend = Literal["cpu", "cuda", "rocm", "vulkan", "intel"]

#: The llama.cpp build every default llama.cpp image comes from (all its backends at once).
LLAMACPP_BUILD = "b10068"
_LLAMACPP = "ghcr.io/ggml-org/llama.cpp"

#: The image of each key when no flag overrides it. llama.cpp keys are `llamacpp` (CPU) and
#: `llamacpp-<backend>`; the other runtimes have one key each (their images serve every GPU).
DEFAULT_RUNTIME_IMAGES: Mapping[str, str] = MappingProxyType(
    {
        "llamacpp": f"{_LLAMACPP}:server-{LLAMACPP_BUILD}",
        # CUDA 12 (driver 525+ with the compat libraries, 570+ natively): the driver most GPU
        # nodes run. `server-cuda13-<build>` needs driver 580+.
        "llamacpp-cuda": f"{_LLAMACPP}:server-cuda-{LLAMACPP_BUILD}",
        "llamacpp-rocm": f"{_LLAMACPP}:server-rocm-{LLAMACPP_BUILD}",
        "llamacpp-vulkan": f"{_LLAMACPP}:server-vulkan-{LLAMACPP_BUILD}",
        # SYCL (oneAPI), for Intel Arc, Flex and Max GPUs.
        "llamacpp-intel": f"{_LLAMACPP}:server-intel-{LLAMACPP_BUILD}",
        "vllm": "vllm/vllm-openai:v0.20.0",
        "tgi": "ghcr.io/huggingface/text-generation-inference:3.3.7",
        # SGLang's CUDA and ROCm builds (the reference's pins): the ROCm one for AMD GPUs.
        "sglang": "lmsysorg/sglang:v0.5.15.post1-cu129",
        "sglang-rocm": "lmsysorg/sglang:v0.5.15-rocm720-mi30x",
    }
)
RUNTIME_IMAGE_KEYS = tuple(DEFAULT_RUNTIME_IMAGES)

_BACKEND_OF_VENDOR: Mapping[str, LlamaCppBackend] = MappingProxyType(
    {"nvidia": "cuda", "amd": "rocm", "intel": "intel"}
)


def llamacpp_backend(model: Model, gpu_count: int) -> LlamaCppBackend:
    """CPU without GPUs (whatever the Model's accelerator says: the pod gets no device); with GPUs,
    Vulkan when the Model asks for it (any vendor's GPU), else the vendor's own backend: CUDA for
    NVIDIA (also the default vendor: a bare `resources.gpu: 1` is an NVIDIA GPU), ROCm for AMD
    (accelerator `rocm` or vendor `amd`), SYCL for Intel."""
    if gpu_count <= 0:
        return "cpu"
    hardware = model.spec.hardware
    runtime = hardware.gpu.runtime if hardware is not None and hardware.gpu is not None else None
    if runtime is not None:  # v0.9 `hardware.gpu.runtime`: the compute backend, said outright
        return runtime
    if hardware is not None and (hardware.accelerator or "").lower() == "vulkan":
        return "vulkan"
    return _BACKEND_OF_VENDOR[gpu_vendor(model)]


def image_key(runtime: str, model: Model, gpu_count: int) -> str:
    """The `--runtime-images` key that names this service's default image ("" for a runtime that
    has none: generic and PersonaPlex need `spec.image`)."""
    if runtime in ("llamacpp", "llamacpp-router"):  # one server binary, one image per backend
        backend = llamacpp_backend(model, gpu_count)
        return "llamacpp" if backend == "cpu" else f"llamacpp-{backend}"
    if runtime == "sglang" and gpu_count > 0 and gpu_vendor(model) == "amd":
        return "sglang-rocm"
    return runtime if runtime in DEFAULT_RUNTIME_IMAGES else ""


def default_image(runtime: str, model: Model, gpu_count: int, overrides: Mapping[str, str]) -> str:
    """The admin's image for the key, else the pinned default; "" when the runtime has none."""
    key = image_key(runtime, model, gpu_count)
    if not key:
        return ""
    return overrides.get(key) or DEFAULT_RUNTIME_IMAGES[key]


class RuntimeImagesError(ValueError):
    """A `--runtime-images` value that is not KEY=IMAGE with a known key."""


def parse_runtime_images(text: str) -> dict[str, str]:
    """`llamacpp-cuda=registry.local/llama.cpp:server-cuda-b10068,vllm=...` -> {key: image}; empty
    entries are ignored, an unknown key or a missing image is refused with the key's list."""
    images: dict[str, str] = {}
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        key, sep, image = (piece.strip() for piece in entry.partition("="))
        if key not in DEFAULT_RUNTIME_IMAGES:
            raise RuntimeImagesError(f'unknown key "{key}": use one of {", ".join(RUNTIME_IMAGE_KEYS)}')
        if not sep or not image or any(c.isspace() for c in image):
            raise RuntimeImagesError(f'"{entry}" must be {key}=IMAGE')
        images[key] = image
    return images
