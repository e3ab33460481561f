"""Repair a Service whose ports someone replaced.

The API keys a Service's ports by port number and protocol. When someone replaces our port (e.g.
`kubectl edit` changes 8080 to 1234), their entry is keyed by its own number, so server-side apply
only adds ours next to it, and the API rejects two ports with the same name. The only way back is
to put exactly our ports in place, guarded by the resourceVersion we looked at.
"""

from __future__ import annotations

import structlog

from llmkube.kube.client import JSON_PATCH, ApiClient
from llmkube.kube.resource import SERVICES
from llmkube.kube.types import Obj

__all__ = ["restore_service_ports", "stray_service_ports"]

log = structlog.get_logger("llmkube.kube.service_ports")


def stray_service_ports(desired: Obj, observed: Obj) -> list[Obj]:
    """Ports on the observed Service that are not ours (keyed, as the API keys them, by port and
    protocol)."""

    def key(port: Obj) -> tuple[object, str]:
        return port.get("port"), port.get("protocol") or "TCP"

    wanted = {key(port) for port in (desired.get("spec") or {}).get("ports") or ()}
    return [port for port in (observed.get("spec") or {}).get("ports") or () if key(port) not in wanted]


async def restore_service_ports(client: ApiClient, desired: Obj, observed: Obj, field_manager: str) -> Obj:
    """Replace the observed Service's ports with ours (a JSON patch that fails if the Service
    changed since we looked at it); returns the Service as stored."""
    meta = observed["metadata"]
    patch = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]},
        {"op": "replace", "path": "/spec/ports", "value": desired["spec"]["ports"]},
    ]
    stored = await client.patch(
        SERVICES,
        meta["name"],
        patch,
        meta.get("namespace"),
        patch_type=JSON_PATCH,
        field_manager=field_manager,
    )
    log.info("Service ports restored", namespace=meta.get("namespace"), name=meta["name"])
    return stored
