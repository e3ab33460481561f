"""The Service intent and the endpoint URL.

Reconciled like every owned object, and its targetPort is the container's named port `http`, so
the Service reaches the container whatever port the runtime listens on (the reference operator
created the Service once, aimed at the endpoint port: vLLM, TGI and PersonaPlex were unreachable
without an explicit `endpoint.port`).

A metal service's Service has no selector: its endpoints are the host agents' EndpointSlices, whose
port named `http` is the port each agent's server listens on. The controller owns that Service
too (the agent writes only slices, and only for a Service this InferenceService controls), so a
tenant's choice of name can never attach an agent's endpoint to somebody else's Service.
"""

from llmkube.api.base import KubeObject
from llmkube.api.inferenceservice import InferenceService, InferenceServiceSpec
from llmkube.plan.inferenceservice.deployment import PORT_NAME
from llmkube.plan.inferenceservice.drain import HOLD_LABEL, HOLD_VALUE
from llmkube.plan.inferenceservice.names import managed, selector_labels, service_name
from llmkube.plan.inferenceservice.objects import object_metadata, owner_reference
from llmkube.plan.inferenceservice.serving_mode import MODE_LABEL, resolve_mode

DEFAULT_ENDPOINT_PORT = 8080
DEFAULT_ENDPOINT_PATH = "/v1/chat/completions"


def endpoint_port(spec: InferenceServiceSpec) -> int:
    return spec.endpoint.port if spec.endpoint is not None and spec.endpoint.port else DEFAULT_ENDPOINT_PORT


def endpoint_url(isvc: InferenceService) -> str:
    """The cluster-local URL, for NodePort and LoadBalancer services too."""
    spec = isvc.spec
    path = spec.endpoint.path if spec.endpoint is not None and spec.endpoint.path else DEFAULT_ENDPOINT_PATH
    host = f"{service_name(isvc.metadata.name or '')}.{isvc.metadata.namespace or ''}.svc.cluster.local"
    return f"http://{host}:{endpoint_port(spec)}{path}"


def service_intent(isvc: InferenceService, *, selector: bool = True, hold: bool = False) -> KubeObject:
    """`selector=False` for a metal service: the host agents' EndpointSlices are its endpoints.
    `hold`: a Recreate drain is in progress, so the Service selects no pod (drain.py)."""
    name, spec = isvc.metadata.name or "", isvc.spec
    # The serving mode, as a label: the EndpointSlices inherit it, and ModelRouters route
    # /v1/embeddings and /v1/rerank by it (plan/router/matching.py).
    labels = {**managed(selector_labels(name)), MODE_LABEL: resolve_mode(spec)}
    service_type = spec.endpoint.type if spec.endpoint is not None and spec.endpoint.type else "ClusterIP"
    held = {HOLD_LABEL: HOLD_VALUE} if hold else {}
    port = {"name": PORT_NAME, "port": endpoint_port(spec), "targetPort": PORT_NAME, "protocol": "TCP"}
    node_port = spec.endpoint.node_port if spec.endpoint is not None else None
    if node_port is not None and service_type in ("NodePort", "LoadBalancer"):
        port["nodePort"] = node_port  # v0.9: a stable port on every node
    selected = {"selector": {**selector_labels(name), **held}} if selector else {}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_metadata(
            service_name(name),
            isvc.metadata.namespace or "",
            labels,
            owner_reference(isvc),
        ),
        "spec": {
            "type": service_type,
            **selected,
            "ports": [port],
        },
    }
