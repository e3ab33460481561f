"""Readiness of a metal service (served by a host agent, `llmkube agent`) from its EndpointSlices.

A host agent serves the model outside the kubelet and registers one EndpointSlice per service
and host: its address and the server's port, labelled for the service's Service (which the
controller owns, without a selector), with a heartbeat annotation it renews. What the agent has to
say about a service it does not serve yet (fetching the model, not enough memory, a runtime it
cannot run, a server that keeps crashing) is on the same slice, as a reason and a message: the
controller stays the only writer of the InferenceService's status and reads it from there.

A heartbeat older than the timeout (3 minutes, the reference's; `--metal-heartbeat-timeout`)
means that host is taken for offline: its slice's addresses no longer count and its report is
not believed. Each slice's heartbeat vouches for that slice only, so one dead host among several
serving a service does not keep its endpoints counted. Slices without any heartbeat come from
older agents and are trusted without expiry, as long as no slice of the service has one.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from llmkube.api.constants import (
    ANNOTATION_AGENT_HEARTBEAT,
    ANNOTATION_AGENT_MESSAGE,
    ANNOTATION_AGENT_REASON,
    LABEL_AGENT_NAME,
)
from llmkube.plan.inferenceservice.scheduling import SchedulingInfo

HEARTBEAT_TIMEOUT = timedelta(minutes=3)
# Without a heartbeat to expire (an older agent's slices), nothing changes without an event.
METAL_REQUEUE_SECONDS = 90.0
# A reconcile just after the freshest heartbeat expires: the stale host is reported then, not at
# the next periodic requeue (the expiry is `>` the timeout, so the moment itself is still fresh).
EXPIRY_MARGIN_SECONDS = 0.5
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
WAITING_FOR_METAL_AGENT = "WaitingForMetalAgent"
AGENT_HEARTBEAT_STALE = "AgentHeartbeatStale"
WAITING_MESSAGE = "Waiting for the host metal-agent to fetch the model and register Endpoints"
# The longest agent message the status repeats (a slice's annotations are the agent's to fill).
MAX_AGENT_MESSAGE = 1024

# What an agent reports on a slice without a ready endpoint: under way (the service is Creating) ...
AGENT_FETCHING_MODEL = "FetchingModel"
AGENT_STARTING = "StartingServer"
AGENT_RESTARTING = "RestartingServer"
AGENT_UNHEALTHY = "ServerUnhealthy"
# ... or failed (the service is Failed, with this reason, until the agent says otherwise; an
# evicted or refused service is started again by the agent once it fits).
CRASH_LOOP_BACK_OFF = "CrashLoopBackOff"
UNSUPPORTED_BY_AGENT = "UnsupportedByAgent"
INSUFFICIENT_MEMORY = "InsufficientMemory"
EVICTED = "Evicted"
MODEL_FETCH_FAILED = "ModelFetchFailed"
NO_FREE_PORT = "NoFreePort"
AGENT_FAILURES = frozenset(
    {
        CRASH_LOOP_BACK_OFF,
        UNSUPPORTED_BY_AGENT,
        INSUFFICIENT_MEMORY,
        EVICTED,
        MODEL_FETCH_FAILED,
        NO_FREE_PORT,
    }
)


@dataclass(frozen=True)
class AgentReport:
    """What one agent says about the service on its slice."""

    agent: str
    reason: str
    message: str

    @property
    def failing(self) -> bool:
        return self.reason in AGENT_FAILURES

    def text(self) -> str:
        return f"{self.agent}: {self.message}" if self.agent else self.message


@dataclass(frozen=True)
class MetalReadiness:
    ready: int  # addresses whose endpoint is ready (or does not say), on slices that count
    registered: int  # every address on those slices: the agents' running servers
    info: SchedulingInfo | None
    heartbeat_seen: bool
    #: the agents' reports, from slices that count (the freshest first)
    reports: tuple[AgentReport, ...] = ()
    #: seconds until the freshest counting heartbeat expires (None: nothing expires)
    expires_in: float | None = None

    @property
    def failure(self) -> AgentReport | None:
        """Why the service cannot be served, when no agent serves it and one says it failed."""
        if self.ready > 0:
            return None
        return next((report for report in self.reports if report.failing), None)

    @property
    def progress(self) -> AgentReport | None:
        return next((report for report in self.reports if not report.failing), None)


def parse_heartbeat(value: str) -> datetime | None:
    """RFC 3339 with an offset; anything else (including a time without zone) is unparseable."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def _meta(endpoint_slice: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = endpoint_slice.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _annotations(endpoint_slice: Mapping[str, Any]) -> Mapping[str, Any]:
    return _meta(endpoint_slice).get("annotations") or {}


def _report(endpoint_slice: Mapping[str, Any]) -> AgentReport | None:
    annotations = _annotations(endpoint_slice)
    reason = annotations.get(ANNOTATION_AGENT_REASON)
    if not isinstance(reason, str) or not reason:
        return None
    message = annotations.get(ANNOTATION_AGENT_MESSAGE)
    text = message[:MAX_AGENT_MESSAGE] if isinstance(message, str) and message else reason
    meta = _meta(endpoint_slice)
    agent = (meta.get("labels") or {}).get(LABEL_AGENT_NAME) or ""
    return AgentReport(str(agent)[:63], reason[:128], text)


def metal_readiness(
    slices: Sequence[Mapping[str, Any]],
    namespace: str,
    service_name: str,
    now: datetime,
    timeout: timedelta = HEARTBEAT_TIMEOUT,
) -> MetalReadiness:
    mine = [
        s
        for s in slices
        if _meta(s).get("namespace") == namespace
        and (_meta(s).get("labels") or {}).get(SERVICE_NAME_LABEL) == service_name
    ]
    if not mine:
        return MetalReadiness(0, 0, SchedulingInfo(WAITING_FOR_METAL_AGENT, WAITING_MESSAGE), False)
    beats = [
        (s, str(value))
        for s in mine
        if (value := _annotations(s).get(ANNOTATION_AGENT_HEARTBEAT)) is not None
    ]
    parsed = [(when, raw, s) for s, raw in beats if (when := parse_heartbeat(raw)) is not None]
    if beats and not parsed:
        message = f'metal-agent heartbeat unparseable (value "{beats[0][1]}"); host may be offline'
        return MetalReadiness(0, 0, SchedulingInfo(AGENT_HEARTBEAT_STALE, message), True)
    if parsed:
        fresh = sorted(
            ((when, raw, s) for when, raw, s in parsed if now - when <= timeout),
            key=lambda item: item[0],
            reverse=True,
        )
        if not fresh:
            _, raw, _ = max(parsed, key=lambda item: item[0])
            message = f"metal-agent heartbeat stale (last seen {raw}); host may be offline"
            return MetalReadiness(0, 0, SchedulingInfo(AGENT_HEARTBEAT_STALE, message), True)
        counting = [s for _, _, s in fresh]
        # The soonest expiry of a slice that counts changes what counts: reconcile then.
        soonest = min(when for when, _, _ in fresh)
        expires_in = (soonest + timeout - now).total_seconds() + EXPIRY_MARGIN_SECONDS
    else:
        counting, expires_in = mine, None
    ready = registered = 0
    for s in counting:
        for endpoint in s.get("endpoints") or ():
            addresses = len(endpoint.get("addresses") or ())
            registered += addresses
            if (endpoint.get("conditions") or {}).get("ready") is not False:
                ready += addresses
    reports = tuple(report for s in counting if (report := _report(s)) is not None)
    return MetalReadiness(ready, registered, None, bool(parsed), reports, expires_in)
