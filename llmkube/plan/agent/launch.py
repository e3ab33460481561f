"""The command line a host agent runs for a service: the controller's own argument builder
(`runtimes.server_process`), with the agent's model file, address and port, its hardware and the
service's key file; which of the spec's extraArgs it takes (server_flags.py judges them against
this command); and what a running server is, whatever port it was given (`Launch.identity`)."""

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from llmkube.api.inferenceservice import InferenceService
from llmkube.api.model import Model
from llmkube.plan.agent.artifact import ModelFile
from llmkube.plan.agent.server_flags import judge
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
    api_key_file: str = "",
    mmproj_path: str = "",
) -> tuple[str, ...]:
    """`api_key_file`: the service's server key (server_key.py), which the server asks of every
    caller but /health; a file, so the key is never on a command line the host's users can read."""
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
    keyed = ("--api-key-file", api_key_file) if api_key_file else ()
    return (binary, *(process.args or ()), *keyed)


def api_key_file_of(command: Sequence[str]) -> str | None:
    """The key file a server's command line names (an adopted server's too)."""
    index = _value_index(command, "--api-key-file")
    return command[index] if index is not None else None


@dataclass(frozen=True)
class KeyFile:
    """The service's server key, written where its server reads it (`--api-key-file`)."""

    path: str
    fingerprint: str  # of the key in it: part of what a running server is


@dataclass(frozen=True)
class KeyMissing:
    message: str


#: after the key could not be had: when the service looks again
KEY_RETRY = 10.0


@dataclass(frozen=True)
class Launch:
    """How the servers of one spec start: the command for whatever port a start picks, what they
    are (`identity`), and the descriptor a local model file is handed over as."""

    binary: str
    isvc: InferenceService
    model: Model
    host: Host
    artifact: ModelFile
    key: KeyFile

    def command(self, port: int) -> tuple[str, ...]:
        return self._command(self.artifact.path, port)

    def identity(self) -> str:
        """What it serves: the command whatever its port, with the model file's identity (not the
        path it is reached by) and the key's fingerprint (a rotated key is a new server)."""
        return command_identity((*self._command(self.artifact.identity, 0), f"key:{self.key.fingerprint}"))

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return (self.artifact.pass_fd,) if self.artifact.pass_fd is not None else ()

    def _command(self, model_path: str, port: int) -> tuple[str, ...]:
        return server_command(
            self.binary,
            self.isvc,
            self.model,
            model_path=model_path,
            port=port,
            host=self.host,
            api_key_file=self.key.path,
            mmproj_path=self.artifact.mmproj,
        )


#: what the agent always sets itself, whatever the spec: where the server listens, who may call
#: it, what it loads (`--model` is there once the file is known; a spec never names one)
AGENT_FLAGS = ("--model", "--mmproj", "--host", "--port", "--api-key", "--api-key-file", "--metrics")


def agent_flags(isvc: InferenceService, model: Model, host: Host) -> tuple[str, ...]:
    """The flags of the command line the agent builds for the service from its spec's own fields
    (without extraArgs), and those it always sets: no extraArg may repeat or override one."""
    bare = isvc.model_copy(update={"spec": isvc.spec.model_copy(update={"extra_args": None})})
    command = server_command("llama-server", bare, model, model_path="model.gguf", port=1, host=host)
    return (*AGENT_FLAGS, *(word for word in command[1:] if word.startswith("-")))


def extra_args_refusal(
    isvc: InferenceService, model: Model, host: Host, *, unrestricted: bool = False
) -> str | None:
    """Why the agent does not start the service's server with its extraArgs, or None."""
    refused = judge(
        isvc.spec.extra_args or (), set_by_agent=agent_flags(isvc, model, host), unrestricted=unrestricted
    )
    return refused.text() if refused is not None else None


def command_identity(command: Sequence[str]) -> str:
    """What a running server is, whatever port it was given: two commands that differ only in
    their port serve the same spec (a new port is picked at every start)."""
    return hashlib.sha256("\0".join(with_port(command, "")).encode()).hexdigest()[:16]


def with_port(command: Sequence[str], port: int | str) -> tuple[str, ...]:
    """The command with another `--port` (an adopted server's recorded command, restarted)."""
    parts = list(command)
    for index, arg in enumerate(parts[:-1]):
        if arg == "--port":
            parts[index + 1] = str(port)
    return tuple(parts)


def _value_index(command: Sequence[str], flag: str) -> int | None:
    return next((index + 1 for index, arg in enumerate(command[:-1]) if arg == flag), None)
