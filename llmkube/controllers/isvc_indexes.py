"""The secondary indexes of the InferenceService controller's caches: how a change to a Model, a
PriorityClass, a RuntimeClass, a Pod, an EndpointSlice or a Node's GPUs finds the services it
concerns without a scan."""

from collections.abc import Iterable

from llmkube.kube.cache import by_field
from llmkube.kube.types import Obj
from llmkube.plan.inferenceservice.names import CACHE_PVC_NAME, service_name
from llmkube.plan.inferenceservice.priority import class_for
from llmkube.plan.inferenceservice.scheduling import UNSCHEDULABLE

# Indexes on the InferenceService cache.
BY_MODEL = "modelRef"
#: one function for BY_MODEL: the Model controller registers it on the same cache too
model_ref_index = by_field("spec", "modelRef")
#: spec.speculativeDecoding.draftModelRef (v0.9): a Model a service reads beside its own
BY_DRAFT_MODEL = "draftModelRef"
BY_SERVICE_NAME = "serviceName"
BY_PRIORITY_CLASS = "priorityClass"
BY_RUNTIME_CLASS = "runtimeClass"
# Services whose stored status says no node has the GPUs one of their pods asks for.
BY_GPUS_NEVER_FIT = "gpusNeverFit"
NEVER_FIT = "true"
# Index on pods and metal EndpointSlices.
BY_SERVICE_LABEL = "service"
BY_SLICE_SERVICE = "sliceService"
SLICE_SERVICE_LABEL = "kubernetes.io/service-name"
# The per-namespace model cache claims, and nothing else of the cluster's claims.
CACHE_CLAIM_SELECTOR = f"metadata.name={CACHE_PVC_NAME}"


def _namespaced(obj: Obj, value: str) -> tuple[str, ...]:
    namespace = (obj.get("metadata") or {}).get("namespace") or ""
    return (f"{namespace}/{value}",)


def service_name_index(obj: Obj) -> Iterable[str]:
    # EndpointSlices name the Service (dots replaced by dashes); this maps back to every service
    # with that Service name, dots included (the reference operator's mapping missed those).
    return _namespaced(obj, service_name((obj.get("metadata") or {}).get("name") or ""))


def priority_class_index(obj: Obj) -> Iterable[str]:
    # Read from the two fields that decide it: validating the whole service on every cache event
    # would cost far more than the index is worth.
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return ()
    custom, priority = spec.get("priorityClassName"), spec.get("priority")
    return (
        class_for(
            custom if isinstance(custom, str) else None, priority if isinstance(priority, str) else None
        ),
    )


def runtime_class_index(obj: Obj) -> Iterable[str]:
    spec = obj.get("spec")
    name = spec.get("runtimeClassName") if isinstance(spec, dict) else None
    return (name,) if isinstance(name, str) and name else ()


def gpus_never_fit_index(obj: Obj) -> Iterable[str]:
    # As plan.scheduling.SchedulingInfo.gpus_never_fit reads, from the stored status.
    status = obj.get("status")
    if not isinstance(status, dict):
        return ()
    return (
        (NEVER_FIT,) if status.get("schedulingStatus") == UNSCHEDULABLE and status.get("waitingFor") else ()
    )
