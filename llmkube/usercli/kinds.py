"""The API kinds the user commands read and write (the same descriptors the controller uses)."""

from llmkube.api import constants as c
from llmkube.kube.resource import DEPLOYMENTS, HORIZONTAL_POD_AUTOSCALERS, NODES, PODS, Resource

INFERENCE_SERVICES = Resource(c.GROUP, c.VERSION, c.ISVC_PLURAL, c.ISVC_KIND)
MODELS = Resource(c.GROUP, c.VERSION, c.MODEL_PLURAL, c.MODEL_KIND)
CORE_EVENTS = Resource("", "v1", "events", "Event")  # core/v1 shows events.k8s.io/v1 ones too

# The user commands' own field manager: their applies never fight the controller's fields.
FIELD_MANAGER = "llmkube-cli"

__all__ = [
    "CORE_EVENTS",
    "DEPLOYMENTS",
    "FIELD_MANAGER",
    "HORIZONTAL_POD_AUTOSCALERS",
    "INFERENCE_SERVICES",
    "MODELS",
    "NODES",
    "PODS",
]

#: the words `llmkube list` accepts for each kind
MODEL_KINDS = ("models", "model", "mdl")
SERVICE_KINDS = ("services", "service", "svc", "inferenceservices", "isvc", "lkisvc")
