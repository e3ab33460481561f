"""llama.cpp's router mode (runtime `llamacpp-router`): one llama-server that serves several models,
loading each on its first request (`--models-dir`), instead of one `--model`.

The pinned llama.cpp build has it (`--models-dir`, `--models-preset`, `--models-max`; checked
against the node tier's llama-server by tests/node). The models are the Model's files, staged by
the model downloader as for `llamacpp` (list them in `spec.files`): the router is pointed at the
directory they are in. A `--models-dir` or `--models-preset` in extraArgs wins (mount another
directory with extraVolumes). GPU layers and splits are per model in router mode, so the
controller sets none (use a preset or extraArgs), as the reference does.
"""

import posixpath

from llmkube.plan.inferenceservice.images import DEFAULT_RUNTIME_IMAGES
from llmkube.plan.inferenceservice.runtimes.base import (
    ContainerProcess,
    RuntimeDefaults,
    RuntimeInputs,
    has_flag,
)
from llmkube.plan.inferenceservice.serving_mode import llamacpp_mode_args

DEFAULTS = RuntimeDefaults(
    name="llamacpp-router",
    container_name="llama-server",
    default_image=DEFAULT_RUNTIME_IMAGES["llamacpp"],
    default_port=8080,
    needs_model_init=True,
    hpa_metric="llamacpp:requests_processing",
    probe="http",
    writable_dirs=("/tmp",),
    in_flight_metrics=("llamacpp:requests_processing", "llamacpp:requests_deferred"),
)


def build(inputs: RuntimeInputs) -> ContainerProcess:
    spec = inputs.spec
    extra = spec.extra_args or []
    args: list[str] = []
    if not has_flag(extra, "--models-dir", "--models-preset"):
        models_dir = inputs.models_dir or posixpath.dirname(inputs.model_path)
        if models_dir:
            args += ["--models-dir", models_dir]
    if not has_flag(extra, "--host"):
        args += ["--host", inputs.host]
    args += ["--port", str(inputs.port)]
    args += llamacpp_mode_args(spec)
    args += extra
    if not has_flag(extra, "--metrics"):
        args.append("--metrics")
    return ContainerProcess(args=tuple(args))
