"""SGLang (runtime `sglang`), planned as the reference plans it: `python3 -m sglang.launch_server`
with the model path (the staged file's directory, or the source for a repository SGLang fetches),
port, `--enable-metrics`, host and served model name, then `sglangConfig` flag by flag, `--tp` from
the GPU count when the config says none, `--is-embedding` for an embedding service, extraArgs last.
Port 30000; startup and readiness probe `/health_generate`, liveness `/health`; HPA metric
`sglang:num_running_reqs`.
"""

import posixpath

from llmkube.api.base import KubeObject
from llmkube.api.inferenceservice import SGLangConfig
from llmkube.plan.inferenceservice.images import DEFAULT_RUNTIME_IMAGES
from llmkube.plan.inferenceservice.runtimes.base import (
    ContainerProcess,
    RuntimeDefaults,
    RuntimeInputs,
    has_flag,
    secret_env,
)

DEFAULTS = RuntimeDefaults(
    name="sglang",
    container_name="sglang",
    default_image=DEFAULT_RUNTIME_IMAGES["sglang"],
    default_port=30000,
    needs_model_init=True,
    hpa_metric="sglang:num_running_reqs",
    probe="http",
    writable_dirs=("/tmp",),
    in_flight_metrics=("sglang:num_running_reqs", "sglang:num_queue_reqs"),
    probe_paths=("/health_generate", "/health", "/health_generate"),
)


def build(inputs: RuntimeInputs) -> ContainerProcess:
    spec, gpus = inputs.spec, inputs.gpu_count
    extra = spec.extra_args or []
    # SGLang loads a directory (config, tokenizer, weights): the staged files' own.
    source = posixpath.dirname(inputs.model_path) if inputs.model_path else inputs.model_source
    args = ["--model-path", source, "--port", str(inputs.port), "--enable-metrics"]
    if not has_flag(extra, "--host"):
        args += ["--host", inputs.host]
    if spec.model_ref and not has_flag(extra, "--served-model-name"):
        args += ["--served-model-name", spec.model_ref]
    config = spec.sglang_config
    if config is not None:
        args += config_args(config, gpus)
    if gpus > 1 and (config is None or config.tensor_parallel_size is None):
        args += ["--tp", str(gpus)]
    if spec.mode == "embedding" and not has_flag(extra, "--is-embedding"):
        args.append("--is-embedding")
    args += extra
    env: tuple[KubeObject, ...] = ()
    if config is not None and config.hf_token_secret_ref is not None:
        env = (secret_env("HF_TOKEN", config.hf_token_secret_ref),)
    return ContainerProcess(command=("python3", "-m", "sglang.launch_server"), args=tuple(args), env=env)


def config_args(config: SGLangConfig, gpu_count: int) -> list[str]:
    args: list[str] = []
    for flag, value in (
        ("--tp", config.tensor_parallel_size),
        ("--ep-size", config.expert_parallel_size),
        ("--dp", config.data_parallel_size),
        ("--context-length", config.context_length),
    ):
        if value is not None:
            args += [flag, str(value)]
    if config.mem_fraction_static is not None and gpu_count > 0:  # GPU memory: nothing without one
        args += ["--mem-fraction-static", repr(config.mem_fraction_static)]
    for flag, value in (
        ("--chunked-prefill-size", config.chunked_prefill_size),
        ("--max-running-requests", config.max_running_requests),
    ):
        if value is not None:
            args += [flag, str(value)]
    if config.quantization:
        args += ["--quantization", config.quantization]
    kv = config.kv_cache_custom_dtype or config.kv_cache_dtype
    if kv and kv != "auto":
        args += ["--kv-cache-dtype", kv]
    if config.attention_backend:
        args += ["--attention-backend", config.attention_backend]
    if config.enable_prefix_caching is False:
        args.append("--disable-radix-cache")
    for flag, text in (
        ("--tool-call-parser", config.tool_call_parser),
        ("--reasoning-parser", config.reasoning_parser),
        ("--chat-template", config.chat_template),
    ):
        if text:
            args += [flag, text]
    speculative = config.speculative
    if (
        speculative is not None
        and speculative.enabled
        and speculative.algorithm
        and speculative.draft_model_path
    ):
        args += [
            "--speculative-algorithm",
            speculative.algorithm,
            "--speculative-draft-model-path",
            speculative.draft_model_path,
        ]
        for flag, number in (
            ("--speculative-num-steps", speculative.num_steps),
            ("--speculative-eagle-topk", speculative.eagle_top_k),
            ("--speculative-num-draft-tokens", speculative.num_draft_tokens),
            ("--speculative-accept-threshold-single", speculative.accept_threshold_single),
            ("--speculative-accept-threshold-acc", speculative.accept_threshold_acc),
        ):
            if number is not None:
                args += [flag, str(number)]
    loras = [f"{a.name}={a.path}" for a in config.lora_adapters or []] + list(config.lora_modules or [])
    if loras:
        args += ["--lora-paths", *loras]
    if config.max_lora_rank is not None:
        args += ["--max-lora-rank", str(config.max_lora_rank)]
    if config.lora_target_modules:
        args += ["--lora-target-modules", *config.lora_target_modules]
    if config.log_level:
        args += ["--log-level", config.log_level]
    if config.trust_remote_code:
        args.append("--trust-remote-code")
    if config.skip_tokenizer_init:
        args.append("--skip-tokenizer-init")
    return args
