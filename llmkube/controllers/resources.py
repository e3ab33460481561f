"""The API kinds the llmkube controllers read and write (llmkube's own are `llmkube.kinds`'s), and how
their caches keep them."""

from llmkube.api import constants as c
from llmkube.kinds import GPU_QUOTAS, INFERENCE_SERVICES, MANAGED_SELECTOR, MODEL_ROUTERS, MODELS
from llmkube.kube.cache import keep_only
from llmkube.kube.resource import (
    DEPLOYMENTS,
    ENDPOINT_SLICES,
    HORIZONTAL_POD_AUTOSCALERS,
    NAMESPACES,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PODS,
    PRIORITY_CLASSES,
    RUNTIME_CLASSES,
    SERVICE_CIDRS,
    SERVICES,
    Resource,
)
from llmkube.kube.types import Obj
from llmkube.plan.inferenceservice.memory_fit import GPU_MEMORY_LABELS

JOBS = Resource("batch", "v1", "jobs", "Job")
# What a ModelRouter's pod runs as (plan/router/objects.py).
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")

# Pods of our services (label existence), and the metal agent's EndpointSlices.
SERVICE_PODS_SELECTOR = c.LABEL_SERVICE
METAL_SLICES_SELECTOR = f"{c.LABEL_METAL_MANAGED_BY}={c.METAL_AGENT_VALUE}"
# Nodes are cached for their capacity, what of it pods may use (allocatable: the GPUs a pod can
# get), the GPU memory labels and their Pod networks only (model sources there are refused):
# everything else (images, conditions, other labels) would cost tens of KiB per Node
# (bench/bench_node_cache.py). One transform for the one shared Node informer (the Model and
# InferenceService controllers).
NODE_CACHE_TRANSFORM = keep_only(
    ("status", "capacity"),
    ("status", "allocatable"),
    ("spec", "podCIDRs"),
    *(("metadata", "labels", label) for label in GPU_MEMORY_LABELS.values()),
)
# Namespaces are cached for their labels (what they allow, plan/tenancy.py; which GPUQuota selectors
# pick them, plan/quota/scope.py), and whether they are being deleted (nothing can be created in them
# then), and nothing else.
NAMESPACE_CACHE_TRANSFORM = keep_only(("metadata", "deletionTimestamp"), ("metadata", "labels"))


def namespace_being_deleted(namespace: Obj | None) -> bool:
    """Whether a cached Namespace (NAMESPACE_CACHE_TRANSFORM) is being deleted."""
    return bool(((namespace or {}).get("metadata") or {}).get("deletionTimestamp"))


__all__ = [
    "DEPLOYMENTS",
    "ENDPOINT_SLICES",
    "GPU_QUOTAS",
    "HORIZONTAL_POD_AUTOSCALERS",
    "INFERENCE_SERVICES",
    "MANAGED_SELECTOR",
    "METAL_SLICES_SELECTOR",
    "MODELS",
    "MODEL_ROUTERS",
    "NAMESPACES",
    "NAMESPACE_CACHE_TRANSFORM",
    "NODES",
    "NODE_CACHE_TRANSFORM",
    "PERSISTENT_VOLUME_CLAIMS",
    "PODS",
    "PRIORITY_CLASSES",
    "ROLES",
    "ROLE_BINDINGS",
    "RUNTIME_CLASSES",
    "SERVICES",
    "SERVICE_ACCOUNTS",
    "SERVICE_CIDRS",
    "SERVICE_PODS_SELECTOR",
    "namespace_being_deleted",
]
