"""The serving mode (v0.9 `spec.mode`, reported in `status.mode`): chat, embedding or rerank, and
the flags each runtime needs for it.

Unset, the mode is read from what the spec already says, as the reference reads it: a reranker's
flags (`--reranking`, `--rerank`), then an embedder's (`--embedding`, `--embeddings`), in extraArgs
or args, then the endpoint path (`/rerank`, `/embeddings`); else chat. Flags are added only for a
mode the spec sets, never for one inferred (those specs already carry their flags), and a flag
already in extraArgs wins. ModelRouters send `/v1/embeddings` and `/v1/rerank` to services of the
matching mode (plan/router).
"""

from typing import Literal

from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.plan.inferenceservice.command_line import has_flag

Mode = Literal["chat", "embedding", "rerank"]
#: the label of the service's Service (and so of its EndpointSlices) that says its mode; the same
#: name plan/router/endpoints.py reads (a test keeps them one)
MODE_LABEL = "inference.llmkube.dev/mode"


def resolve_mode(spec: InferenceServiceSpec) -> Mode:
    if spec.mode is not None:
        return spec.mode
    args = [*(spec.extra_args or []), *(spec.args or [])]
    if has_flag(args, "--reranking", "--rerank"):
        return "rerank"
    if has_flag(args, "--embedding", "--embeddings"):
        return "embedding"
    path = (spec.endpoint.path if spec.endpoint else None) or ""
    if "/rerank" in path:
        return "rerank"
    if "/embeddings" in path:
        return "embedding"
    return "chat"


def llamacpp_mode_args(spec: InferenceServiceSpec) -> list[str]:
    """llama-server's flags for an embedding or rerank service: a reranker needs --embedding too;
    `--cache-ram 0` because llama-server keeps a prompt cache (8 GiB by default) that only
    completions read."""
    extra = spec.extra_args or []
    wanted: list[tuple[tuple[str, ...], list[str]]] = []
    if spec.mode == "rerank":
        wanted = [
            (("--reranking", "--rerank"), ["--reranking"]),
            (("--embedding", "--embeddings"), ["--embedding"]),
            (("--pooling",), ["--pooling", "rank"]),
        ]
    elif spec.mode == "embedding":
        wanted = [(("--embedding", "--embeddings"), ["--embedding"]), (("--pooling",), ["--pooling", "last"])]
    if wanted:
        wanted.append((("--cache-ram", "-cram"), ["--cache-ram", "0"]))
    return [arg for flags, args in wanted if not has_flag(extra, *flags) for arg in args]


def vllm_mode_args(spec: InferenceServiceSpec) -> list[str]:
    """vLLM serves embeddings and scores with its pooling runner; an embedder converts the model's
    head to one (`--convert embed`), a reranker uses its own classification head."""
    extra = spec.extra_args or []
    if spec.mode not in ("embedding", "rerank") or has_flag(extra, "--runner", "--task"):
        return []
    args = ["--runner", "pooling"]
    if spec.mode == "embedding" and not has_flag(extra, "--convert"):
        args += ["--convert", "embed"]
    return args
