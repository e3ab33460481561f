"""Events the controller should emit for a plan (reference §2 step 7, decision #13).

Every warning is also kept in a condition (`Degraded` for an invalid spec, `SpecValid` for a setting
without effect or a piece of advice), and its Event is announced only when that condition changes
(`announced`): once per problem and generation, not once per reconcile, so a restarted controller,
which finds the conditions already stored, announces nothing again (issue 11, item 5). The reference
re-emitted them on every reconcile.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.api.meta import Condition
from llmkube.api.model import Model
from llmkube.plan.source import SourceKind, classify_source

EventType = Literal["Normal", "Warning"]
MISSING_MEMORY_REQUEST = "MissingMemoryRequest"
MISSING_SKIP_MODEL_INIT = "MissingSkipModelInit"
INVALID_SPEC = "InvalidSpec"
IGNORED_SETTING = "IgnoredSetting"


SPEC_VALID = "SpecValid"


@dataclass(frozen=True)
class PlannedEvent:
    type: EventType
    reason: str
    message: str
    #: the condition that carries the same news: the Event is announced when it changes
    condition: str | None = None


def announced(
    events: Iterable[PlannedEvent], previous: Sequence[Condition] | None, current: Sequence[Condition] | None
) -> tuple[PlannedEvent, ...]:
    """The events worth announcing: those whose condition this status changes (status, reason,
    message or observed generation), and those no condition carries."""
    before = {c.type: _news(c) for c in previous or ()}
    after = {c.type: _news(c) for c in current or ()}
    return tuple(
        event
        for event in events
        if event.condition is None or before.get(event.condition) != after.get(event.condition)
    )


def _news(condition: Condition) -> tuple[object, ...]:
    return (condition.status, condition.reason, condition.message, condition.observed_generation)


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
    if classify_source(model.spec.source) is not SourceKind.HUGGINGFACE:
        return None
    return PlannedEvent(
        "Warning",
        MISSING_SKIP_MODEL_INIT,
        f'Model "{model.metadata.name}" has the HuggingFace repo id source "{model.spec.source}", which the '
        "model-downloader init container cannot fetch; set skipModelInit: true so the runtime downloads it",
        SPEC_VALID,
    )
