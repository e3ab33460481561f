"""Repair a Service whose ports someone replaced.

The API keys a Service's ports by port number and protocol. When someone replaces our port (e.g.
`kubectl edit` changes 8080 to 1234), their entry is keyed by its own number, so server-side apply
only adds ours next to it, and the API rejects two ports with the same name. The only way back is
to put exactly our ports in place, guarded by the resourceVersion we looked at.
"""

from __future__ import annotations

import json

import structlog

from llmkube.kube.managed_fields import owned_fields
from llmkube.kube.resource import SERVICES
from llmkube.kube.rest import JSON_PATCH, ApiClient
from llmkube.kube.types import Obj

__all__ = ["restore_service_ports", "stray_service_ports"]

log = structlog.get_logger("llmkube.kube.apply.service_ports")


def stray_service_ports(desired: Obj, observed: Obj) -> list[Obj]:
    """Ports on the observed Service that are not ours (keyed, as the API keys them, by port and
    protocol)."""

    wanted = {_port_key(port) for port in (desired.get("spec") or {}).get("ports") or ()}
    return [port for port in (observed.get("spec") or {}).get("ports") or () if _port_key(port) not in wanted]


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
    stray = stray_service_ports(desired, observed)
    if all(_port_key(port) in _applied_port_keys(observed, field_manager) for port in stray):
        # Ports we applied ourselves: the spec changed (a new endpoint port), nothing was repaired.
        log.info("Service ports changed", namespace=meta.get("namespace"), name=meta["name"])
    else:
        log.info(
            "Service ports restored: another manager had replaced ours",
            namespace=meta.get("namespace"),
            name=meta["name"],
        )
    return stored


def _port_key(port: Obj) -> tuple[object, str]:
    return port.get("port"), port.get("protocol") or "TCP"


def _applied_port_keys(observed: Obj, field_manager: str) -> set[tuple[object, str]]:
    """The ports (port, protocol) in our own Apply entry of the Service."""
    fields = owned_fields(observed, field_manager) or {}
    ports = (fields.get("f:spec") or {}).get("f:ports") or {}
    keys: set[tuple[object, str]] = set()
    for entry in ports:
        if not entry.startswith("k:"):
            continue
        try:
            key = json.loads(entry[2:])
        except ValueError:
            continue
        if isinstance(key, dict):
            keys.add((key.get("port"), key.get("protocol") or "TCP"))
    return keys
