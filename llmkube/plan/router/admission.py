"""Whether a request is let in, and where it goes: the router's decision at its door.

A request is looked at three times, each on what the router has read of it so far, so that what it
reads is bounded by what it has admitted:

1. `admit_head`, its head alone: with client keys on, the key is one of the Secret's and within its
   rate. A client without its key never makes the router read its body.
2. `admit_body`, the body's bytes: its size against the spec's limit, what parsing it would cost
   against its allowance and the body budget every request in flight shares, then the body parsed.
3. `admit`, the parsed request: its classification (the header, or what the detector found), the
   rule it falls under (narrowed to the backends of the serving mode its endpoint needs: an
   embeddings or rerank request goes to an InferenceService of that mode), what its key may use,
   the budgets that apply and whether they have room for its estimate, the backends to try in
   order and the shadows, and how long it may wait for an InferenceService backend between the
   pods of a rollout when nothing can serve it now.

Each returns a value: the router's own answer (`Refused`, or a `Refusal` with what the audit line
says of the request), or what the router then does: the rate token to take, the bytes of the body
budget to hold, the budget reservation to hold, the weighted rule's draw to keep, the attempts to
make. Admission reads the router's state (`View`) and writes nothing; the process performs what it
returns (llmkube.router)."""

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from llmkube.plan.router import errors
from llmkube.plan.router.bodies import parse_allowance, parse_cost
from llmkube.plan.router.budgets import Budgets, reservation_estimate
from llmkube.plan.router.config import TASK_COMPLEXITY_HEADER, WEIGHTED, ApiKey, Backend, Budget, RouterConfig
from llmkube.plan.router.detector import Detection
from llmkube.plan.router.errors import Refused
from llmkube.plan.router.hold import endpoint_wait, sleeping
from llmkube.plan.router.matching import Decision, Features, decide, for_endpoint
from llmkube.plan.router.requests import NOT_GENERATING, Endpoint, ParsedRequest, parse_request, too_costly
from llmkube.plan.router.strategy import Attempts, attempts, next_draw
from llmkube.plan.router.value import value

Applicable = tuple[tuple[Budget, str], ...]


class View(Protocol):
    """What admission reads of the router's state at this moment (llmkube.router.state)."""

    @property
    def budgets(self) -> Budgets: ...

    def usable(self, backend: Backend) -> bool:
        """A ready endpoint out of quarantine (an InferenceService), or out of quarantine (external)."""
        ...

    def endpoint_count(self, backend: Backend) -> int:
        """Ready endpoints of an InferenceService backend."""
        ...

    def mode(self, backend: Backend) -> str:
        """The serving mode (chat, embedding, rerank) its Service's label says ("": not known)."""
        ...

    def asleep(self, backend: Backend) -> bool:
        """An InferenceService backend scaled to zero, with no ready endpoint (plan/router/wake.py)."""
        ...

    def wake_room(self, backend: Backend) -> bool:
        """Its wake queue has room for one more request."""
        ...

    def p95(self) -> Mapping[str, float]:
        """The rolling p95 time to first byte of each backend measured."""
        ...

    def last_draw(self, rule: str) -> float:
        """The weighted rule's last draw (a router process starts each rule at a random point)."""
        ...


class Rates(Protocol):
    """What admission reads of the client keys' rates (llmkube.plan.router.ratelimit)."""

    def due(self, key: str, per_minute: int, now: float) -> float | None: ...


@value
class Facts:
    """What the audit line says of a request, as far as admission got (None: not known)."""

    client: str | None = None
    model: str | None = None
    stream: bool = False
    #: the parsed body, when `auditLog.includeRequestBody` asks for it
    body: Any = None
    classification: str | None = None
    detected: Sequence[str] = ()
    #: the rule it fell under (`default`, `none`)
    rule: str | None = None
    team: str | None = None
    #: the budget that refused it
    budget: str | None = None


NO_FACTS = Facts()


@value
class Refusal:
    """A request admission turns away: the router's answer, and what the audit line says of it."""

    answer: Refused
    facts: Facts = NO_FACTS


@value
class Caller:
    """Who sent a request, with client keys on: the key's name in the Secret and what it may do."""

    key: ApiKey
    #: the key's rate (requests a minute) to count one request against (None: it has none)
    rate: int | None


@value
class Body:
    """A body admitted: parsed, and what it holds of the body budget until it is answered."""

    parsed: ParsedRequest
    #: the body as received (what goes upstream unless the router must change it)
    raw: bytes
    #: bytes: what parsing it costs, and the copy that may go upstream
    holds: int


@value
class Hold:
    """What a request holds of its budgets from admission until it is settled."""

    applicable: Applicable
    tokens: int
    usd: float


@value
class Admission:
    """A request let in: where it goes, and what the router holds for it meanwhile."""

    config: RouterConfig
    parsed: ParsedRequest
    decision: Decision
    #: its classification is sensitive: no cloud backend, and nothing but its rule
    sensitive: bool
    #: the weighted rule's draw, to keep as its last (None: not a weighted rule)
    draw: float | None
    attempts: Attempts
    #: seconds it may wait for a backend's first ready endpoint when `attempts` has none to try
    wait: float
    #: its budget reservation (None: no budget applies)
    hold: Hold | None
    facts: Facts

    @property
    def applicable(self) -> Applicable:
        """The budgets it counts against (a shadow's copy counts there too, holding nothing)."""
        return self.hold.applicable if self.hold is not None else ()


def admit_head(
    config: RouterConfig, presented: str | None, client: str | None, rates: Rates, now: float
) -> Refused | Caller:
    """A request's head, with client keys on: `presented` the key it sent, `client` the name of
    the Secret's key it matched (None: none did)."""
    if client is None:
        return errors.unauthorized(bool(presented))
    key = config.api_key(client)
    per_minute = key.requests_per_minute
    if per_minute is not None:
        wait = rates.due(client, per_minute, now)
        if wait is not None:
            return errors.over_rate(client, per_minute, wait)
    return Caller(key, per_minute)


def admit_body(
    raw: bytes | None, endpoint: Endpoint, *, limit: int, budget: int, free: int
) -> Refused | Body:
    """The body as read (None: larger than the server reads, left unread) against the spec's
    `limit` and the body budget: `budget` bytes, of which `free` are not held now."""
    if raw is None or len(raw) > limit:
        return errors.too_large(limit)
    # What parsing it will cost is bounded before it is parsed, and held with the copy that may go
    # upstream against the budget every body in flight shares.
    cost = parse_cost(raw)
    holds = cost + len(raw)
    if cost > parse_allowance(len(raw)) or holds > budget:
        return too_costly(len(raw), cost, close=True)
    if holds > free:
        return errors.busy()
    parsed = parse_request(raw, endpoint, cost=cost)
    if isinstance(parsed, Refused):
        return parsed
    return Body(parsed, raw, holds)


def reads_body(config: RouterConfig, headers: Mapping[str, str]) -> bool:
    """Whether classifying the request takes the detector: its mode reads bodies (`detector`, or
    `hybrid` and the request sent no classification header)."""
    policy = config.classification
    if policy.mode == "header-only":
        return False
    return policy.mode == "detector" or not headers.get(policy.header, "").strip()


def admit(
    config: RouterConfig,
    parsed: ParsedRequest,
    headers: Mapping[str, str],
    view: View,
    now: float,
    *,
    key: ApiKey | None = None,
    found: Detection | None = None,
    wait_limit: float = 0.0,
    wake_limit: float = 0.0,
) -> Refusal | Admission:
    """A parsed request: `headers` its lower-case names and first values, `key` its client key's
    policy (keys on), `found` what the detector found in it (where `reads_body`), `wait_limit` the
    most a request waits for an endpoint (the router's --endpoint-wait), `wake_limit` for a sleeping
    backend to wake (--wake-timeout)."""
    detected: tuple[str, ...] = ()
    if found is None:
        classification = headers.get(config.classification.header, "").strip().lower()
    else:
        classification, detected = ("pii" if found.found else ""), tuple(sorted(found.kinds))
    complexity = headers.get(TASK_COMPLEXITY_HEADER, "").strip().lower()
    # /v1/embeddings and /v1/rerank go to backends of that serving mode; chat stays off them.
    decision = for_endpoint(
        config,
        decide(config, Features(parsed.model, classification, complexity, headers)),
        parsed.endpoint,
        lambda name: _mode(config, view, name),
    )
    client = key.name if key is not None else None
    body = parsed.body if config.audit.include_body else None
    known = (client, parsed.model, parsed.stream, body, classification or None, detected, decision.rule_name)
    if not decision.backends:
        return Refusal(errors.no_route(config.name, parsed.model), Facts(*known))
    if key is not None and key.rules and decision.rule_name not in key.rules:
        return Refusal(
            errors.rule_not_allowed(key.name, decision.rule_name, sorted(key.rules)), Facts(*known)
        )
    # With keys on, a team is the key's (a header cannot name a fresh budget); else the header.
    identity = key.identity if key is not None else None
    team_budget = next((b for b in config.budgets if b.scope == "team"), None)
    team = None
    if team_budget is not None:
        team = identity if identity is not None else headers.get(team_budget.header_key, "")
    facts = Facts(*known, team)
    hold = None
    if config.budgets:
        rule = decision.rule.name if decision.rule is not None else None
        applicable = tuple(view.budgets.applicable(rule=rule, headers=headers, identity=identity))
        if applicable:
            spent = view.budgets.check(applicable, now)
            if spent is not None:
                answer = errors.budget_spent(spent.message, spent.retry_after)
                return Refusal(answer, replace(facts, budget=spent.budget))
            hold = _estimate(config, decision, parsed, applicable)
    sensitive = classification in config.classification.sensitive
    draw = next_draw(view.last_draw(decision.rule_name)) if decision.strategy == WEIGHTED else None
    planned = plan_attempts(config, decision, view, sensitive=sensitive, draw=draw)
    wait = 0.0
    if not planned.order:
        local = [b for b in config.backends.values() if not b.external]
        counts = {b.name: view.endpoint_count(b) for b in local}
        asleep = frozenset(b.name for b in local if view.asleep(b)) if wake_limit > 0 else frozenset()
        full = [
            name
            for name in sleeping(config, decision, asleep, sensitive=sensitive)
            if not view.wake_room(config.backends[name])
        ]
        if full:
            return Refusal(errors.wake_queue_full(full[0]), facts)
        wait = endpoint_wait(
            config,
            decision,
            counts,
            sensitive=sensitive,
            limit=wait_limit,
            asleep=asleep,
            wake_limit=wake_limit,
        )
    return Admission(config, parsed, decision, sensitive, draw, planned, wait, hold, facts)


def plan_attempts(
    config: RouterConfig, decision: Decision, view: View, *, sensitive: bool, draw: float | None
) -> Attempts:
    """The backends a request tries, in order, and its shadows, as the router's state is now (an
    admitted request that waited for endpoints plans again: the same rule, draw and sensitivity)."""

    def usable(name: str) -> bool:
        backend = config.backend(name)
        if backend is None or (sensitive and backend.tier == "cloud"):
            return False  # sensitive data never goes to a cloud backend
        return view.usable(backend)

    # The rolling p95s are sorted windows: computed only for a rule that orders by them.
    slo = decision.rule is not None and decision.rule.latency_slo is not None
    return attempts(config, decision, usable, draw=draw or 0.0, p95=view.p95() if slo else {})


def _mode(config: RouterConfig, view: View, name: str) -> str:
    backend = config.backend(name)
    return view.mode(backend) if backend is not None else ""


def _estimate(
    config: RouterConfig, decision: Decision, parsed: ParsedRequest, applicable: Applicable
) -> Hold:
    tokens = reservation_estimate(
        len(parsed.prompt_text()), parsed.max_tokens, answers=parsed.endpoint not in NOT_GENERATING
    )
    # The backend is not chosen yet: the dearest of the route's prices.
    price = max(
        (
            max(b.prompt_usd, b.completion_usd)
            for name in decision.backends
            if (b := config.backend(name)) is not None
        ),
        default=0.0,
    )
    return Hold(applicable, tokens, tokens * price)
