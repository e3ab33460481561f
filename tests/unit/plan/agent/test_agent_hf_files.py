"""What the host agent serves of a Hugging Face repository: the files a Model names, downloaded by
the agent and given to llama-server as `--model` (the first) and `--mmproj`; never the whole
repository, never llama-server's own `-hf` (a repository's presets would choose its settings)."""

from typing import Any

import pytest

from llmkube.api.inferenceservice import InferenceService
from llmkube.api.model import Model
from llmkube.plan.agent.launch import Host, server_command
from llmkube.plan.agent.support import unsupported


def isvc() -> InferenceService:
    return InferenceService.model_validate(
        {"metadata": {"name": "chat", "namespace": "ai"}, "spec": {"modelRef": "m"}}
    )


def model(**spec: Any) -> Model:
    return Model.model_validate(
        {"metadata": {"name": "m", "namespace": "ai"}, "spec": {"hardware": {"accelerator": "metal"}, **spec}}
    )


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        (
            {"source": "hf://org/repo-GGUF"},
            "names the Hugging Face repository hf://org/repo-GGUF but no file",
        ),
        ({"source": "org/repo-GGUF"}, "Name the .gguf file in spec.files"),
        ({"source": "hf://org/repo-GGUF@v1"}, "spec.mmproj"),
        (
            {"source": "hf://org/private", "files": ["m.gguf"], "sourceSecretRef": {"name": "hf"}},
            "reads no Secret",
        ),
        ({"source": "hf://org/repo-GGUF", "files": ["m.gguf"]}, None),
        ({"source": "org/repo-GGUF", "files": ["m-00001-of-00002.gguf", "m-00002-of-00002.gguf"]}, None),
        ({"source": "hf://org/repo-GGUF", "files": ["m.gguf"], "mmproj": "mmproj-f16.gguf"}, None),
    ],
)
def test_what_the_agent_serves_of_a_hugging_face_repository(spec: dict[str, Any], words: str | None) -> None:
    why = unsupported(isvc(), model(**spec))
    if words is None:
        assert why is None
    else:
        assert why is not None and words in why, why


def test_the_projector_reaches_llama_server_beside_the_model() -> None:
    the_model = model(source="hf://org/repo", files=["m.gguf"], mmproj="p.gguf")
    host = Host(address="192.168.1.20", metal=True)
    command = server_command(
        "llama-server", isvc(), the_model, model_path="/c/files/m.gguf", port=1, host=host, mmproj_path="/c/p"
    )
    assert command[1:3] == ("--model", "/c/files/m.gguf")
    assert command[command.index("--mmproj") + 1] == "/c/p"
    assert "-hf" not in command and "--hf-repo" not in command
    plain = server_command("llama-server", isvc(), the_model, model_path="/c/files/m.gguf", port=1, host=host)
    assert "--mmproj" not in plain
