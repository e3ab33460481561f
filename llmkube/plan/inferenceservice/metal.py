"""Readiness of a metal (Apple Silicon host agent) service from its EndpointSlices.

The host's metal-agent registers the slices and stamps a heartbeat annotation on them; a heartbeat
older than three minutes means the host is treated as offline. Slices without any heartbeat come
from older agents and are trusted without expiry.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from llmkube.api.constants import ANNOTATION_AGENT_HEARTBEAT
from llmkube.plan.inferenceservice.scheduling import SchedulingInfo

HEARTBEAT_TIMEOUT = timedelta(minutes=3)
# Half the timeout, so a host going silent is noticed within one timeout even with no events.
METAL_REQUEUE_SECONDS = 90.0
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
WAITING_FOR_METAL_AGENT = "WaitingForMetalAgent"
AGENT_HEARTBEAT_STALE = "AgentHeartbeatStale"
WAITING_MESSAGE = "Waiting for the host metal-agent to fetch the model and register Endpoints"


@dataclass(frozen=True)
class MetalReadiness:
    ready: int  # addresses whose endpoint is ready (or does not say)
    registered: int  # every address the agent registered: its running servers
    info: SchedulingInfo | None
    heartbeat_seen: bool


def parse_heartbeat(value: str) -> datetime | None:
    """RFC 3339 with an offset; anything else (including a time without zone) is unparseable."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def metal_readiness(
    slices: Sequence[Mapping[str, Any]], namespace: str, service_name: str, now: datetime
) -> MetalReadiness:
    mine = [
        s
        for s in slices
        if s.get("metadata", {}).get("namespace") == namespace
        and (s.get("metadata", {}).get("labels") or {}).get(SERVICE_NAME_LABEL) == service_name
    ]
    if not mine:
        return MetalReadiness(0, 0, SchedulingInfo(WAITING_FOR_METAL_AGENT, WAITING_MESSAGE), False)
    beats = [
        str(value)
        for s in mine
        if (value := (s.get("metadata", {}).get("annotations") or {}).get(ANNOTATION_AGENT_HEARTBEAT))
        is not None
    ]
    if beats:
        parsed = [(when, raw) for raw in beats if (when := parse_heartbeat(raw)) is not None]
        if not parsed:
            message = f'metal-agent heartbeat unparseable (value "{beats[0]}"); host may be offline'
            return MetalReadiness(0, 0, SchedulingInfo(AGENT_HEARTBEAT_STALE, message), True)
        freshest, raw = max(parsed)
        if now - freshest > HEARTBEAT_TIMEOUT:
            message = f"metal-agent heartbeat stale (last seen {raw}); host may be offline"
            return MetalReadiness(0, 0, SchedulingInfo(AGENT_HEARTBEAT_STALE, message), True)
    ready = registered = 0
    for s in mine:
        for endpoint in s.get("endpoints") or ():
            addresses = len(endpoint.get("addresses") or ())
            registered += addresses
            if (endpoint.get("conditions") or {}).get("ready") is not False:
                ready += addresses
    return MetalReadiness(ready, registered, None, bool(beats))
