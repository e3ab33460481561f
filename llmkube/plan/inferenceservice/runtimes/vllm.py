"""vLLM OpenAI server: positional model, then host/port, then `vllmConfig`.

One deliberate difference: speculative decoding is passed as `--speculative-config <json>`. The
reference's `--speculative-model`/`--num-speculative-tokens` flags were removed from vLLM long
before the default image (v0.20), which would refuse to start with them.
"""

import json

from llmkube.api.base import KubeObject
from llmkube.api.inferenceservice import InferenceServiceSpec, VLLMConfig
from llmkube.plan.inferenceservice.images import DEFAULT_RUNTIME_IMAGES
from llmkube.plan.inferenceservice.runtimes.base import (
    ContainerProcess,
    RuntimeDefaults,
    RuntimeInputs,
    has_flag,
    secret_env,
)
from llmkube.plan.inferenceservice.serving_mode import vllm_mode_args

DEFAULTS = RuntimeDefaults(
    name="vllm",
    container_name="vllm",
    default_image=DEFAULT_RUNTIME_IMAGES["vllm"],
    default_port=8000,
    needs_model_init=True,
    hpa_metric="vllm:num_requests_running",
    probe="http",
    # The HuggingFace, vLLM, torch-compile and Triton caches and vLLM's config all live under $HOME.
    writable_dirs=("/tmp",),
    in_flight_metrics=("vllm:num_requests_running", "vllm:num_requests_waiting"),
)


def build(inputs: RuntimeInputs) -> ContainerProcess:
    spec, gpus = inputs.spec, inputs.gpu_count
    extra = spec.extra_args or []
    # A local file when the init container fetched one; else the source itself (an HF repo id).
    args = [inputs.model_path or inputs.model_source]
    if not has_flag(extra, "--host"):  # v0.9 bindAddress reaches inputs.host; extraArgs win
        args += ["--host", inputs.host]
    args += ["--port", str(inputs.port)]
    if not inputs.model_path and inputs.model_revision and not has_flag(extra, "--revision"):
        args += ["--revision", inputs.model_revision]
    config = spec.vllm_config
    if config is not None:
        args += config_args(config, gpus)
    if gpus > 1 and (config is None or config.tensor_parallel_size is None):
        args += ["--tensor-parallel-size", str(gpus)]
    if spec.parallel_slots and spec.parallel_slots >= 1 and not has_flag(extra, "--max-num-seqs"):
        args += ["--max-num-seqs", str(spec.parallel_slots)]
    args += speculative_decoding_args(inputs)
    args += vllm_mode_args(spec)
    args += extra
    env: tuple[KubeObject, ...] = ()
    if config is not None and config.hf_token_secret_ref is not None:
        env = (secret_env("HF_TOKEN", config.hf_token_secret_ref),)
    return ContainerProcess(args=tuple(args), env=env)


def config_args(config: VLLMConfig, gpu_count: int) -> list[str]:
    args: list[str] = []
    if config.tensor_parallel_size is not None and config.tensor_parallel_size > 1:
        args += ["--tensor-parallel-size", str(config.tensor_parallel_size)]
    if config.max_model_len is not None and config.max_model_len > 0:
        args += ["--max-model-len", str(config.max_model_len)]
    if config.quantization:
        args += ["--quantization", config.quantization]
    if config.dtype:
        args += ["--dtype", config.dtype]
    kv_dtype = kv_cache_dtype(config)
    if kv_dtype:
        args += ["--kv-cache-dtype", kv_dtype]
    if config.enable_prefix_caching:
        args.append("--enable-prefix-caching")
    if config.enable_chunked_prefill:
        args.append("--enable-chunked-prefill")
    if config.max_num_batched_tokens is not None:
        args += ["--max-num-batched-tokens", str(config.max_num_batched_tokens)]
    if config.attention_backend:
        args += ["--attention-backend", config.attention_backend]
    speculative = config.speculative
    if speculative is not None and speculative.enabled and speculative.model:
        settings: dict[str, object] = {"model": speculative.model}
        if speculative.num_speculative_tokens is not None:
            settings["num_speculative_tokens"] = speculative.num_speculative_tokens
        args += ["--speculative-config", json.dumps(settings, separators=(",", ":"))]
    if config.enable_expert_parallel:
        args.append("--enable-expert-parallel")
    # CPU offload and the GPU memory fraction only mean something with a GPU; without one they are
    # skipped and reported by validation as ignored settings.
    if config.cpu_offload_gb is not None and gpu_count > 0:
        args += ["--cpu-offload-gb", str(config.cpu_offload_gb)]
    if config.gpu_memory_utilization is not None and gpu_count > 0:
        args += ["--gpu-memory-utilization", repr(config.gpu_memory_utilization)]
    return args


def speculative_decoding_args(inputs: RuntimeInputs) -> list[str]:
    """v0.9 speculativeDecoding on vLLM: a draft model (its staged weights) or n-gram lookup, as
    one --speculative-config; vllmConfig.speculative, when enabled, is the older way and wins.
    Other types are refused by validation (vLLM has no such method)."""
    decoding, config = inputs.spec.speculative_decoding, inputs.spec.vllm_config
    if decoding is None or (config and config.speculative and config.speculative.enabled):
        return []
    kind = VLLM_SPEC_METHODS.get(decoding.type)
    if kind is None:
        return []
    settings: dict[str, object] = {"method": kind} if kind == "ngram" else {}
    if kind == "draft":
        if not inputs.draft_model_path:
            return []
        settings = {"model": inputs.draft_model_path}
    if decoding.n_draft_max:
        settings["num_speculative_tokens"] = decoding.n_draft_max
    return ["--speculative-config", json.dumps(settings, separators=(",", ":"))]


#: speculativeDecoding.type -> what vLLM does for it (a draft model, or n-gram prompt lookup)
VLLM_SPEC_METHODS = {"draft": "draft", "draft-simple": "draft", "ngram-simple": "ngram"}


def kv_cache_dtype(config: VLLMConfig) -> str:
    """The custom dtype wins; "auto" (the CRD default) means "let vLLM decide", so no flag."""
    chosen = config.kv_cache_custom_dtype or config.kv_cache_dtype or ""
    return "" if chosen == "auto" else chosen


def speculative_missing_model(spec: InferenceServiceSpec) -> bool:
    """speculative.enabled with no draft model: the flags are skipped (VLLMSpecValid=False)."""
    speculative = spec.vllm_config.speculative if spec.vllm_config else None
    return bool(speculative and speculative.enabled and not speculative.model)
