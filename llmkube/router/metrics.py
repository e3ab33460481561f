"""The router's metrics: what it did (counters and histograms, per router, rule and backend) and
what it sees now (gauges, computed at scrape time from its state: backend health, endpoints, in
flight per endpoint, budgets left).

Label values come from the spec (router, rule, backend and budget names) and from the cluster (pod
names: never their addresses, since the clients of the router can read /metrics), never from
requests: a client cannot create series. Team budgets are not broken down
by team for the same reason (the number of teams in one is a gauge).

Children are cached per label set: a request costs a few dict lookups and increments, no label
validation."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sized
from typing import Protocol

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from llmkube.router.http import ByteBudget, ServerStats

__all__ = ["RouterMetrics", "StateView"]

#: seconds: a token's worth to a long generation
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class StateView(Protocol):
    """What the gauges read (the router's state)."""

    def backend_health(self) -> Iterable[tuple[str, bool, int]]:
        """(backend, can serve, ready endpoints)"""
        ...

    def endpoint_in_flight(self) -> Iterable[tuple[str, str, int]]:
        """(backend, endpoint, requests in flight)"""
        ...

    def budget_remaining(self) -> Iterable[tuple[str, str, float]]:
        """(budget, unit: tokens or usd, left); router and rule scopes"""
        ...

    def budget_teams(self) -> Iterable[tuple[str, int]]: ...


class ServerView(Protocol):
    """What the front door's metrics read (the HTTP server: llmkube.router.http.server)."""

    @property
    def connections(self) -> Sized: ...

    @property
    def stats(self) -> ServerStats: ...

    @property
    def body_budget(self) -> ByteBudget: ...


class _Gauges(Collector):
    """The gauges of every router of the process (one, but for tests and benchmarks)."""

    def __init__(self) -> None:
        self.states: list[tuple[str, StateView]] = []
        self.servers: list[tuple[str, ServerView]] = []

    def _front_door(self) -> Iterable[GaugeMetricFamily | CounterMetricFamily]:
        connections = GaugeMetricFamily(
            "llmkube_router_open_connections", "Client connections open.", labels=["router"]
        )
        refused = CounterMetricFamily(
            "llmkube_router_refused_connections_total",
            "Client connections the server answered itself and closed, by reason: connections, "
            "client_connections (over a cap, before a byte was read), head_too_large (431), malformed "
            "(400), body_budget (503: the bodies in flight held the budget).",
            labels=["router", "reason"],
        )
        closed = CounterMetricFamily(
            "llmkube_router_closed_connections_total",
            "Client connections the server cut, by reason: idle_timeout, head_timeout (a head slower "
            "than --head-timeout), write_timeout (a client that read nothing for --write-timeout).",
            labels=["router", "reason"],
        )
        held = GaugeMetricFamily(
            "llmkube_router_request_body_bytes",
            "Bytes of the body budget held by requests in flight (their bodies and what parsing them costs).",
            labels=["router"],
        )
        budget = GaugeMetricFamily(
            "llmkube_router_request_body_budget_bytes",
            "The body budget (--body-budget).",
            labels=["router"],
        )
        for router, server in self.servers:
            connections.add_metric([router], float(len(server.connections)))
            for reason, count in sorted(server.stats.refused.items()):
                refused.add_metric([router, reason], float(count))
            for reason, count in sorted(server.stats.closed.items()):
                closed.add_metric([router, reason], float(count))
            held.add_metric([router], float(server.body_budget.held))
            budget.add_metric([router], float(server.body_budget.total))
        yield from (connections, refused, closed, held, budget)

    def collect(self) -> Iterable[GaugeMetricFamily | CounterMetricFamily]:
        yield from self._front_door()
        healthy = GaugeMetricFamily(
            "llmkube_router_backend_healthy",
            "1 while the backend can serve (a ready endpoint out of quarantine, or an external backend out "
            "of quarantine), else 0.",
            labels=["router", "backend"],
        )
        endpoints = GaugeMetricFamily(
            "llmkube_router_backend_endpoints",
            "Ready endpoints of each InferenceService backend, from its EndpointSlices.",
            labels=["router", "backend"],
        )
        for router, state in self.states:
            for backend, ok, ready in state.backend_health():
                healthy.add_metric([router, backend], 1.0 if ok else 0.0)
                endpoints.add_metric([router, backend], float(ready))
        in_flight = GaugeMetricFamily(
            "llmkube_router_in_flight_requests",
            "Requests in flight per endpoint: the pod's name (an external backend's name).",
            labels=["router", "backend", "endpoint"],
        )
        for router, state in self.states:
            for backend, endpoint, count in state.endpoint_in_flight():
                in_flight.add_metric([router, backend, endpoint], float(count))
        remaining = GaugeMetricFamily(
            "llmkube_router_budget_remaining",
            "What is left of each router- and rule-scoped budget in its window, in tokens or USD.",
            labels=["router", "budget", "unit"],
        )
        for router, state in self.states:
            for budget, unit, left in state.budget_remaining():
                remaining.add_metric([router, budget, unit], left)
        teams = GaugeMetricFamily(
            "llmkube_router_budget_teams",
            "Teams counted by each team-scoped budget (each team's use is in the audit lines).",
            labels=["router", "budget"],
        )
        for router, state in self.states:
            for budget, count in state.budget_teams():
                teams.add_metric([router, budget], float(count))
        yield from (healthy, endpoints, in_flight, remaining, teams)


class _Families:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.gauges = _Gauges()
        registry.register(self.gauges)
        self.requests = Counter(
            "llmkube_router_requests_total",
            "Requests answered, by router, rule (or default, or none), backend (empty when the router "
            "answered itself) and HTTP status code.",
            ["router", "rule", "backend", "code"],
            registry=registry,
        )
        self.duration = Histogram(
            "llmkube_router_request_duration_seconds",
            "Time from a request's arrival to its answer's last byte.",
            ["router", "rule", "backend"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.first_byte = Histogram(
            "llmkube_router_time_to_first_byte_seconds",
            "Time from a request's arrival to the first byte of its answer sent to the client.",
            ["router", "rule", "backend"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.tokens = Counter(
            "llmkube_router_tokens_total",
            "Tokens of answered requests, by backend and kind (prompt, completion), as the backend "
            "reported them or, where it did not, estimated.",
            ["router", "backend", "kind"],
            registry=registry,
        )
        self.cost = Counter(
            "llmkube_router_cost_usd_total",
            "Cost of answered requests from each backend's costPerMillionTokens, in USD.",
            ["router", "backend"],
            registry=registry,
        )
        self.upstream_failures = Counter(
            "llmkube_router_upstream_failures_total",
            "Attempts that failed before the client got a byte (connect, timeout, 5xx) or during the "
            "answer (reset), by backend and reason.",
            ["router", "backend", "reason"],
            registry=registry,
        )
        self.shadows = Counter(
            "llmkube_router_shadow_requests_total",
            "Copies of requests sent to shadow backends, by result: ok, failed, dropped (too many at once).",
            ["router", "backend", "result"],
            registry=registry,
        )
        self.refused = Counter(
            "llmkube_router_refused_requests_total",
            "Requests the router answered itself, by reason (bad_request, unauthorized, budget, "
            "fail_closed, no_route, no_backend, too_large, ...).",
            ["router", "reason"],
            registry=registry,
        )
        self.waiting = Gauge(
            "llmkube_router_waiting_requests",
            "Requests waiting for an InferenceService backend's first ready endpoint (between the pods "
            "of a rollout; at most --endpoint-wait).",
            ["router"],
            registry=registry,
        )


_families: dict[int, _Families] = {}


def _families_of(registry: CollectorRegistry) -> _Families:
    """The families, registered once per registry (several routers in one process share them: the
    `router` label tells them apart)."""
    found = _families.get(id(registry))
    if found is None:
        found = _families[id(registry)] = _Families(registry)
    return found


class RouterMetrics:
    def __init__(self, router: str, registry: CollectorRegistry = REGISTRY) -> None:
        self._router = router
        families = _families_of(registry)
        self.requests = families.requests
        self.duration = families.duration
        self.first_byte = families.first_byte
        self.tokens = families.tokens
        self.cost = families.cost
        self.upstream_failures = families.upstream_failures
        self.shadows = families.shadows
        self.refused = families.refused
        self._waiting = families.waiting.labels(router)
        self._gauges = families.gauges
        self._children: dict[tuple[str, ...], object] = {}

    def register_server(self, server: ServerView) -> Callable[[], None]:
        entry = (self._router, server)
        self._gauges.servers.append(entry)
        return lambda: self._gauges.servers.remove(entry)

    def register_state(self, state: StateView) -> Callable[[], None]:
        entry = (self._router, state)
        self._gauges.states.append(entry)
        return lambda: self._gauges.states.remove(entry)

    def _child(self, metric: Counter | Histogram, *labels: str) -> object:
        key = (metric._name, *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(self._router, *labels)
        return child

    def answered(self, rule: str, backend: str, code: int, seconds: float, first_byte: float | None) -> None:
        self._child(self.requests, rule, backend, str(code)).inc()  # type: ignore[attr-defined]
        self._child(self.duration, rule, backend).observe(seconds)  # type: ignore[attr-defined]
        if first_byte is not None:
            self._child(self.first_byte, rule, backend).observe(first_byte)  # type: ignore[attr-defined]

    def used(self, backend: str, prompt: int, completion: int, usd: float) -> None:
        if prompt:
            self._child(self.tokens, backend, "prompt").inc(prompt)  # type: ignore[attr-defined]
        if completion:
            self._child(self.tokens, backend, "completion").inc(completion)  # type: ignore[attr-defined]
        if usd:
            self._child(self.cost, backend).inc(usd)  # type: ignore[attr-defined]

    def failed(self, backend: str, reason: str) -> None:
        self._child(self.upstream_failures, backend, reason).inc()  # type: ignore[attr-defined]

    def shadow(self, backend: str, result: str) -> None:
        self._child(self.shadows, backend, result).inc()  # type: ignore[attr-defined]

    def refusal(self, reason: str) -> None:
        self._child(self.refused, reason).inc()  # type: ignore[attr-defined]

    def waiting(self, change: int) -> None:
        self._waiting.inc(change)
