"""The command line a host agent runs for a service: the controller's own argument builder
(`runtimes.server_process`), with the agent's model file, address and port, and its hardware."""

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from llmkube.api.inferenceservice import InferenceService
from llmkube.api.model import Model
from llmkube.plan.agent.support import SERVED_RUNTIME
from llmkube.plan.inferenceservice.gpu import effective_gpu_count
from llmkube.plan.inferenceservice.runtimes import server_process


@dataclass(frozen=True)
class Host:
    #: where the servers listen and what the EndpointSlices say (`--advertise-address`)
    address: str
    #: Apple Silicon: Metal is the GPU (one, sharing the host's memory), flash attention on by default
    metal: bool


def gpu_count(isvc: InferenceService, model: Model, host: Host) -> int:
    """Metal is one GPU; elsewhere what the Model or the service says (a CUDA build of
    llama-server on a Linux box), else none."""
    return 1 if host.metal else effective_gpu_count(isvc.spec, model)


def server_command(
    binary: str,
    isvc: InferenceService,
    model: Model,
    *,
    model_path: str,
    port: int,
    host: Host,
    mmproj_path: str = "",
) -> tuple[str, ...]:
    process = server_process(
        SERVED_RUNTIME,
        isvc.spec,
        model,
        model_path=model_path,
        port=port,
        gpu_count=gpu_count(isvc, model, host),
        host=host.address,
        flash_attention_default=host.metal,
        mmproj_path=mmproj_path,
    )
    return (binary, *(process.args or ()))


def command_identity(command: Sequence[str]) -> str:
    """What a running server is, whatever port it was given: two commands that differ only in
    their port serve the same spec (a new port is picked at every start)."""
    parts = list(command)
    for index, arg in enumerate(parts[:-1]):
        if arg == "--port":
            parts[index + 1] = ""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def port_of(command: Sequence[str]) -> int | None:
    for index, arg in enumerate(command[:-1]):
        if arg == "--port" and command[index + 1].isdigit():
            return int(command[index + 1])
    return None
