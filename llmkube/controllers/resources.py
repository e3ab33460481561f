"""The API kinds the llmkube controllers read and write."""

from llmkube.api import constants as c
from llmkube.kube.resource import (
    DEPLOYMENTS,
    ENDPOINT_SLICES,
    HORIZONTAL_POD_AUTOSCALERS,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PODS,
    PRIORITY_CLASSES,
    RUNTIME_CLASSES,
    SERVICES,
    Resource,
)
from llmkube.kube.transform import keep_only
from llmkube.plan.memory_fit import GPU_MEMORY_LABELS

INFERENCE_SERVICES = Resource(c.GROUP, c.VERSION, c.ISVC_PLURAL, c.ISVC_KIND)
MODELS = Resource(c.GROUP, c.VERSION, c.MODEL_PLURAL, c.MODEL_KIND)

# Owned kinds are cached with this selector only: never every Deployment of the cluster.
MANAGED_SELECTOR = f"{c.LABEL_MANAGED_BY}={c.MANAGED_BY_VALUE}"
# Pods of our services (label existence), and the metal agent's EndpointSlices.
SERVICE_PODS_SELECTOR = c.LABEL_SERVICE
METAL_SLICES_SELECTOR = f"{c.LABEL_METAL_MANAGED_BY}={c.METAL_AGENT_VALUE}"
# Nodes are cached for their capacity, what of it pods may use (allocatable: the GPUs a pod can
# get) and the GPU memory labels only: everything else (images, conditions, other labels) would
# cost tens of KiB per Node (bench/bench_node_cache.py). One transform for the one shared Node
# informer (the Model and InferenceService controllers).
NODE_CACHE_TRANSFORM = keep_only(
    ("status", "capacity"),
    ("status", "allocatable"),
    *(("metadata", "labels", label) for label in GPU_MEMORY_LABELS.values()),
)

__all__ = [
    "DEPLOYMENTS",
    "ENDPOINT_SLICES",
    "HORIZONTAL_POD_AUTOSCALERS",
    "INFERENCE_SERVICES",
    "MANAGED_SELECTOR",
    "METAL_SLICES_SELECTOR",
    "MODELS",
    "NODES",
    "NODE_CACHE_TRANSFORM",
    "PERSISTENT_VOLUME_CLAIMS",
    "PODS",
    "PRIORITY_CLASSES",
    "RUNTIME_CLASSES",
    "SERVICES",
    "SERVICE_PODS_SELECTOR",
]
