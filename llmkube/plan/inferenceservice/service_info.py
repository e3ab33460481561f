"""What the per-service gauges say about an InferenceService (llmkube_inferenceservice_info, _replicas,
_gpus_per_replica), derived from the service and its Model as the planner derives them."""

from dataclasses import dataclass

from llmkube.api.inferenceservice import InferenceService
from llmkube.api.model import Model
from llmkube.plan.inferenceservice.gpu import effective_gpu_count
from llmkube.plan.inferenceservice.runtimes import resolve_runtime

#: the `state` label of llmkube_inferenceservice_replicas, and the status field each reads
REPLICA_STATES = {"desired": "desired_replicas", "ready": "ready_replicas", "running": "replicas"}


@dataclass(frozen=True)
class ServiceInfo:
    model: str
    runtime: str
    #: the Model's `hardware.accelerator` ("" when it names none or the Model is missing)
    accelerator: str
    #: GPUs each replica requests: the Model's count first, then the service's
    gpus_per_replica: int
    #: state -> count, from the written status; empty before the first status
    replicas: dict[str, int]


def service_info(isvc: InferenceService, model: Model | None) -> ServiceInfo:
    spec = isvc.spec
    hardware = model.spec.hardware if model is not None else None
    if model is not None:
        gpus = effective_gpu_count(spec, model)
    else:
        gpus = max(spec.resources.gpu or 0, 0) if spec.resources else 0
    status = isvc.status
    replicas = (
        {state: getattr(status, field) or 0 for state, field in REPLICA_STATES.items()}
        if status is not None and status.phase
        else {}
    )
    return ServiceInfo(
        model=spec.model_ref,
        runtime=resolve_runtime(spec),
        accelerator=(hardware.accelerator or "") if hardware else "",
        gpus_per_replica=gpus,
        replicas=replicas,
    )
