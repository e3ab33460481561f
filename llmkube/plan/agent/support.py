"""What a host agent can serve: llama.cpp's llama-server, GGUF models, from http(s), a local path
on the host, or the files a Model names in a Hugging Face repository (the agent downloads them;
llama-server never fetches from the Hub itself). Anything else is reported as unsupported, with
what to use instead, rather than left waiting for an agent that never comes."""

from llmkube.api.inferenceservice import InferenceService
from llmkube.api.model import Model
from llmkube.plan.model.source import SourceKind, classify_source

SERVED_RUNTIME = "llamacpp"
SERVED_FORMAT = "gguf"
# The reference's agent runs these next to llama-server; this one does not.
OTHER_HOST_RUNTIMES = "vllm-swift, oMLX, mlx-server and Ollama"


def unsupported(isvc: InferenceService, model: Model) -> str | None:
    """Why this agent cannot serve the service (a sentence), or None when it can."""
    runtime = isvc.spec.runtime or SERVED_RUNTIME
    if runtime != SERVED_RUNTIME:
        return (
            f"runtime \"{runtime}\" is not served by llmkube's host agent, which runs llama.cpp's "
            f"llama-server only (runtime llamacpp, GGUF models); run it in the cluster with a "
            "non-metal Model"
        )
    fmt = model.spec.format or SERVED_FORMAT
    if fmt != SERVED_FORMAT:
        return (
            f'Model "{model.metadata.name}" has format {fmt}, which llama-server cannot load; '
            f"llmkube's host agent serves GGUF models only ({OTHER_HOST_RUNTIMES}, which serve "
            "MLX and safetensors models on the reference's agent, are not supported by it)"
        )
    kind = classify_source(model.spec.source)
    if kind is SourceKind.PVC:
        return (
            f'Model "{model.metadata.name}" has the source {model.spec.source}, a claim inside the '
            "cluster, which a host outside it cannot mount; use an http(s) URL or a path on the host"
        )
    if kind in (SourceKind.HF, SourceKind.HUGGINGFACE):
        if not model.spec.files:
            return hf_files_missing(model)
        if model.spec.source_secret_ref and model.spec.source_secret_ref.name:
            return (
                f'Model "{model.metadata.name}" names the Secret {model.spec.source_secret_ref.name} for '
                f"{model.spec.source}: llmkube's host agent reads no Secret, so it downloads public "
                "repositories only; serve a private or gated model from an http(s) mirror or a path on "
                "the host"
            )
    if kind is SourceKind.UNKNOWN:
        return f'Model "{model.metadata.name}" has the source "{model.spec.source}", which is no source kind'
    return None


def hf_files_missing(model: Model) -> str:
    """A Hugging Face repository without spec.files: the agent downloads only the files a Model
    names (a whole repository, or llama-server's `-hf`, would take what the repository chooses)."""
    return (
        f'Model "{model.metadata.name}" names the Hugging Face repository {model.spec.source} but no file '
        "of it: llmkube's host agent downloads only the files a Model lists. Name the .gguf file in "
        "spec.files (the first shard of a split model first, the others after it) and a multimodal "
        "projector in spec.mmproj"
    )
