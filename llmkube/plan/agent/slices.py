"""The EndpointSlice a host agent registers for a service, and when it must be written.

One slice per service and agent, named `<service>-<agent>`, labelled for the service's Service
(`kubernetes.io/service-name`, so kube-proxy routes its ClusterIP to the agent's server), for the
controller (`llmkube.ai/managed-by: metal-agent`, the reference's label) and with the agent's name
(each agent lists only its own). It is owned by that Service (garbage-collected with it, also while
the agent is down) and carries the heartbeat, the agent's version and, while no server of it
serves, what the agent has to say (reason and message, which the controller puts in status).

Its one endpoint is the agent's address and the server's port, `ready` while the server answers,
withdrawn (not ready) while it starts, restarts or fails its probes, `terminating` while it drains.

A write is needed when anything but the heartbeat differs from what is stored, or when the stored
heartbeat is as old as the heartbeat interval; a restarted agent that finds its slices as it left
them writes nothing until their heartbeats are due.
"""

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from llmkube.api.base import KubeObject
from llmkube.api.constants import (
    ANNOTATION_AGENT_HEARTBEAT,
    ANNOTATION_AGENT_MESSAGE,
    ANNOTATION_AGENT_REASON,
    ANNOTATION_AGENT_VERSION,
    LABEL_AGENT_NAME,
    LABEL_METAL_MANAGED_BY,
    METAL_AGENT_VALUE,
)
from llmkube.plan.agent.supervision import EndpointConditions
from llmkube.plan.inferenceservice.deployment import PORT_NAME
from llmkube.plan.inferenceservice.metal import MAX_AGENT_MESSAGE, SERVICE_NAME_LABEL, parse_heartbeat

# The EndpointSlice API's label naming the slice's manager: not the EndpointSlice controller's value,
# so it never touches these slices.
ENDPOINT_SLICE_MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
#: a label value (no "/"), in the form of the EndpointSlice controller's own (endpointslice-controller.k8s.io)
MANAGED_BY_VALUE = "agent.llmkube.ai"
#: the reference agent's interval: the controller's default timeout (3 min) allows five misses
HEARTBEAT_INTERVAL = timedelta(seconds=30)
_OUR_LABELS = (SERVICE_NAME_LABEL, LABEL_METAL_MANAGED_BY, LABEL_AGENT_NAME, ENDPOINT_SLICE_MANAGED_BY)
_OUR_ANNOTATIONS = (ANNOTATION_AGENT_VERSION, ANNOTATION_AGENT_REASON, ANNOTATION_AGENT_MESSAGE)


def slice_name(service: str, agent: str) -> str:
    return f"{service}-{agent}"


def format_heartbeat(moment: datetime) -> str:
    """RFC 3339, whole seconds, UTC: what the reference writes and every reader parses."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class SliceInputs:
    namespace: str
    service: str  # the Service's name (the slice's service-name label)
    service_uid: str  # the Service this slice belongs to: its owner
    agent: str
    version: str
    address: str
    port: int | None  # the serving process's port; None: no process to point at
    conditions: EndpointConditions | None
    report: tuple[str, str] | None  # (reason, message) while no process serves


def slice_intent(inputs: SliceInputs, heartbeat: datetime) -> KubeObject:
    annotations = {
        ANNOTATION_AGENT_HEARTBEAT: format_heartbeat(heartbeat),
        ANNOTATION_AGENT_VERSION: inputs.version,
    }
    if inputs.report is not None:
        reason, message = inputs.report
        annotations[ANNOTATION_AGENT_REASON] = reason
        annotations[ANNOTATION_AGENT_MESSAGE] = message[:MAX_AGENT_MESSAGE]
    serving = inputs.port is not None and inputs.conditions is not None
    endpoints: list[KubeObject] = []
    if serving and inputs.conditions is not None:
        conditions = inputs.conditions
        endpoints.append(
            {
                "addresses": [inputs.address],
                "conditions": {
                    "ready": conditions.ready,
                    "serving": conditions.serving,
                    "terminating": conditions.terminating,
                },
            }
        )
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": slice_name(inputs.service, inputs.agent),
            "namespace": inputs.namespace,
            "labels": {
                SERVICE_NAME_LABEL: inputs.service,
                LABEL_METAL_MANAGED_BY: METAL_AGENT_VALUE,
                LABEL_AGENT_NAME: inputs.agent,
                ENDPOINT_SLICE_MANAGED_BY: MANAGED_BY_VALUE,
            },
            "annotations": annotations,
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Service", "name": inputs.service, "uid": inputs.service_uid}
            ],
        },
        "addressType": address_type(inputs.address),
        "ports": [{"name": PORT_NAME, "port": inputs.port, "protocol": "TCP"}] if serving else [],
        "endpoints": endpoints,
    }


def address_type(address: str) -> str:
    return "IPv6" if ipaddress.ip_address(address).version == 6 else "IPv4"


def _ours(values: Mapping[str, Any] | None, keys: tuple[str, ...]) -> dict[str, Any]:
    return {key: value for key, value in (values or {}).items() if key in keys}


def _owners(obj: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (ref.get("apiVersion"), ref.get("kind"), ref.get("name"), ref.get("uid"))
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or ()
    ]


def _endpoints(obj: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    found = []
    for endpoint in obj.get("endpoints") or ():
        conditions = endpoint.get("conditions") or {}
        found.append(
            (
                tuple(endpoint.get("addresses") or ()),
                conditions.get("ready"),
                conditions.get("serving"),
                conditions.get("terminating"),
            )
        )
    return found


def _ports(obj: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    return [(p.get("name"), p.get("port"), p.get("protocol", "TCP")) for p in obj.get("ports") or ()]


def write_needed(
    desired: KubeObject, stored: Mapping[str, Any] | None, now: datetime, interval: timedelta
) -> str | None:
    """Why `desired` must be written ("create", "changed: ...", "heartbeat"), or None."""
    if stored is None:
        return "create"
    want, have = desired["metadata"], stored.get("metadata") or {}
    changed = [
        what
        for what, differs in (
            ("labels", _ours(want.get("labels"), _OUR_LABELS) != _ours(have.get("labels"), _OUR_LABELS)),
            (
                "report",
                _ours(want.get("annotations"), _OUR_ANNOTATIONS)
                != _ours(have.get("annotations"), _OUR_ANNOTATIONS),
            ),
            ("owner", _owners(desired) != _owners(stored)),
            ("addressType", desired.get("addressType") != stored.get("addressType")),
            ("ports", _ports(desired) != _ports(stored)),
            ("endpoints", _endpoints(desired) != _endpoints(stored)),
        )
        if differs
    ]
    if changed:
        return "changed: " + ", ".join(changed)
    beat = heartbeat_of(stored)
    if beat is None or now - beat >= interval:
        return "heartbeat"
    return None


def heartbeat_of(stored: Mapping[str, Any]) -> datetime | None:
    raw = ((stored.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_AGENT_HEARTBEAT)
    return parse_heartbeat(raw) if isinstance(raw, str) else None


def heartbeat_due_in(stored: Mapping[str, Any] | None, now: datetime, interval: timedelta) -> float:
    """Seconds until the stored slice's heartbeat is due (0: now)."""
    beat = heartbeat_of(stored) if stored is not None else None
    if beat is None:
        return 0.0
    return max(0.0, (beat + interval - now).total_seconds())
