"""Every API call the host agent makes, as RBAC permissions: the one list its roles are made from
(`hack/gen-install-files.py` writes manifests/agent/ from it; the tests run the agent under exactly
these rights and fail on a request refused, and on a verb granted that it never used)."""

from llmkube.kinds import INFERENCE_SERVICES, MODELS
from llmkube.kube.rbac import Permission, Scope
from llmkube.kube.resource import (
    CONFIG_MAPS,
    ENDPOINT_SLICES,
    EVENTS,
    NODES,
    SECRETS,
    SERVICE_CIDRS,
    SERVICES,
)
from llmkube.plan.inferenceservice.metal_services import METAL_SERVICES_CONFIGMAP
from llmkube.plan.inferenceservice.server_key import MASTER_SECRET

AGENT_PERMISSIONS: tuple[Permission, ...] = (
    Permission(INFERENCE_SERVICES, ("list", "watch"), Scope.WATCHED, "the services it may serve, cached"),
    Permission(MODELS, ("list", "watch"), Scope.WATCHED, "their Models: where the weights come from"),
    Permission(
        SERVICES,
        ("list", "watch"),
        Scope.WATCHED,
        "the controller's Services (labelled managed-by llmkube): a slice is registered only for a "
        "Service the InferenceService controls, and is owned by it",
    ),
    Permission(
        ENDPOINT_SLICES,
        ("list", "watch", "create", "patch", "delete"),
        Scope.WATCHED,
        "its own EndpointSlices (labelled with its name): server-side apply (patch; create when missing) "
        "of the endpoint and the heartbeat, deleted when the service stops, moves or goes; once at start "
        "(cluster-wide), the API server's own (default/kubernetes): model sources there are not fetched",
    ),
    Permission(
        EVENTS,
        ("create", "patch"),
        Scope.WATCHED,
        "Events on the services it serves (events.k8s.io/v1): created, patched as a series when they repeat",
    ),
    Permission(
        CONFIG_MAPS,
        ("list", "watch"),
        Scope.OWN_NAMESPACE,
        "in the controller's namespace, by name: its list of metal Services, the only Services whose "
        "EndpointSlices the admission policy lets the agent write (it waits for a Service to be listed)",
        resource_names=(METAL_SERVICES_CONFIGMAP,),
    ),
    Permission(
        NODES,
        ("list",),
        Scope.CLUSTER,
        "once at start, unless --pod-cidr names them: the Nodes' Pod networks, where model sources are "
        "not fetched",
    ),
    Permission(
        SERVICE_CIDRS,
        ("list",),
        Scope.CLUSTER,
        "once at start, unless --service-cidr names them: the cluster's Service networks, where model "
        "sources are not fetched",
    ),
    Permission(
        SECRETS,
        ("get",),
        Scope.OWN_NAMESPACE,
        "in the controller's namespace, that one Secret: the master of the servers' keys "
        "(plan/inferenceservice/server_key.py), read at start and every few minutes",
        resource_names=(MASTER_SECRET,),
    ),
)


def agent_rules(*scopes: Scope) -> tuple[Permission, ...]:
    return tuple(p for p in AGENT_PERMISSIONS if p.scope in scopes)
