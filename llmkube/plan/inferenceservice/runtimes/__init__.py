"""Runtime backends by name: defaults and process builders.

An empty runtime means llama.cpp, as in the CRD default.
"""

from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.plan.inferenceservice.runtimes import generic, llamacpp, personaplex, tgi, vllm
from llmkube.plan.inferenceservice.runtimes.base import (
    ContainerProcess,
    ProcessBuilder,
    RuntimeDefaults,
    RuntimeInputs,
)

_BACKENDS: dict[str, tuple[RuntimeDefaults, ProcessBuilder]] = {
    module.DEFAULTS.name: (module.DEFAULTS, module.build)
    for module in (llamacpp, vllm, tgi, personaplex, generic)
}
RUNTIME_NAMES = tuple(_BACKENDS)


def resolve_runtime(spec: InferenceServiceSpec) -> str:
    runtime = spec.runtime or llamacpp.DEFAULTS.name
    return runtime if runtime in _BACKENDS else llamacpp.DEFAULTS.name


def runtime_defaults(runtime: str) -> RuntimeDefaults:
    return _BACKENDS[runtime][0]


def build_process(runtime: str, inputs: RuntimeInputs) -> ContainerProcess:
    return _BACKENDS[runtime][1](inputs)


__all__ = [
    "RUNTIME_NAMES",
    "ContainerProcess",
    "RuntimeDefaults",
    "RuntimeInputs",
    "build_process",
    "resolve_runtime",
    "runtime_defaults",
]
