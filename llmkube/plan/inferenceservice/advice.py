"""Advice the planner gives about an InferenceService: settings that will not work as the user
probably expects (announced as Warning Events, kept in the SpecValid condition)."""

from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.api.model import Model
from llmkube.plan.events import SPEC_VALID, PlannedEvent
from llmkube.plan.model.source import SourceKind, classify_source

MISSING_MEMORY_REQUEST = "MissingMemoryRequest"
MISSING_SKIP_MODEL_INIT = "MissingSkipModelInit"


def missing_memory_request(spec: InferenceServiceSpec) -> PlannedEvent | None:
    """CPU MoE offload and a host-side KV cache live in host RAM: without a memory request the pod
    can land on a node that cannot hold them and get OOM-killed."""
    if not (spec.moe_cpu_offload or spec.no_kv_offload):
        return None
    resources = spec.resources
    if resources is not None and (resources.memory or resources.host_memory):
        return None
    return PlannedEvent(
        "Warning",
        MISSING_MEMORY_REQUEST,
        "moeCPUOffload or noKvOffload keeps model data in host memory, but neither resources.memory nor "
        "resources.hostMemory is set: the pod may be scheduled on a node without enough memory",
        SPEC_VALID,
    )


def missing_skip_model_init(
    spec: InferenceServiceSpec, model: Model, needs_model_init: bool
) -> PlannedEvent | None:
    """A HuggingFace repo id cannot be fetched by the init container's curl; the runtime must fetch
    it. Only runtimes that get an init container are concerned (the reference also warned for TGI)."""
    if not needs_model_init or spec.skip_model_init:
        return None
    kind = classify_source(model.spec.source)
    if kind not in (SourceKind.HUGGINGFACE, SourceKind.HF) or model.spec.files or model.spec.mmproj:
        return None  # with files listed, the downloader stages them from the repository
    return PlannedEvent(
        "Warning",
        MISSING_SKIP_MODEL_INIT,
        f'Model "{model.metadata.name}" has the HuggingFace repo id source "{model.spec.source}", which the '
        "model-downloader init container cannot fetch; set skipModelInit: true so the runtime downloads it",
        SPEC_VALID,
    )
