"""A small descriptor for each API kind we talk to, and the raw REST paths built from it.

No discovery and no OpenAPI models: a controller names the handful of kinds it needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

__all__ = [
    "CONFIG_MAPS",
    "DEPLOYMENTS",
    "ENDPOINT_SLICES",
    "EVENTS",
    "HORIZONTAL_POD_AUTOSCALERS",
    "LEASES",
    "NAMESPACES",
    "NODES",
    "PERSISTENT_VOLUME_CLAIMS",
    "PODS",
    "PRIORITY_CLASSES",
    "SECRETS",
    "SERVICES",
    "SERVICE_CIDRS",
    "Resource",
]


@dataclass(frozen=True, slots=True)
class Resource:
    """Group/version/plural/kind of an API kind, and whether it lives in a namespace.

    ``group`` is ``""`` for the core API (``/api/v1``).
    """

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_kind(self) -> tuple[str, str]:
        return (self.group, self.kind)

    def base_path(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def collection_path(self, namespace: str | None = None) -> str:
        """Path of the collection; all namespaces when a namespaced kind gets no namespace."""
        if self.namespaced and namespace:
            return f"{self.base_path()}/namespaces/{quote(namespace, safe='')}/{self.plural}"
        return f"{self.base_path()}/{self.plural}"

    def object_path(self, name: str, namespace: str | None = None, subresource: str | None = None) -> str:
        if self.namespaced and not namespace:
            raise ValueError(f"{self.kind} {name!r} is namespaced: a namespace is required")
        path = f"{self.collection_path(namespace if self.namespaced else None)}/{quote(name, safe='')}"
        return f"{path}/{subresource}" if subresource else path

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


CONFIG_MAPS = Resource("", "v1", "configmaps", "ConfigMap")
SECRETS = Resource("", "v1", "secrets", "Secret")
SERVICES = Resource("", "v1", "services", "Service")
PODS = Resource("", "v1", "pods", "Pod")
PERSISTENT_VOLUME_CLAIMS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
HORIZONTAL_POD_AUTOSCALERS = Resource(
    "autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler"
)
PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False)
RUNTIME_CLASSES = Resource("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", namespaced=False)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
EVENTS = Resource("events.k8s.io", "v1", "events", "Event")
ENDPOINT_SLICES = Resource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice")
# The cluster's Service networks (Kubernetes 1.33+).
SERVICE_CIDRS = Resource("networking.k8s.io", "v1", "servicecidrs", "ServiceCIDR", namespaced=False)
