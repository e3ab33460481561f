"""PersonaPlex / Moshi speech-to-speech server. No default image: the user must
set `spec.image` (validation reports it otherwise)."""

from llmkube.plan.inferenceservice.runtimes.base import (
    ContainerProcess,
    RuntimeDefaults,
    RuntimeInputs,
    secret_env,
)

DEFAULTS = RuntimeDefaults(
    name="personaplex",
    container_name="personaplex",
    default_image="",
    default_port=8998,  # the server's own port; no port flag is passed
    needs_model_init=False,
    hpa_metric="llamacpp:requests_processing",  # no metric of its own: the reference fallback
    probe="tcp",
    exports_hpa_metric=False,
)
COMMAND = ("/app/moshi/.venv/bin/python", "-m", "moshi.server")


def build(inputs: RuntimeInputs) -> ContainerProcess:
    config = inputs.spec.persona_plex_config
    args = ["--ssl", "/app/ssl"]
    env = []
    if config is not None:
        if config.quantize_4bit:
            args.append("--quantize-4bit")
        if config.cpu_offload:
            args.append("--cpu-offload")
        if config.hf_token_secret_ref is not None:
            env.append(secret_env("HF_TOKEN", config.hf_token_secret_ref))
    env.append({"name": "NO_TORCH_COMPILE", "value": "1"})
    return ContainerProcess(command=COMMAND, args=tuple(args), env=tuple(env))
