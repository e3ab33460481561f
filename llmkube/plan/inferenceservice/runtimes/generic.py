"""Any container: the user's image, command and args, nothing generated."""

from llmkube.plan.inferenceservice.runtimes.base import ContainerProcess, RuntimeDefaults, RuntimeInputs

DEFAULTS = RuntimeDefaults(
    name="generic",
    container_name="inference-server",
    default_image="",
    default_port=8080,
    needs_model_init=False,
    hpa_metric="llamacpp:requests_processing",  # the reference fallback
    probe="tcp",
    exports_hpa_metric=False,
)


def build(inputs: RuntimeInputs) -> ContainerProcess:
    args = inputs.spec.args
    return ContainerProcess(args=tuple(args) if args else None)
