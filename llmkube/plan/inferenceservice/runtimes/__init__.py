"""Runtime backends by name: defaults and process builders.

An empty runtime means llama.cpp, as in the CRD default.
"""

from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.api.model import Model
from llmkube.plan.inferenceservice.runtimes import (
    generic,
    llamacpp,
    llamacpp_router,
    personaplex,
    sglang,
    tgi,
    vllm,
)
from llmkube.plan.inferenceservice.runtimes.base import (
    ContainerProcess,
    ProcessBuilder,
    RuntimeDefaults,
    RuntimeInputs,
)
from llmkube.plan.model.source import runtime_model

_BACKENDS: dict[str, tuple[RuntimeDefaults, ProcessBuilder]] = {
    module.DEFAULTS.name: (module.DEFAULTS, module.build)
    for module in (llamacpp, vllm, tgi, personaplex, generic, llamacpp_router, sglang)
}
RUNTIME_NAMES = tuple(_BACKENDS)


def resolve_runtime(spec: InferenceServiceSpec) -> str:
    runtime = spec.runtime or llamacpp.DEFAULTS.name
    return runtime if runtime in _BACKENDS else llamacpp.DEFAULTS.name


def runtime_defaults(runtime: str) -> RuntimeDefaults:
    return _BACKENDS[runtime][0]


def build_process(runtime: str, inputs: RuntimeInputs) -> ContainerProcess:
    return _BACKENDS[runtime][1](inputs)


def server_process(
    runtime: str,
    spec: InferenceServiceSpec,
    model: Model,
    *,
    model_path: str,
    port: int,
    gpu_count: int,
    host: str = "0.0.0.0",
    flash_attention_default: bool = False,
    mmproj_path: str = "",
    draft_model_path: str = "",
) -> ContainerProcess:
    """The server's command line for a service and its Model: what a pod's container runs, and what
    the host agent runs (with its own model path, address and port). The one place both get it."""
    hardware = model.spec.hardware
    served = runtime_model(model.spec.source)
    inputs = RuntimeInputs(
        spec=spec,
        model_source=served.model_id,
        model_path=model_path,
        port=port,
        gpu_count=gpu_count,
        gpu=hardware.gpu if hardware else None,
        host=host,
        flash_attention_default=flash_attention_default,
        mmproj_path=mmproj_path,
        model_revision=served.revision,
        draft_model_path=draft_model_path,
    )
    return build_process(runtime, inputs)


__all__ = [
    "RUNTIME_NAMES",
    "ContainerProcess",
    "RuntimeDefaults",
    "RuntimeInputs",
    "build_process",
    "resolve_runtime",
    "runtime_defaults",
    "server_process",
]
