"""llmkube's own API kinds as the REST client names them, for every process that talks to them (the
controller, the host agent), and the selector of the objects the controller makes.

The Kubernetes kinds are `llmkube.kube.resource`'s; each process caches only what it names."""

from llmkube.api import constants as c
from llmkube.kube.resource import Resource

__all__ = ["GPU_QUOTAS", "INFERENCE_SERVICES", "MANAGED_SELECTOR", "MODELS", "MODEL_ROUTERS"]

INFERENCE_SERVICES = Resource(c.GROUP, c.VERSION, c.ISVC_PLURAL, c.ISVC_KIND)
MODELS = Resource(c.GROUP, c.VERSION, c.MODEL_PLURAL, c.MODEL_KIND)
MODEL_ROUTERS = Resource(c.GROUP, c.VERSION, c.ROUTER_PLURAL, c.ROUTER_KIND)
GPU_QUOTAS = Resource(c.GROUP, c.VERSION, c.QUOTA_PLURAL, c.QUOTA_KIND)

#: the objects the controller makes (Deployments, Services, HPAs ...) carry this label: owned kinds are
#: cached with this selector only, never every Deployment of the cluster
MANAGED_SELECTOR = f"{c.LABEL_MANAGED_BY}={c.MANAGED_BY_VALUE}"
