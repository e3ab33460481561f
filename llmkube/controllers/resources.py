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

INFERENCE_SERVICES = Resource(c.GROUP, c.VERSION, c.ISVC_PLURAL, c.ISVC_KIND)
MODELS = Resource(c.GROUP, c.VERSION, c.MODEL_PLURAL, c.MODEL_KIND)

# Owned kinds are cached with this selector only: never every Deployment of the cluster.
MANAGED_SELECTOR = f"{c.LABEL_MANAGED_BY}={c.MANAGED_BY_VALUE}"
# Pods of our services (label existence), and the metal agent's EndpointSlices.
SERVICE_PODS_SELECTOR = c.LABEL_SERVICE
METAL_SLICES_SELECTOR = f"{c.LABEL_METAL_MANAGED_BY}={c.METAL_AGENT_VALUE}"

__all__ = [
    "DEPLOYMENTS",
    "ENDPOINT_SLICES",
    "HORIZONTAL_POD_AUTOSCALERS",
    "INFERENCE_SERVICES",
    "MANAGED_SELECTOR",
    "METAL_SLICES_SELECTOR",
    "MODELS",
    "NODES",
    "PERSISTENT_VOLUME_CLAIMS",
    "PODS",
    "PRIORITY_CLASSES",
    "RUNTIME_CLASSES",
    "SERVICES",
    "SERVICE_PODS_SELECTOR",
]
