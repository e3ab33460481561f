"""Names that clients, dashboards and scripts match on: group, version, labels, annotations.

They are the reference operator's, letter for letter (docs/compatibility.md); changing one is a
breaking change for users.
"""

from typing import Final

GROUP: Final = "inference.llmkube.dev"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

ISVC_KIND: Final = "InferenceService"
ISVC_PLURAL: Final = "inferenceservices"
ISVC_SINGULAR: Final = "inferenceservice"
# `isvc` for the reference operator's users; KServe claims it too, so `lkisvc` is ours alone.
ISVC_SHORT_NAMES: Final = ("isvc", "lkisvc")

MODEL_KIND: Final = "Model"
MODEL_PLURAL: Final = "models"
MODEL_SINGULAR: Final = "model"
MODEL_SHORT_NAMES: Final = ("mdl",)

ROUTER_KIND: Final = "ModelRouter"
ROUTER_PLURAL: Final = "modelrouters"
ROUTER_SINGULAR: Final = "modelrouter"
ROUTER_SHORT_NAMES: Final = ("mr",)

QUOTA_KIND: Final = "GPUQuota"
QUOTA_PLURAL: Final = "gpuquotas"
QUOTA_SINGULAR: Final = "gpuquota"
QUOTA_SHORT_NAMES: Final = ("gq",)

CATEGORIES: Final = ("llmkube",)

# Server-side apply's field manager for everything the controller writes.
FIELD_MANAGER: Final = "llmkube-controller"
# `reportingController` of the controller's Events, the name of the reference operator's recorder:
# what `kubectl describe` shows under From, and what scripts filter events by.
EVENT_REPORTER: Final = "inferenceservice-controller"

# Labels on everything we create for an InferenceService.
LABEL_APP: Final = "app"
LABEL_MODEL: Final = f"{GROUP}/model"
LABEL_SERVICE: Final = f"{GROUP}/service"
LABEL_RUNTIME: Final = f"{GROUP}/runtime"
# Scopes our informers: owned objects carry it so we never cache every Deployment of a cluster.
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE: Final = "llmkube"
LABEL_NAME: Final = "app.kubernetes.io/name"
LABEL_COMPONENT: Final = "app.kubernetes.io/component"
# On everything made for a ModelRouter (its router's Deployment, Service and RBAC), and the selector
# of its pods, as the reference names it.
LABEL_MODEL_ROUTER: Final = f"{GROUP}/model-router"

# The metal path: the Apple Silicon host agent's EndpointSlices carry these.
ANNOTATION_AGENT_HEARTBEAT: Final = "llmkube.ai/agent-heartbeat"
LABEL_METAL_MANAGED_BY: Final = "llmkube.ai/managed-by"
METAL_AGENT_VALUE: Final = "metal-agent"
# What a host agent (`llmkube agent`) writes on its EndpointSlices besides the heartbeat: its
# version (the reference's annotation), its name (also a label: each agent lists its own slices),
# and what it has to say about the service it does not serve (yet): a reason and a message.
ANNOTATION_AGENT_VERSION: Final = "llmkube.ai/agent-version"
LABEL_AGENT_NAME: Final = "llmkube.ai/agent"
ANNOTATION_AGENT_REASON: Final = "llmkube.ai/agent-reason"
ANNOTATION_AGENT_MESSAGE: Final = "llmkube.ai/agent-message"
# Server-side apply's field manager and the Events' reporting controller of the host agent.
AGENT_FIELD_MANAGER: Final = "llmkube-agent"
AGENT_EVENT_REPORTER: Final = "llmkube-agent"

# A metal service's server key (plan/inferenceservice/server_key.py): the Secret a ModelRouter
# mounts for each InferenceService backend, `<service>-server-key`, and its key.
SERVER_KEY_SECRET_SUFFIX: Final = "-server-key"
SERVER_KEY_SECRET_KEY: Final = "key"

# Scale to zero (plan/inferenceservice/scale_to_zero.py, docs/scale-to-zero.md).
# On an InferenceService, by its user: how long without a request before it sleeps (Go duration).
ANNOTATION_SCALE_TO_ZERO_AFTER: Final = f"{GROUP}/scale-to-zero-after"
# On an InferenceService, by the routers in front of it: the last request they saw (RFC 3339, UTC).
ANNOTATION_LAST_REQUEST: Final = f"{GROUP}/last-request"
# On its Deployment, by the controller, while it sleeps: when it went to sleep.
ANNOTATION_SCALED_TO_ZERO: Final = f"{GROUP}/scaled-to-zero"
# Its condition: True while it sleeps; the reason of its Stopped phase then.
CONDITION_SCALED_TO_ZERO: Final = "ScaledToZero"
