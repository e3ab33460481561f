"""A backend's endpoints from its Service's EndpointSlices: the addresses of the pods that serve.

An endpoint counts while it is ready and not terminating (a pod being deleted leaves the moment
its deletion starts, before it stops listening, so no new request is sent to it). The port is the
Service's port named `http` (an InferenceService's), else the slice's only port."""

from collections.abc import Iterable
from typing import Any

from llmkube.plan.router.config import SERVICE_PORT_NAME


def _port(slice_: dict[str, Any]) -> int | None:
    ports = [p for p in slice_.get("ports") or () if isinstance(p, dict) and isinstance(p.get("port"), int)]
    named = [p for p in ports if p.get("name") == SERVICE_PORT_NAME]
    if named:
        return int(named[0]["port"])
    return int(ports[0]["port"]) if len(ports) == 1 else None


def _serving(endpoint: dict[str, Any]) -> bool:
    conditions = endpoint.get("conditions") or {}
    # A nil `ready` means ready (discovery/v1); terminating endpoints are never sent new work.
    return conditions.get("ready") is not False and conditions.get("terminating") is not True


def host_port(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def endpoint_names(slices: Iterable[dict[str, Any]]) -> dict[str, str]:
    """The pod each `host:port` is (the endpoint's targetRef), where the slice says: what the
    router's metrics name an endpoint by (a client may read /metrics; a pod's address it may not)."""
    names: dict[str, str] = {}
    for slice_ in slices:
        port = _port(slice_)
        if port is None or slice_.get("addressType") not in ("IPv4", "IPv6"):
            continue
        for endpoint in slice_.get("endpoints") or ():
            addresses = endpoint.get("addresses") or ()
            target = endpoint.get("targetRef") or {}
            if addresses and isinstance(target, dict) and isinstance(target.get("name"), str):
                names[host_port(str(addresses[0]), port)] = target["name"]
    return names


def ready_endpoints(slices: Iterable[dict[str, Any]]) -> tuple[str, ...]:
    """`host:port` of every serving endpoint, sorted and without duplicates."""
    found: set[str] = set()
    for slice_ in slices:
        if slice_.get("addressType") not in ("IPv4", "IPv6"):
            continue
        port = _port(slice_)
        if port is None:
            continue
        for endpoint in slice_.get("endpoints") or ():
            addresses = endpoint.get("addresses") or ()
            if addresses and _serving(endpoint):
                found.add(host_port(str(addresses[0]), port))
    return tuple(sorted(found))


#: the label an InferenceService's Service carries (and its EndpointSlices with it): its serving mode
MODE_LABEL = "inference.llmkube.dev/mode"


def serving_mode(slices: Iterable[dict[str, Any]]) -> str:
    """The serving mode (chat, embedding, rerank) the slices' Service says; "" when none says."""
    for slice_ in slices:
        mode = ((slice_.get("metadata") or {}).get("labels") or {}).get(MODE_LABEL)
        if isinstance(mode, str) and mode:
            return mode
    return ""
