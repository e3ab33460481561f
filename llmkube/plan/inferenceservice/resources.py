"""Container resources and the validation of the service's quantity strings.

GPU services get `limits: {<gpu resource>: <count>}`; `cpu` becomes a CPU request and `hostMemory`
(else `memory`) the memory request, and the memory limit too unless the memory-limit annotation
says otherwise (plan/inferenceservice/hardening.py; the reference set no limits). CPU is never limited, and
`gpuMemory` is only validated: it describes the GPU, which the extended resource already selects.
"""

from llmkube.api.base import KubeObject
from llmkube.api.inferenceservice import InferenceResources
from llmkube.apimachinery.quantity import QuantityError, canonical_quantity, parse_quantity
from llmkube.plan.inferenceservice.objects import compact

QUANTITY_FIELDS = ("cpu", "memory", "host_memory", "gpu_memory", "ephemeral_storage")
_JSON_NAMES = {
    "cpu": "cpu",
    "memory": "memory",
    "host_memory": "hostMemory",
    "gpu_memory": "gpuMemory",
    "ephemeral_storage": "ephemeralStorage",
}


def quantity_errors(resources: InferenceResources | None) -> list[tuple[str, str]]:
    """(field path, message) for every quantity string that is invalid or negative."""
    errors: list[tuple[str, str]] = []
    for field in QUANTITY_FIELDS:
        text = getattr(resources, field) if resources else None
        if not text:
            continue
        path = f"spec.resources.{_JSON_NAMES[field]}"
        try:
            value = parse_quantity(text).value
        except QuantityError:
            errors.append((path, f'invalid quantity "{text}" (for example 500m, 2, 4Gi)'))
            continue
        if value < 0:
            errors.append((path, f'quantity "{text}" must not be negative'))
    return errors


def container_resources(
    resources: InferenceResources | None,
    gpu_count: int,
    gpu_resource: str,
    memory_limit: str | None,
    claims: list[str] | None = None,
) -> KubeObject:
    """Assumes `quantity_errors(resources)` is empty. `memory_limit` comes from
    plan/inferenceservice/hardening.py: by default what a server asked for is what it may use.
    `ephemeralStorage` (v0.9) is both the request and the limit, as the reference sets it: the
    scheduler sees the download, and an overrun is this pod's. `claims` are the pod's DRA claims
    the container uses (the Model's resourceClaims)."""
    limits = {gpu_resource: str(gpu_count)} if gpu_count > 0 else {}
    requests: dict[str, str] = {}
    if resources is not None:
        if resources.cpu:
            requests["cpu"] = canonical_quantity(resources.cpu)
        memory = resources.host_memory or resources.memory
        if memory:
            requests["memory"] = canonical_quantity(memory)
        if resources.ephemeral_storage:
            requests["ephemeral-storage"] = limits["ephemeral-storage"] = canonical_quantity(
                resources.ephemeral_storage
            )
    if memory_limit:
        limits["memory"] = memory_limit
    return compact(
        {"limits": limits, "requests": requests, "claims": [{"name": name} for name in claims or []]}
    )
