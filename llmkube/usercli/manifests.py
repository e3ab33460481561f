"""What `llmkube deploy` creates: a Model and an InferenceService from the command's options (pure).

The reference CLI's choices where they still hold: both objects share one name, a GPU deployment
gets the Model's `hardware.gpu` and the service's `resources.gpu`. Unlike the reference, the name
comes from the source when none is given, and nothing is filled in that the user did not ask for:
the API server applies the schema's defaults, the controller its own (the llama.cpp image built for
the Model's GPU among them, plan/inferenceservice/images.py, so a service deployed here and one
applied as YAML run the same image).
"""

import re
from dataclasses import dataclass, field
from typing import Any

from llmkube.api.constants import API_VERSION, MODEL_KIND
from llmkube.api.constants import ISVC_KIND as SERVICE_KIND
from llmkube.api.enums import GPUVendor
from llmkube.api.inferenceservice import InferenceResources
from llmkube.plan.inferenceservice.names import MAX_LABEL_VALUE_LENGTH
from llmkube.plan.inferenceservice.resources import quantity_errors
from llmkube.plan.model.source import SourceKind, classify_source

ACCELERATOR_OF_VENDOR: dict[str, str] = {"nvidia": "cuda", "amd": "rocm", "intel": "intel"}

_NOT_DNS = re.compile(r"[^a-z0-9-]+")
_QUANTIZATION = re.compile(r"(?i)[._-](i?q[0-9]_[a-z0-9_]+|f16|f32|bf16)$")


class DeployError(ValueError):
    """The options cannot make a valid pair of objects; the message says which option."""


@dataclass(frozen=True)
class DeployOptions:
    source: str
    name: str | None = None
    namespace: str = "default"
    runtime: str | None = None
    image: str | None = None
    gpus: int = 0
    gpu_vendor: GPUVendor = "nvidia"
    gpu_layers: int | None = None
    gpu_memory: str | None = None
    cpu: str | None = None
    memory: str | None = None
    replicas: int | None = None
    min_replicas: int | None = None
    max_replicas: int | None = None
    context_size: int | None = None
    parallel_slots: int | None = None
    cache_type_k: str | None = None
    cache_type_v: str | None = None
    flash_attention: bool = False
    priority: str | None = None
    quantization: str | None = None
    sha256: str | None = None
    #: the files to stage from the source (its first is the one loaded) and a projector beside it
    files: tuple[str, ...] = ()
    mmproj: str | None = None
    port: int | None = None
    extra_args: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    annotations: dict[str, str] = field(default_factory=dict)


def name_from_source(source: str) -> str:
    """A DNS-1123 label from the model's file or repository name:
    `.../tinyllama-1.1b-chat-v1.0.Q4_K_M.gguf` -> `tinyllama-1-1b-chat-v1-0`."""
    last = source.rstrip("/").split("?")[0].rsplit("/", 1)[-1]
    stem = re.sub(r"(?i)\.gguf$", "", last)
    stem = _QUANTIZATION.sub("", stem)
    label = _NOT_DNS.sub("-", stem.lower()).strip("-")
    label = re.sub(r"-{2,}", "-", label)[:MAX_LABEL_VALUE_LENGTH].rstrip("-")
    if not label or not label[0].isalpha():
        label = f"model-{label}".rstrip("-")[:MAX_LABEL_VALUE_LENGTH]
    return label


def _check(options: DeployOptions, name: str) -> None:
    if classify_source(options.source) is SourceKind.UNKNOWN:
        raise DeployError(
            f'source "{options.source}" is not a URL (http, https), a path (/..., file://...), '
            "a pvc://claim/path, a HuggingFace repo id (org/name) or an id of the catalog "
            "(llmkube catalog list)"
        )
    if len(name) > MAX_LABEL_VALUE_LENGTH or not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name):
        raise DeployError(
            f'--name "{name}" must be a DNS label: lowercase letters, digits and "-", '
            f"at most {MAX_LABEL_VALUE_LENGTH} characters"
        )
    if options.max_replicas is None and options.min_replicas is not None:
        raise DeployError("--min-replicas needs --max-replicas (it turns autoscaling on)")
    low, high = options.min_replicas, options.max_replicas
    if low is not None and high is not None and low > high:
        raise DeployError(f"--min-replicas {low} is more than --max-replicas {high}")
    for entry in options.env:
        if "=" not in entry or not entry.split("=", 1)[0]:
            raise DeployError(f'--env "{entry}" must be KEY=VALUE')


def _compact(mapping: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in mapping.items() if value not in (None, {}, [], "")}


def build_manifests(options: DeployOptions) -> tuple[dict[str, Any], dict[str, Any]]:
    """(Model, InferenceService), both named `options.name` or a name made from the source."""
    name = options.name or name_from_source(options.source)
    _check(options, name)
    metadata = {"name": name, "namespace": options.namespace}
    gpu: dict[str, Any] | None = None
    accelerator = "cpu"
    if options.gpus > 0:
        accelerator = ACCELERATOR_OF_VENDOR[options.gpu_vendor]
        gpu = _compact(
            {
                "enabled": True,
                "count": options.gpus,
                "vendor": options.gpu_vendor,
                "layers": options.gpu_layers,
                "memory": options.gpu_memory,
            }
        )
    model = {
        "apiVersion": API_VERSION,
        "kind": MODEL_KIND,
        "metadata": dict(metadata),
        "spec": _compact(
            {
                "source": options.source,
                "sha256": options.sha256,
                "files": list(options.files),
                "mmproj": options.mmproj,
                "quantization": options.quantization,
                "hardware": _compact({"accelerator": accelerator, "gpu": gpu}),
            }
        ),
    }
    autoscaling = None
    if options.max_replicas is not None:
        autoscaling = _compact({"minReplicas": options.min_replicas, "maxReplicas": options.max_replicas})
    resources = _compact(
        {
            "cpu": options.cpu,
            "memory": options.memory,
            "gpu": options.gpus or None,
            "gpuMemory": options.gpu_memory,
        }
    )
    env = [{"name": key, "value": value} for key, value in (e.split("=", 1) for e in options.env)]
    service = {
        "apiVersion": API_VERSION,
        "kind": SERVICE_KIND,
        "metadata": _compact({**metadata, "annotations": dict(options.annotations)}),
        "spec": _compact(
            {
                "modelRef": name,
                "runtime": options.runtime,
                "image": options.image,
                "replicas": options.replicas,
                "autoscaling": autoscaling,
                "resources": resources,
                "contextSize": options.context_size,
                "parallelSlots": options.parallel_slots,
                "cacheTypeK": options.cache_type_k,
                "cacheTypeV": options.cache_type_v,
                "flashAttention": options.flash_attention or None,
                "priority": options.priority,
                "endpoint": {"port": options.port} if options.port else None,
                "extraArgs": list(options.extra_args),
                "env": env,
            }
        ),
    }
    _check_quantities(service)
    return model, service


# The flag behind each field the controller would refuse (plan/inferenceservice/resources.py).
_FLAG_OF_FIELD = {
    "spec.resources.cpu": "--cpu",
    "spec.resources.memory": "--memory",
    "spec.resources.gpuMemory": "--gpu-memory",
}


def _check_quantities(service: dict[str, Any]) -> None:
    """The controller's own check of the quantities (it would set the service Failed/InvalidSpec):
    made here, so a mistake is refused before anything is applied, whether or not the cluster has
    the admission policy that refuses it at apply time."""
    try:
        resources = InferenceResources.model_validate(service["spec"].get("resources") or {})
    except ValueError:
        return  # what the schema refuses, the API server says (deploy's dry run)
    for path, message in quantity_errors(resources):
        raise DeployError(f"{_FLAG_OF_FIELD.get(path, path)}: {message}")
