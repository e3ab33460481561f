"""HuggingFace Text Generation Inference.

Unlike the reference, which ignored them, `parallelSlots` maps to TGI's own
`--max-concurrent-requests` and `extraArgs` are appended last, as the schema documents for
"additional command-line arguments".
"""

from llmkube.api.base import KubeObject
from llmkube.plan.inferenceservice.images import DEFAULT_RUNTIME_IMAGES
from llmkube.plan.inferenceservice.runtimes.base import (
    ContainerProcess,
    RuntimeDefaults,
    RuntimeInputs,
    has_flag,
    secret_env,
)

DEFAULTS = RuntimeDefaults(
    name="tgi",
    container_name="tgi",
    default_image=DEFAULT_RUNTIME_IMAGES["tgi"],
    default_port=80,
    needs_model_init=False,  # TGI downloads its own weights from --model-id
    hpa_metric="tgi_queue_size",
    probe="http",
    # The image keeps its HuggingFace cache in /data (HUGGINGFACE_HUB_CACHE) and the rest under $HOME.
    writable_dirs=("/tmp", "/data"),
    in_flight_metrics=("tgi_batch_current_size", "tgi_queue_size"),
)


def build(inputs: RuntimeInputs) -> ContainerProcess:
    spec = inputs.spec
    extra = spec.extra_args or []
    args = ["--model-id", inputs.model_source]
    if not has_flag(extra, "--hostname"):  # v0.9 bindAddress reaches inputs.host; extraArgs win
        args += ["--hostname", inputs.host]
    args += ["--port", str(inputs.port)]
    if inputs.model_revision and not has_flag(extra, "--revision"):
        args += ["--revision", inputs.model_revision]
    config = spec.tgi_config
    env: tuple[KubeObject, ...] = ()
    if config is not None:
        if config.quantize:
            args += ["--quantize", config.quantize]
        if config.max_input_length is not None and config.max_input_length > 0:
            args += ["--max-input-length", str(config.max_input_length)]
        if config.max_total_tokens is not None and config.max_total_tokens > 0:
            args += ["--max-total-tokens", str(config.max_total_tokens)]
        if config.dtype:
            args += ["--dtype", config.dtype]
        if config.hf_token_secret_ref is not None:
            env = (secret_env("HUGGING_FACE_HUB_TOKEN", config.hf_token_secret_ref),)
    if inputs.gpu_count > 1:
        args += ["--num-shard", str(inputs.gpu_count)]
    if spec.parallel_slots and spec.parallel_slots >= 1 and not has_flag(extra, "--max-concurrent-requests"):
        args += ["--max-concurrent-requests", str(spec.parallel_slots)]
    args += extra
    return ContainerProcess(args=tuple(args), env=env)
