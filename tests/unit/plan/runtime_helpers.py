"""Calling a runtime's process builder directly, from a spec written in wire form."""

from typing import Any

from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.api.model import GPUSpec
from llmkube.plan.inferenceservice.runtimes import ContainerProcess, RuntimeInputs, build_process


def run_builder(
    runtime: str,
    spec: dict[str, Any] | None = None,
    *,
    gpus: int = 0,
    gpu: dict[str, Any] | None = None,
    model_path: str = "/models/k/tiny.gguf",
    source: str = "https://host/x.gguf",
    port: int = 8080,
    mmproj_path: str = "",
    revision: str = "",
) -> ContainerProcess:
    inputs = RuntimeInputs(
        spec=InferenceServiceSpec.model_validate({"modelRef": "tiny", "runtime": runtime, **(spec or {})}),
        model_source=source,
        model_path=model_path,
        port=port,
        gpu_count=gpus,
        gpu=GPUSpec.model_validate(gpu) if gpu is not None else None,
        mmproj_path=mmproj_path,
        model_revision=revision,
    )
    return build_process(runtime, inputs)


def arg_list(process: ContainerProcess) -> list[str]:
    return list(process.args or ())


def contains_run(args: list[str], run: list[str]) -> bool:
    """`run` appears in `args` as consecutive elements."""
    return any(args[i : i + len(run)] == run for i in range(len(args) - len(run) + 1))
