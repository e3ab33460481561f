"""What a host agent does about each InferenceService, what it cannot serve (the reference's
metal samples included), and the command line it runs: the controller's own, on the host."""

from pathlib import Path
from typing import Any

import pytest
import yaml

from llmkube.api.inferenceservice import InferenceService
from llmkube.api.model import GGUFMetadata, Model
from llmkube.plan.agent.assignment import Verdict, assignment
from llmkube.plan.agent.launch import Host, command_identity, server_command, with_port
from llmkube.plan.agent.memory import need_of
from llmkube.plan.agent.support import unsupported
from llmkube.plan.inferenceservice.memory_fit import GIB
from llmkube.plan.inferenceservice.runtimes import server_process

SAMPLES = Path(__file__).parents[4] / "manifests" / "samples" / "metal"
MAC = Host(address="192.168.1.20", metal=True)
LINUX = Host(address="10.88.0.1", metal=False)


def verdict(status: str = "True", *, generation: int = 1, reason: str = "Accepted") -> dict[str, Any]:
    """A status with the controller's verdict on the spec (plan/inferenceservice/agent_verdict.py)."""
    condition = {
        "type": "Accepted",
        "status": status,
        "reason": reason,
        "message": "refused: spec.priorityClassName"
        if status == "False"
        else "a host agent may serve this spec",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
        "observedGeneration": generation,
    }
    return {"effectivePriority": 1000, "conditions": [condition]}


def isvc(
    spec: dict[str, Any] | None = None, *, status: dict[str, Any] | None = None, **meta: Any
) -> InferenceService:
    return InferenceService.model_validate(
        {
            "metadata": {"name": "chat", "namespace": "ai", "generation": 1, **meta},
            "spec": {"modelRef": "m", **(spec or {})},
            "status": verdict() if status is None else status,
        }
    )


def model(spec: dict[str, Any] | None = None, *, phase: str = "Ready") -> Model:
    return Model.model_validate(
        {
            "metadata": {"name": "m", "namespace": "ai", "generation": 1},
            "spec": {"source": "https://host/m.gguf", "hardware": {"accelerator": "metal"}, **(spec or {})},
            "status": {"phase": phase, "observedGeneration": 1},
        }
    )


@pytest.mark.parametrize(
    ("service", "the_model", "verdict"),
    [
        (None, model(), Verdict.REMOVE),
        (isvc(deletionTimestamp="2026-01-01T00:00:00Z"), model(), Verdict.REMOVE),
        (isvc(), model({"hardware": {"accelerator": "cpu"}}), Verdict.REMOVE),  # now the cluster's
        (isvc(), None, Verdict.KEEP),
        (isvc(), model(phase="Downloading"), Verdict.KEEP),
        (isvc({"replicas": 0}), model(), Verdict.STOP),
        (isvc({"runtime": "vllm"}), model(), Verdict.UNSUPPORTED),
        (isvc(), model({"format": "mlx"}), Verdict.UNSUPPORTED),
        (isvc(), model({"source": "pvc://weights/m.gguf"}), Verdict.UNSUPPORTED),
        (isvc(), model(), Verdict.SERVE),
        (isvc(), model({"source": "/Users/me/models/m.gguf"}), Verdict.SERVE),
        (isvc(), model({"source": "org/repo-GGUF"}), Verdict.UNSUPPORTED),  # which file? (spec.files)
        (isvc(), model({"source": "org/repo-GGUF", "files": ["m.gguf"]}), Verdict.SERVE),
    ],
)
def test_assignment(service: InferenceService | None, the_model: Model | None, verdict: Verdict) -> None:
    assert assignment(service, the_model, MAC).verdict is verdict


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({}, Verdict.KEEP),  # not judged yet: nothing starts
        (verdict("False", reason="PolicyViolation"), Verdict.KEEP),  # refused: what runs stays as it was
        (verdict(generation=0), Verdict.KEEP),  # a verdict on the previous spec says nothing of this one
        (verdict("Unknown"), Verdict.KEEP),
        (verdict(), Verdict.SERVE),
    ],
)
def test_only_a_spec_the_controller_accepted_is_served(status: dict[str, Any], expected: Verdict) -> None:
    assert assignment(isvc(status=status), model(), MAC).verdict is expected


def test_the_priority_served_is_the_one_the_controller_accepted() -> None:
    """A tenant naming system-node-critical gets a refusal from the controller, not that class's
    value from the agent: only an accepted status's effectivePriority is used."""
    refused = isvc({"priorityClassName": "system-node-critical"}, status=verdict("False"))
    assert assignment(refused, model(), MAC).priority == 0
    accepted = isvc(status={**verdict(), "effectivePriority": 100})
    assert assignment(accepted, model(), MAC).priority == 100


def test_a_refusal_is_kept_with_its_message() -> None:
    decision = assignment(isvc(status=verdict("False", reason="PolicyViolation")), model(), MAC)
    assert decision.message == "refused: spec.priorityClassName"


def test_a_model_status_of_a_previous_spec_keeps_what_runs() -> None:
    stale = model().model_copy(update={"metadata": model().metadata.model_copy(update={"generation": 2})})
    assert assignment(isvc(), stale, MAC).verdict is Verdict.KEEP


def reference_sample(name: str) -> tuple[InferenceService, Model]:
    documents = list(yaml.safe_load_all((SAMPLES / name).read_text()))
    found = {doc["kind"]: doc for doc in documents}
    service = InferenceService.model_validate(found["InferenceService"])
    status = {"phase": "Ready", "observedGeneration": None}
    return service, Model.model_validate({**found["Model"], "status": status})


def test_the_reference_turboquant_sample_is_served() -> None:
    service, the_model = reference_sample("inferenceservice_turboquant.yaml")
    assert unsupported(service, the_model) is None
    command = server_command(
        "/opt/homebrew/bin/llama-server", service, the_model, model_path="/c/q.gguf", port=40001, host=MAC
    )
    assert command[:7] == (
        "/opt/homebrew/bin/llama-server",
        "--model",
        "/c/q.gguf",
        "--host",
        "192.168.1.20",
        "--port",
        "40001",
    )
    for run in (
        ["--n-gpu-layers", "99"],
        ["--ctx-size", "262144"],
        ["--flash-attn", "on"],
        ["--cache-type-k", "turbo3"],
    ):
        assert any(list(command[i : i + 2]) == run for i in range(len(command))), run


def test_the_reference_vllm_swift_sample_is_unsupported_with_a_clear_message() -> None:
    service, the_model = reference_sample("inferenceservice_qwen3_4b_vllm_swift_turboquant.yaml")
    why = unsupported(service, the_model)
    assert why == (
        'Model "qwen3-4b-tq" has format mlx, which llama-server cannot load; llmkube\'s host agent serves '
        "GGUF models only (vllm-swift, oMLX, mlx-server and Ollama, which serve MLX and safetensors models "
        "on the reference's agent, are not supported by it)"
    )


@pytest.mark.parametrize("runtime", ["vllm", "tgi", "personaplex", "generic"])
def test_other_runtimes_are_unsupported(runtime: str) -> None:
    why = unsupported(isvc({"runtime": runtime}), model())
    assert why is not None and f'runtime "{runtime}" is not served' in why


def test_the_agent_runs_the_controllers_arguments() -> None:
    """The same builder: a pod's args with the agent's model path, address and port."""
    spec = {"contextSize": 2048, "parallelSlots": 2, "jinja": True, "extraArgs": ["--threads", "2"]}
    service, the_model = isvc(spec), model()
    command = server_command(
        "/usr/local/bin/llama-server", service, the_model, model_path="/c/m.gguf", port=40123, host=LINUX
    )
    pod = server_process("llamacpp", service.spec, the_model, model_path="/c/m.gguf", port=40123, gpu_count=0)
    assert command == (
        "/usr/local/bin/llama-server",
        *[("10.88.0.1" if a == "0.0.0.0" else a) for a in pod.args or ()],
    )


def test_a_linux_gpu_box_offloads_what_the_model_says() -> None:
    the_model = model({"hardware": {"accelerator": "metal", "gpu": {"count": 2}}})
    command = server_command("llama-server", isvc(), the_model, model_path="/m", port=1, host=LINUX)
    assert "--n-gpu-layers" in command and "--tensor-split" in command
    assert "--n-gpu-layers" not in server_command(
        "llama-server", isvc(), model(), model_path="/m", port=1, host=LINUX
    )


def test_command_identity_ignores_the_port_only() -> None:
    a = server_command("ls", isvc({"contextSize": 512}), model(), model_path="/m", port=40001, host=LINUX)
    b = server_command("ls", isvc({"contextSize": 512}), model(), model_path="/m", port=40002, host=LINUX)
    c = server_command("ls", isvc({"contextSize": 1024}), model(), model_path="/m", port=40001, host=LINUX)
    assert command_identity(a) == command_identity(b) != command_identity(c)
    assert (with_port(a, 40002), with_port(["ls"], 40002)) == (b, ("ls",))


def tiny_header() -> GGUFMetadata:
    return GGUFMetadata.model_validate(
        {
            "architecture": "llama",
            "contextLength": 2048,
            "embeddingSize": 2048,
            "layerCount": 22,
            "headCount": 32,
            "headCountKV": 4,
            "vocabSize": 32000,
            "tensorBytes": 1_100_000_000,
        }
    )


def test_need_is_memory_fits_estimate_of_the_loaded_file() -> None:
    need = need_of(
        model(),
        isvc({"contextSize": 4096}).spec,
        tiny_header(),
        file_size=1_200_000_000,
        gpu_count=1,
        unified_memory=True,
        total=16 * GIB,
    )
    assert need.estimate is not None and need.bytes == need.estimate.total
    assert need.bytes is not None and 1_100_000_000 < need.bytes < 2 * GIB


def test_without_a_header_the_models_cap_stands_in_else_nothing_is_known() -> None:
    capped = model({"hardware": {"accelerator": "metal", "memoryBudget": "6Gi"}})
    need = need_of(
        capped, isvc().spec, None, file_size=None, gpu_count=1, unified_memory=True, total=16 * GIB
    )
    assert (need.bytes, need.source) == (6 * GIB, "its Model's hardware.memoryBudget (6Gi)")
    assert (
        need_of(
            model(), isvc().spec, None, file_size=None, gpu_count=1, unified_memory=True, total=16 * GIB
        ).bytes
        is None
    )
