"""What an InferenceService asks of the GPU quotas (plan/quota/decision.py): what one replica holds,
how many replicas it wants, and how many it holds now.

A replica holds the service's effective GPU count, and the GPU memory of the memory-fit estimate
(memory_fit.py: the offloaded layers' weights, KV cache and compute buffers) for llama.cpp; for the
other runtimes, which take the whole of each GPU they are given, the GPUs' memory (resources.gpuMemory,
the Model's, or the largest GPU among the nodes), else unknown. A service wants spec.replicas, or its
HPA's maxReplicas under autoscaling (the most the HPA may scale it to: the quota caps maxReplicas,
so an HPA can never scale past what was admitted); a suspended or scaled-to-zero one wants none.
It holds what its Deployment (or, under autoscaling, its HPA's maxReplicas) was given.
"""

from collections.abc import Mapping, Sequence
from typing import Any

from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.api.model import Model
from llmkube.plan.inferenceservice.gpu import effective_gpu_count, is_metal
from llmkube.plan.inferenceservice.memory_fit import estimate_memory, gpu_memory_per_device
from llmkube.plan.inferenceservice.runtimes import resolve_runtime
from llmkube.plan.quota.decision import ReplicaCost


def replica_cost(
    spec: InferenceServiceSpec, model: Model, node_gpu_memory: Sequence[int] = ()
) -> ReplicaCost:
    if is_metal(model):
        return ReplicaCost(0, 0)  # served on a host by the agent: no cluster GPU
    gpus = effective_gpu_count(spec, model)
    if gpus <= 0:
        return ReplicaCost(0, 0)
    if resolve_runtime(spec) == "llamacpp":
        estimate = estimate_memory(model, spec, gpu_count=gpus)
        if estimate is not None:
            return ReplicaCost(gpus, estimate.gpu_total)
    device, _ = gpu_memory_per_device(spec, model, node_gpu_memory)
    return ReplicaCost(gpus, device * gpus if device is not None else None)


def wanted_replicas(spec: InferenceServiceSpec) -> int:
    if spec.suspend:
        return 0
    replicas = spec.replicas if spec.replicas is not None else 1
    if replicas <= 0:
        return 0
    if spec.autoscaling is not None:
        return max(spec.autoscaling.max_replicas, 0)
    return replicas


def _int(obj: Mapping[str, Any] | None, *path: str) -> int:
    value: object = obj
    for part in path:
        value = value.get(part) if isinstance(value, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def held_replicas(deployment: Mapping[str, Any] | None, hpa: Mapping[str, Any] | None) -> int:
    """The replicas a service's objects allow now: the larger of its Deployment's and its HPA's
    maxReplicas (an HPA may raise the Deployment up to that at any moment)."""
    return max(_int(deployment, "spec", "replicas"), _int(hpa, "spec", "maxReplicas"))
