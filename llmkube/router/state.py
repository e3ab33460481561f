"""What the router knows at a moment: its spec (compiled, or why it was refused), the endpoints of
its InferenceService backends, and the counters it keeps (quarantine, budgets, latency, requests in
flight). One object, read by every request and by the gauges; changed by the watches, the probes
and the requests themselves, all on the one event loop (no locks)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from llmkube.plan.allowed_hosts import AllowedHost
from llmkube.plan.router import (
    ActivityClock,
    Backend,
    Budgets,
    Issue,
    Quarantine,
    RollingP95,
    RouterConfig,
    Sleeper,
    WakeQueue,
    compile_config,
    credential_host_issues,
    validate,
)

Clock = Callable[[], float]


@dataclass
class Loaded:
    """The outcome of the last spec seen."""

    generation: int
    issues: list[Issue] = field(default_factory=list)
    #: the spec was refused: the router keeps serving the last good one
    refused: bool = False


class RouterState:
    def __init__(
        self,
        name: str,
        namespace: str,
        *,
        clock: Clock = time.monotonic,
        external_hosts: Sequence[AllowedHost] = (),
    ) -> None:
        self.name = name
        self.namespace = namespace
        self.clock = clock
        #: where a backend with credentials may lead besides its provider's own host (the admin's
        #: --router-external-hosts, handed over by the controller)
        self.external_hosts = tuple(external_hosts)
        self.config: RouterConfig | None = None
        self.loaded: Loaded | None = None
        #: the ModelRouter is gone (deleted): nothing is routed
        self.deleted = False
        self.quarantine = Quarantine(15.0)
        self.budgets = Budgets()
        self.latency: dict[str, RollingP95] = {}
        #: per Service: the ready endpoints (host:port)
        self.endpoints: dict[str, tuple[str, ...]] = {}
        #: service -> {host:port -> pod name}: how the metrics name endpoints
        self.endpoint_names: dict[str, dict[str, str]] = {}
        #: service -> its serving mode (chat, embedding, rerank; "" unknown), from its slices' labels
        self.modes: dict[str, str] = {}
        #: per endpoint (host:port, or an external backend's name): requests in flight
        self.in_flight: dict[str, int] = {}
        self.turn = 0
        #: per weighted rule: its last draw (a router process starts each rule at a random point)
        self.draws: dict[str, float] = {}
        #: per InferenceService backend (by its name): whether it sleeps (scale to zero)
        self.sleepers: dict[str, Sleeper] = {}
        #: requests held for sleeping backends, by InferenceService (plan/router/wake.py)
        self.wakes = WakeQueue()
        #: the last request of each backend that may sleep, shared through the API
        self.activity = ActivityClock()
        #: called with the new config once one is accepted (the watches and probes follow it)
        self.listeners: list[Callable[[RouterConfig], None]] = []
        #: set (and replaced) when some Service's ready endpoints change: held requests look again
        self._endpoints_changed = asyncio.Event()
        #: per endpoint: futures of requests waiting for its answer, resolved when it leaves its
        #: Service's ready endpoints (its pod is being deleted)
        self._leaving: dict[str, set[asyncio.Future[None]]] = {}

    # -- the spec -------------------------------------------------------------------------------

    def load(self, obj: dict[str, Any]) -> Loaded:
        """A ModelRouter as the watch delivered it: compiled and used, unless it has errors."""
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        generation = int(meta.get("generation") or 0)
        issues = validate(spec, self.name)
        # The controller refuses such a spec too, but leaves this router running: a spec edited
        # under it must not send the key it has mounted to a host the admin did not allow.
        issues += credential_host_issues(spec, self.external_hosts)
        self.deleted = False
        if any(issue.severity == "error" for issue in issues):
            self.loaded = Loaded(generation, issues, refused=True)
            return self.loaded
        config = compile_config(spec, name=self.name, namespace=self.namespace, generation=generation)
        self.config = config
        self.quarantine.duration = config.quarantine
        self.budgets.reconfigure(config.budgets)
        for backend in list(self.latency):
            if config.backend(backend) is None:
                del self.latency[backend]
        rules = {rule.name for rule in config.rules}
        self.draws = {rule: draw for rule, draw in self.draws.items() if rule in rules}
        self.loaded = Loaded(generation, issues)
        for listener in self.listeners:
            listener(config)
        return self.loaded

    def gone(self) -> None:
        self.deleted = True
        self.config = None
        self._endpoints_changed.set()  # requests waiting for endpoints are answered now
        self._endpoints_changed = asyncio.Event()

    # -- endpoints ------------------------------------------------------------------------------

    def set_endpoints(
        self, service: str, endpoints: tuple[str, ...], *, names: dict[str, str] | None = None, mode: str = ""
    ) -> None:
        """A Service's ready endpoints (`host:port`), the pods they are (for the metrics), and the
        serving mode its labels say (embeddings and rerank requests are routed by it)."""
        self.modes[service] = mode
        before = self.endpoints.get(service, ())
        self.endpoints[service] = endpoints
        self.endpoint_names[service] = {e: names[e] for e in endpoints if names and e in names}
        for gone in set(before) - set(endpoints):
            self.quarantine.forget(gone)
            for waiting in self._leaving.pop(gone, ()):
                if not waiting.done():
                    waiting.set_result(None)
        if endpoints != before:
            self._endpoints_changed.set()
            self._endpoints_changed = asyncio.Event()

    async def endpoints_change(self, within: float) -> bool:
        """Wait until some Service's ready endpoints change (True) or `within` seconds pass."""
        changed = self._endpoints_changed
        try:
            async with asyncio.timeout(within):
                await changed.wait()
        except TimeoutError:
            return False
        return True

    def leaving(self, endpoint: str) -> asyncio.Future[None]:
        """A future resolved when `endpoint` leaves its Service's ready endpoints; `stay` when done
        with it."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._leaving.setdefault(endpoint, set()).add(future)
        return future

    def stay(self, endpoint: str, future: asyncio.Future[None]) -> None:
        waiting = self._leaving.get(endpoint)
        if waiting is not None:
            waiting.discard(future)
            if not waiting:
                del self._leaving[endpoint]

    def set_sleeper(self, isvc: str, sleeper: Sleeper | None) -> None:
        """What an InferenceService backend says of its sleep (None: it is gone, or not watched)."""
        before = self.sleepers.get(isvc)
        if sleeper is None:
            self.sleepers.pop(isvc, None)
            self.activity.forget(isvc)
        else:
            self.sleepers[isvc] = sleeper
            if sleeper.last_request is not None:
                self.activity.shared(isvc, sleeper.last_request)
        if sleeper != before:
            self._endpoints_changed.set()  # a request held for it looks again (it may sleep now)
            self._endpoints_changed = asyncio.Event()

    def asleep(self, backend: Backend) -> bool:
        """An InferenceService backend that sleeps (scaled to zero), with no ready endpoint."""
        sleeper = self.sleepers.get(backend.inference_service or "")
        return sleeper is not None and sleeper.asleep and not self.endpoints_of(backend)

    def wake_room(self, backend: Backend) -> bool:
        return self.wakes.room(backend.inference_service or "")

    def drop_service(self, service: str) -> None:
        self.endpoint_names.pop(service, None)
        self.modes.pop(service, None)
        for gone in self.endpoints.pop(service, ()):
            self.quarantine.forget(gone)

    def mode(self, backend: Backend) -> str:
        """The serving mode of an InferenceService backend's Service ("": external, or unlabelled)."""
        return self.modes.get(backend.service or "", "") if not backend.external else ""

    def endpoints_of(self, backend: Backend) -> tuple[str, ...]:
        return self.endpoints.get(backend.service or "", ()) if not backend.external else ()

    def usable_endpoints(self, backend: Backend, now: float, excluding: Collection[str] = ()) -> list[str]:
        """The backend's ready endpoints a request may go to now (not in quarantine), but `excluding`."""
        return [
            e for e in self.endpoints_of(backend) if e not in excluding and self.quarantine.usable(e, now)
        ]

    def request_began(self, endpoint: str) -> None:
        self.in_flight[endpoint] = self.in_flight.get(endpoint, 0) + 1

    def request_ended(self, endpoint: str) -> None:
        left = self.in_flight[endpoint] - 1
        if left > 0:
            self.in_flight[endpoint] = left
        else:
            del self.in_flight[endpoint]  # the gauge of an idle endpoint is its absence

    def endpoint_count(self, backend: Backend) -> int:
        return len(self.endpoints_of(backend))

    def usable(self, backend: Backend) -> bool:
        now = self.clock()
        if backend.external:
            return self.quarantine.usable(backend.name, now)
        return any(self.quarantine.usable(e, now) for e in self.endpoints_of(backend))

    def p95(self) -> dict[str, float]:
        now = self.clock()
        found = {}
        for backend, tracker in self.latency.items():
            value = tracker.value(now)
            if value is not None:
                found[backend] = value
        return found

    def record_latency(self, backend: str, seconds: float) -> None:
        tracker = self.latency.get(backend)
        if tracker is None:
            tracker = self.latency[backend] = RollingP95()
        tracker.add(seconds, self.clock())

    def last_draw(self, rule: str) -> float:
        """The weighted rule's last draw (plan/router/strategy.py next_draw follows it): a rule not
        drawn yet starts at a random point, so each router replica keeps its own sequence."""
        previous = self.draws.get(rule)
        return random.random() if previous is None else previous

    def keep_draw(self, rule: str, draw: float) -> None:
        self.draws[rule] = draw

    def next_turn(self) -> int:
        self.turn += 1
        return self.turn

    # -- the gauges (metrics.StateView) ---------------------------------------------------------

    def backend_health(self) -> Iterable[tuple[str, bool, int]]:
        config = self.config
        if config is None:
            return []
        return [(b.name, self.usable(b), len(self.endpoints_of(b))) for b in config.backends.values()]

    def endpoint_in_flight(self) -> Iterable[tuple[str, str, int]]:
        config = self.config
        if config is None:
            return []
        found = []
        for backend in config.backends.values():
            if backend.external:
                found.append((backend.name, backend.name, self.in_flight.get(backend.name, 0)))
                continue
            # Named by its pod (else by the backend and its place among the ready endpoints): never by
            # the pod's address, which /metrics would show any client.
            names = self.endpoint_names.get(backend.service or "", {})
            for index, endpoint in enumerate(self.endpoints_of(backend)):
                label = names.get(endpoint) or f"{backend.name}-{index}"
                found.append((backend.name, label, self.in_flight.get(endpoint, 0)))
        return found

    def budget_remaining(self) -> Iterable[tuple[str, str, float]]:
        now = self.clock()
        found = []
        for budget in self.budgets.budgets:
            if budget.scope == "team":
                continue
            tokens, usd = self.budgets.remaining(budget, now)
            if tokens is not None:
                found.append((budget.name, "tokens", tokens))
            if usd is not None:
                found.append((budget.name, "usd", usd))
        return found

    def budget_teams(self) -> Iterable[tuple[str, int]]:
        return [(b.name, self.budgets.teams(b.name)) for b in self.budgets.budgets if b.scope == "team"]
