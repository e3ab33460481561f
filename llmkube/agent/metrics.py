"""The agent's own metrics (`llmkube_agent_*`), beside the machinery's (controller-runtime's
workqueue and reconcile metrics, `rest_client_requests_total`, the process's).

Counters count as things happen; the gauges (processes by phase, memory, heartbeat age) are read
from the agent's state when scraped, so they are never stale.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from prometheus_client import Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import REGISTRY, Collector

RESTARTS = Counter(
    "llmkube_agent_process_restarts_total",
    "Restarts of a service's server process by the host agent (after it exited, hung or failed its probes)",
    ["namespace", "name"],
)
EVICTIONS = Counter(
    "llmkube_agent_evictions_total",
    "Services the host agent stopped to make room: for a higher-priority service, or under memory pressure",
    ["reason"],
)
FETCHES = Counter(
    "llmkube_agent_model_fetches_total",
    "Model files the host agent fetched into its cache, by result",
    ["result"],
)
SLICE_WRITES = Counter(
    "llmkube_agent_endpointslice_writes_total",
    "EndpointSlice writes by the host agent, by why: create, changed, heartbeat, delete",
    ["reason"],
)


@dataclass(frozen=True)
class Snapshot:
    """What the gauges show, read at scrape time."""

    processes: dict[str, int]  # phase -> count
    budget: int
    held: int  # the estimated memory of every server it runs
    resident: int  # the servers' resident memory, measured
    heartbeats: dict[tuple[str, str], float]  # (namespace, name) -> monotonic time of the last write


class AgentCollector(Collector):
    def __init__(self, snapshot: Callable[[], Snapshot]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterable[GaugeMetricFamily]:
        snap = self._snapshot()
        processes = GaugeMetricFamily(
            "llmkube_agent_processes", "Server processes of the host agent, by phase", labels=["phase"]
        )
        for phase, count in sorted(snap.processes.items()):
            processes.add_metric([phase], count)
        yield processes
        yield GaugeMetricFamily(
            "llmkube_agent_memory_budget_bytes",
            "The memory the host agent may give its servers (--memory-budget)",
            value=snap.budget,
        )
        yield GaugeMetricFamily(
            "llmkube_agent_memory_used_bytes",
            "The memory the host agent's servers hold against its budget (their estimates)",
            value=snap.held,
        )
        yield GaugeMetricFamily(
            "llmkube_agent_memory_resident_bytes",
            "The resident memory of the host agent's servers, measured",
            value=snap.resident,
        )
        age = GaugeMetricFamily(
            "llmkube_agent_heartbeat_age_seconds",
            "Seconds since the host agent last wrote a service's EndpointSlice (its heartbeat)",
            labels=["namespace", "name"],
        )
        now = time.monotonic()
        for (namespace, name), at in sorted(snap.heartbeats.items()):
            age.add_metric([namespace, name], max(0.0, now - at))
        yield age

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return []


def register(snapshot: Callable[[], Snapshot]) -> Callable[[], None]:
    """Registers the gauges; returns what unregisters them (an agent embedded in a test)."""
    collector = AgentCollector(snapshot)
    REGISTRY.register(collector)
    return lambda: REGISTRY.unregister(collector)
