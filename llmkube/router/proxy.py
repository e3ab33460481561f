"""One request through the router: read and check it, choose (plan/router), forward, relay the
answer, count it, write its audit line.

* The body is read whole by the server (up to the spec's limit); it is forwarded as received unless
  the backend needs another `model` or a stream needs its usage chunk asked for.
* An attempt that fails before the client got a byte (a connect error, a 5xx, no headers within the
  timeout) goes to the next endpoint of the same InferenceService (at most three), then to the
  next backend of the route; once a byte has reached the client, nothing is retried (a reset
  stream is cut off, so the client sees a broken stream, not a short one).
* A stream is relayed chunk by chunk as it arrives (`StreamRelay`: a callback of the backend's
  connection writes to the client's), with back-pressure: the router stops reading from the backend
  while the client's buffer is full. A client that goes away cancels the request: the connection to
  the backend is closed at once, so it stops generating.
* A request classified sensitive never reaches a cloud backend, whatever rule it matched; a
  fail-closed rule that cannot serve answers 503 and tries nothing else.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import structlog

from llmkube.api.constants import SERVER_KEY_SECRET_KEY as SERVER_KEY
from llmkube.kube.blocking import run_in_daemon_thread
from llmkube.plan.router import errors
from llmkube.plan.router.audit import AuditRecord, audit_line
from llmkube.plan.router.balancer import AFFINITY_PREFIX, choose
from llmkube.plan.router.bodies import parse_allowance, parse_cost
from llmkube.plan.router.budgets import NO_RESERVATION, Refusal, Reservation, reservation_estimate
from llmkube.plan.router.config import (
    DEFAULT_MAX_BODY_BYTES,
    TASK_COMPLEXITY_HEADER,
    WEIGHTED,
    ApiKey,
    Backend,
    RouterConfig,
)
from llmkube.plan.router.detector import detect
from llmkube.plan.router.errors import Refused
from llmkube.plan.router.hold import endpoint_wait
from llmkube.plan.router.matching import Decision, Features, decide, for_endpoint
from llmkube.plan.router.providers import auth_headers, upstream_url
from llmkube.plan.router.ratelimit import RateLimits
from llmkube.plan.router.requests import (
    NOT_GENERATING,
    PATHS,
    Endpoint,
    ParsedRequest,
    parse_request,
    too_costly,
    upstream_body,
)
from llmkube.plan.router.strategy import Attempts, attempts
from llmkube.plan.router.timeouts import header_timeout
from llmkube.plan.router.usage import StreamUsage, Usage, delivered, estimate, usage_of_body
from llmkube.router.audit import AuditSink
from llmkube.router.http.budget import ByteBudget
from llmkube.router.http.client import (
    Answer,
    AnswerBroken,
    AnswerSilent,
    ConnectFailed,
    ConnectionBroken,
    InvalidHeader,
)
from llmkube.router.http.limits import Limits
from llmkube.router.http.messages import BodyError, Headers, Request
from llmkube.router.http.server import Responder
from llmkube.router.metrics import RouterMetrics
from llmkube.router.relay import ClientGone, Discard, StreamRelay, UpstreamReset
from llmkube.router.secrets import ApiKeys, SecretFiles
from llmkube.router.state import RouterState
from llmkube.router.upstream import EgressRefused, Upstreams

__all__ = ["Proxy"]

log = structlog.get_logger("llmkube.router.proxy")

#: endpoints of one InferenceService tried for one request before the next backend
MAX_ENDPOINT_TRIES = 3
#: shadow copies in flight at most (beyond, a copy is dropped: shadows never queue)
MAX_SHADOWS = 64
#: bodies larger than this are read by the detector off the event loop
DETECT_OFF_LOOP_BYTES = 256 << 10
#: a client's X-Request-Id is kept if it is this short and printable
MAX_REQUEST_ID = 128

# Hop-by-hop headers (RFC 9110 7.6.1), and what the router sets itself or must not pass on.
_NOT_FORWARDED = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "authorization",
        "x-api-key",
        "cookie",
        "accept-encoding",
        "expect",
        "x-request-id",
    }
)
_NOT_RETURNED = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "set-cookie",
    }
)


@dataclass
class Failure:
    reason: str  # connect, refused, timeout, 5xx, disconnected
    detail: str


@dataclass
class Exchange:
    """One request's facts, as they become known (the audit line is made from them)."""

    request: Request
    responder: Responder
    started: float
    record: AuditRecord
    config: RouterConfig | None = None
    parsed: ParsedRequest | None = None
    raw: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    decision: Decision | None = None
    applicable: list[Any] = field(default_factory=list)
    #: what the request holds of its budgets until it is settled (llmkube.plan.router.budgets)
    reservation: Reservation = NO_RESERVATION
    #: the client key's policy, when keys are on
    key: ApiKey | None = None
    #: bytes of the body budget it holds (its body's parsing and copy)
    held_bytes: int = 0
    #: the backend working on it (a client leaving now is charged its reservation)
    attempting: Backend | None = None
    #: the stream being relayed (a client leaving now is charged what it was sent)
    follower: StreamUsage | None = None
    first_byte: float | None = None
    #: (reason, what happened, as the client may read it: backend names, never addresses) of each
    #: failed attempt
    failures: list[tuple[str, str]] = field(default_factory=list)


def _request_id(request: Request) -> str:
    given = request.header("x-request-id") or ""
    if given and len(given) <= MAX_REQUEST_ID and given.isprintable():
        return given
    return os.urandom(8).hex()


def _bearer(value: str | None) -> str | None:
    if value and value[:7].lower() == "bearer ":
        return value[7:].strip() or None
    return None


def error_body(status: int, message: str) -> tuple[str, bytes]:
    """What the server answers by itself (a malformed request, a head too large), in OpenAI's shape."""
    kind = errors.SERVER if status >= 500 else errors.INVALID_REQUEST
    return "application/json", Refused(status, message, kind, "invalid_http").body()


class Proxy:
    def __init__(
        self,
        state: RouterState,
        upstreams: Upstreams,
        metrics: RouterMetrics,
        audit: AuditSink,
        *,
        credentials: SecretFiles,
        api_keys_root: Path,
        server_keys: SecretFiles | None = None,
        ready: Callable[[], list[str]],
        metrics_page: Callable[[], bytes],
        endpoint_wait: float = 0.0,
        bodies: ByteBudget | None = None,
    ) -> None:
        self.state = state
        self.upstreams = upstreams
        self.metrics = metrics
        self.audit = audit
        self.credentials = credentials
        #: the InferenceService backends' server keys (a metal service's host servers ask for them)
        self.server_keys = server_keys
        self.api_keys_root = api_keys_root
        self.ready = ready
        self.metrics_page = metrics_page
        #: the most a request waits for a backend's first ready endpoint (llmkube.plan.router.hold)
        self.endpoint_wait = endpoint_wait
        self._api_keys: dict[str, ApiKeys] = {}
        #: what bodies in flight hold, shared with the HTTP server (which counts them as they come)
        self.bodies = bodies or ByteBudget(Limits().body_budget)
        self.rates = RateLimits()
        self._shadows: set[asyncio.Task[None]] = set()
        #: requests being answered (a graceful stop waits for them)
        self.in_flight = 0
        self.idle = asyncio.Event()
        self.idle.set()

    def body_limit(self) -> int:
        """The largest request body the server reads: the spec's `proxy.maxRequestBodyBytes`, and
        never more than the body budget (such a body could never be held)."""
        config = self.state.config
        limit = config.max_body_bytes if config is not None else DEFAULT_MAX_BODY_BYTES
        return min(limit, self.bodies.total)

    # -- the entry point ------------------------------------------------------------------------

    async def handle(self, request: Request, responder: Responder) -> None:
        path = request.path
        endpoint = PATHS.get(path)
        if endpoint is not None:
            if request.method != "POST":
                self._unrouted(request, responder, errors.method_not_allowed(request.method, path, "POST"))
                return
            await self._serve(request, responder, endpoint)
            return
        if path == "/v1/models":
            if request.method not in ("GET", "HEAD"):
                self._unrouted(request, responder, errors.method_not_allowed(request.method, path, "GET"))
                return
            self._models(request, responder)
            return
        if path == "/healthz":
            responder.respond(200, _TEXT, b"ok\n")
            return
        if path == "/readyz":
            problems = self.ready()
            if problems:
                responder.respond(503, _TEXT, ("\n".join(problems) + "\n").encode())
            else:
                responder.respond(200, _TEXT, b"ok\n")
            return
        if path == "/metrics":
            responder.respond(200, _METRICS, self.metrics_page())
            return
        self._unrouted(request, responder, errors.not_found(path))

    def _unrouted(self, request: Request, responder: Responder, refused: Refused) -> None:
        self._refuse(self._exchange(request, responder), refused)

    def _exchange(self, request: Request, responder: Responder) -> Exchange:
        return Exchange(
            request,
            responder,
            time.perf_counter(),
            AuditRecord(self.state.name, self.state.namespace, _request_id(request), request.path),
        )

    async def _serve(self, request: Request, responder: Responder, endpoint: Endpoint) -> None:
        exchange = self._exchange(request, responder)
        self.in_flight += 1
        self.idle.clear()
        try:
            await self._proxy(exchange, endpoint)
        except asyncio.CancelledError:
            exchange.record.status, exchange.record.outcome = 499, "client_gone"
            self._charge_gone(exchange)
            self._finish(exchange)
            raise
        except ClientGone:
            exchange.record.status, exchange.record.outcome = 499, "client_gone"
            self._charge_gone(exchange)
            self._finish(exchange)
            responder.abort()  # nothing more goes out on it
        except Exception as error:  # a defect: the client gets a 500 in OpenAI's shape, never a traceback
            log.exception("request failed", request_id=exchange.record.request_id, error=str(error))
            if responder.started:
                responder.abort()
                exchange.record.status, exchange.record.outcome = 500, "internal_error"
                self._finish(exchange)
                return
            self._refuse(
                exchange,
                Refused(
                    500,
                    "The router failed on this request (see its log).",
                    errors.SERVER,
                    "internal_error",
                    outcome="internal_error",
                ),
            )
        finally:
            if exchange.reservation is not NO_RESERVATION:
                self._settle(exchange, 0, 0.0)  # refused or failed: it used nothing
            self.bodies.give(exchange.held_bytes)
            exchange.held_bytes = 0
            self.in_flight -= 1
            if self.in_flight == 0:
                self.idle.set()

    # -- answers of the router itself -----------------------------------------------------------

    def _refuse(self, exchange: Exchange, refused: Refused) -> None:
        record = exchange.record
        record.status, record.outcome = refused.status, refused.outcome
        headers = refused.headers()
        headers["X-Request-Id"] = record.request_id
        self.metrics.refusal(refused.outcome)
        self._finish(exchange)
        exchange.responder.respond(refused.status, headers.items(), refused.body())

    def _finish(self, exchange: Exchange) -> None:
        """The audit line and the request's metrics."""
        record = exchange.record
        elapsed = time.perf_counter() - exchange.started
        record.latency_ms = elapsed * 1000
        if exchange.first_byte is not None:
            record.ttft_ms = exchange.first_byte * 1000
        decision = exchange.decision
        rule = decision.rule_name if decision is not None else "none"
        self.metrics.answered(rule, record.backend or "", record.status, elapsed, exchange.first_byte)
        config = exchange.config or self.state.config
        include_body = config is not None and config.audit.include_body
        self.audit.write(audit_line(record, include_body=include_body))

    # -- a routed request -----------------------------------------------------------------------

    async def _proxy(self, exchange: Exchange, endpoint: Endpoint) -> None:
        config = self.state.config
        if config is None:
            self._refuse(exchange, self._no_spec())
            return
        exchange.config = config
        request = exchange.request
        if config.api_keys_secret:
            refused = self._authenticate(exchange, config.api_keys_secret)
            if refused is not None:
                self._refuse(exchange, refused)
                return
        # Read only now: a client without its key never made the router read its body.
        try:
            raw = await request.read_body()
        except BodyError as broken:
            busy = broken.status == 503
            self._refuse(
                exchange,
                Refused(
                    broken.status,
                    str(broken),
                    errors.UNAVAILABLE if busy else errors.INVALID_REQUEST,
                    "server_busy" if busy else "invalid_http",
                    retry_after=broken.retry_after,
                    outcome="busy" if busy else "bad_request",
                ),
            )
            return
        if raw is None or len(raw) > config.max_body_bytes:
            # The rest of the body is not read: the connection closes after the answer (not before:
            # the client gets the 413).
            exchange.responder.close_after = True
            self._refuse(
                exchange,
                Refused(
                    413,
                    f"The request body is larger than this router takes: {config.max_body_bytes} bytes.",
                    code="request_too_large",
                    outcome="too_large",
                ),
            )
            return
        # What parsing it will cost, bounded before it is parsed, and held (with the copy that may
        # go upstream) against the budget every body in flight shares.
        cost = parse_cost(raw)
        if cost > parse_allowance(len(raw)) or cost + len(raw) > self.bodies.total:
            exchange.responder.close_after = True
            self._refuse(exchange, too_costly(len(raw), cost))
            return
        if not self.bodies.take(cost + len(raw)):
            self._refuse(
                exchange,
                Refused(
                    503,
                    "The router is holding as many request bodies as it can: retry shortly.",
                    errors.UNAVAILABLE,
                    "server_busy",
                    retry_after=1,
                    outcome="busy",
                ),
            )
            return
        exchange.held_bytes = cost + len(raw)
        parsed = parse_request(raw, endpoint, cost=cost)
        if isinstance(parsed, Refused):
            self._refuse(exchange, parsed)
            return
        exchange.parsed, exchange.raw = parsed, raw
        record = exchange.record
        record.model, record.stream = parsed.model, parsed.stream
        record.body = parsed.body if config.audit.include_body else None
        headers = exchange.headers = request.lower_headers
        classification = await self._classify(config, parsed, headers, record, len(raw))
        decision = exchange.decision = for_endpoint(
            config,
            decide(
                config,
                Features(
                    parsed.model,
                    classification,
                    headers.get(TASK_COMPLEXITY_HEADER, "").strip().lower(),
                    headers,
                ),
            ),
            parsed.endpoint,
            lambda name: self.state.mode_of(config, name),
        )
        record.rule = decision.rule_name
        if not decision.backends:
            self._refuse(
                exchange,
                Refused(
                    503,
                    f'No rule of router "{config.name}" matches this request (model "{parsed.model}"), '
                    "and it has no defaultRoute.",
                    errors.UNAVAILABLE,
                    "no_route",
                    outcome="no_route",
                ),
            )
            return
        key = exchange.key
        if key is not None and key.rules and decision.rule_name not in key.rules:
            self._refuse(
                exchange,
                Refused(
                    403,
                    f'The API key "{key.name}" may not use rule "{decision.rule_name}" '
                    f"(it may use: {', '.join(sorted(key.rules))}).",
                    errors.PERMISSION,
                    "rule_not_allowed",
                    outcome="forbidden",
                ),
            )
            return
        sensitive = classification in config.classification.sensitive
        # With keys on, a team is the key's (a header cannot name a fresh budget); else the header.
        identity = key.identity if key is not None else None
        team_budgets = [b for b in self.state.budgets.budgets if b.scope == "team"]
        if team_budgets:
            record.team = identity if identity is not None else headers.get(team_budgets[0].header_key, "")
        exchange.applicable = self.state.budgets.applicable(
            rule=decision.rule.name if decision.rule else None, headers=headers, identity=identity
        )
        over = self._reserve(exchange, config, decision)
        if over is not None:
            record.budget = over.budget
            self._refuse(
                exchange,
                Refused(
                    429,
                    over.message,
                    errors.RATE_LIMIT,
                    "budget_exceeded",
                    retry_after=over.retry_after,
                    outcome="budget",
                ),
            )
            return

        def usable(name: str) -> bool:
            backend = config.backend(name)
            if backend is None or (sensitive and backend.tier == "cloud"):
                return False  # sensitive data never goes to a cloud backend
            return self.state.usable(backend)

        # The rolling p95s are sorted windows: computed only for a rule that orders by them.
        slo = decision.rule is not None and decision.rule.latency_slo is not None
        draw = self.state.next_draw(decision.rule_name) if decision.strategy == WEIGHTED else 0.0

        def plan_now() -> Attempts:
            return attempts(config, decision, usable, draw=draw, p95=self.state.p95() if slo else {})

        plan = plan_now()
        if not plan.order:
            plan = await self._wait_for_endpoints(exchange, config, decision, sensitive, plan_now)
        for shadow in plan.shadows:
            backend = config.backend(shadow)
            if backend is not None:
                self._start_shadow(exchange, backend)
        for name in plan.order:
            backend = config.backend(name)
            assert backend is not None
            if await self._try_backend(exchange, backend):
                return
        self._refuse(exchange, self._nothing_served(exchange, config, decision, sensitive))

    async def _wait_for_endpoints(
        self,
        exchange: Exchange,
        config: RouterConfig,
        decision: Decision,
        sensitive: bool,
        plan_now: Callable[[], Attempts],
    ) -> Attempts:
        """Nothing can serve now: wait while an InferenceService backend of the route has no ready
        endpoint (between the pods of a rollout), as `endpoint_wait` allows; a client that goes
        away cancels the wait (the server cancels its request)."""
        counts = self.state.endpoint_counts(config)
        wait = endpoint_wait(config, decision, counts, sensitive=sensitive, limit=self.endpoint_wait)
        plan = plan_now()
        if wait <= 0:
            return plan
        started = time.perf_counter()
        deadline = started + wait
        self.metrics.waiting(1)
        try:
            while not plan.order and (left := deadline - time.perf_counter()) > 0:
                if not await self.state.endpoints_change(left) or self.state.deleted:
                    break
                plan = plan_now()
        finally:
            self.metrics.waiting(-1)
            exchange.record.waited_ms = (time.perf_counter() - started) * 1000
        return plan

    def _no_spec(self) -> Refused:
        if self.state.deleted:
            message = f'ModelRouter "{self.state.name}" was deleted.'
        elif self.state.loaded is not None and self.state.loaded.refused:
            problems = "; ".join(i.text() for i in self.state.loaded.issues if i.severity == "error")
            message = f'The spec of ModelRouter "{self.state.name}" is invalid: {problems}'
        else:
            message = f'ModelRouter "{self.state.name}" is not loaded yet.'
        return Refused(503, message, errors.UNAVAILABLE, "router_not_ready", retry_after=1, outcome="no_spec")

    def _nothing_served(
        self, exchange: Exchange, config: RouterConfig, decision: Decision, sensitive: bool
    ) -> Refused:
        tried = "; ".join(text for _, text in exchange.failures)
        if decision.fail_closed or sensitive:
            why = f"failed ({tried})" if tried else "can serve now"
            return Refused(
                503,
                f'fail-closed: no backend of rule "{decision.rule_name}" {why}, and sensitive data '
                "may not go elsewhere.",
                errors.UNAVAILABLE,
                "fail_closed",
                retry_after=max(1.0, config.quarantine),
                outcome="fail_closed",
            )
        if not tried:
            return Refused(
                503,
                f'No backend of "{decision.rule_name}" ({", ".join(decision.backends)}) can serve now: '
                "no ready endpoint, or in quarantine after failures.",
                errors.UNAVAILABLE,
                "no_backend",
                retry_after=max(1.0, config.quarantine),
                outcome="no_backend",
            )
        timeouts = all(reason == "timeout" for reason, _ in exchange.failures)
        return Refused(
            504 if timeouts else 502,
            f"Every backend failed: {tried}.",
            errors.SERVER,
            "upstream_timeout" if timeouts else "upstream_failed",
            outcome="upstream_failed",
        )

    def _authenticate(self, exchange: Exchange, secret: str) -> Refused | None:
        request = exchange.request
        presented = _bearer(request.header("authorization")) or request.header("x-api-key")
        keys = self._api_keys.get(secret)
        if keys is None:
            keys = self._api_keys[secret] = ApiKeys(self.api_keys_root / secret)
        client = keys.client(presented) if presented else None
        if client is None:
            return Refused(
                401,
                "Incorrect API key provided."
                if presented
                else "Missing API key: send Authorization: Bearer <key>.",
                errors.AUTHENTICATION,
                "invalid_api_key",
                outcome="unauthorized",
            )
        exchange.record.client = client
        key = exchange.key = exchange.config.api_key(client) if exchange.config else ApiKey(client)
        if key.requests_per_minute is not None:
            wait = self.rates.take(client, key.requests_per_minute, self.state.clock())
            if wait is not None:
                return Refused(
                    429,
                    f'The API key "{client}" is over its rate of {key.requests_per_minute} requests '
                    "a minute.",
                    errors.RATE_LIMIT,
                    "rate_limit_exceeded",
                    retry_after=wait,
                    outcome="rate_limited",
                )
        return None

    # -- budgets: admit (a reservation), settle (what was used) --------------------------------

    def _reserve(self, exchange: Exchange, config: RouterConfig, decision: Decision) -> Refusal | None:
        """Hold the request's estimate against every budget that applies (the decision is the pure
        `Budgets.reserve`; this keeps what it returned)."""
        parsed = exchange.parsed
        assert parsed is not None
        if not exchange.applicable:
            return None
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
        held = self.state.budgets.reserve(exchange.applicable, tokens, tokens * price, self.state.clock())
        if isinstance(held, Refusal):
            return held
        exchange.reservation = held
        return None

    def _settle(self, exchange: Exchange, tokens: int, usd: float) -> None:
        reservation, exchange.reservation = exchange.reservation, NO_RESERVATION
        self.state.budgets.settle(reservation, tokens, usd, self.state.clock())

    def _charge_gone(self, exchange: Exchange) -> None:
        """The client left: what it was sent is charged (a stream's chunks, counted or estimated),
        or, for an answer a backend was working on, what it was admitted for (the router cannot
        know how far the backend got before it was cancelled)."""
        parsed = exchange.parsed
        if parsed is None or exchange.record.usage is not None:
            return  # nothing was asked of a backend, or it is counted already
        follower = exchange.follower
        working = exchange.attempting
        prompt_chars = len(parsed.prompt_text())
        usage = delivered(
            follower.usage if follower is not None else None,
            prompt_chars,
            follower.content_events if follower is not None else None,
            reserved=(
                exchange.reservation.tokens
                or reservation_estimate(
                    prompt_chars, parsed.max_tokens, answers=parsed.endpoint not in NOT_GENERATING
                )
            )
            if working is not None
            else None,
        )
        self._account(exchange, working, usage)

    async def _classify(
        self,
        config: RouterConfig,
        parsed: ParsedRequest,
        headers: dict[str, str],
        record: AuditRecord,
        size: int,
    ) -> str:
        policy = config.classification
        given = headers.get(policy.header, "").strip().lower()
        if policy.mode == "header-only" or (policy.mode == "hybrid" and given):
            record.classification = given or None
            return given
        if size > DETECT_OFF_LOOP_BYTES:
            found = await run_in_daemon_thread(detect, parsed.body)
        else:
            found = detect(parsed.body)
        record.detected = sorted(found.kinds)
        classification = "pii" if found.found else ""
        record.classification = classification or None
        return classification

    # -- forwarding -----------------------------------------------------------------------------

    def _upstream_headers(self, exchange: Exchange, backend: Backend, config: RouterConfig) -> Headers:
        headers: Headers = []
        private = backend.external and backend.tier == "cloud"
        for name, value in exchange.request.headers:
            lower = name.lower()
            if lower in _NOT_FORWARDED:
                continue
            if private and (lower.startswith("x-llmkube-") or lower == config.classification.header):
                continue  # routing labels stay inside
            headers.append((name, value))
        headers.append(("Accept-Encoding", "identity"))
        headers.append(("X-Request-Id", exchange.record.request_id))
        if backend.inference_service and self.server_keys is not None:
            server_key = self.server_keys.value(backend.inference_service, SERVER_KEY)
            if server_key:
                headers.append(("Authorization", f"Bearer {server_key}"))
        if backend.external:
            key = (
                self.credentials.value(backend.credentials_secret, backend.credential_key)
                if backend.credentials_secret and backend.credential_key
                else None
            )
            headers.extend(auth_headers(backend.provider, key).items())
        return headers

    async def _try_backend(self, exchange: Exchange, backend: Backend) -> bool:
        """Whether the backend answered (the answer is then on its way to the client, or there)."""
        config = exchange.config
        parsed = exchange.parsed
        assert config is not None and parsed is not None
        body, injected = upstream_body(
            parsed, exchange.raw, model=backend.model if backend.external else None
        )
        headers = self._upstream_headers(exchange, backend, config)
        timeout = header_timeout(
            exchange.decision.rule if exchange.decision else None, backend, config.header_timeout
        )
        path = exchange.request.path
        if backend.external:
            if not self.state.quarantine.acquire(backend.name, self.state.clock()):
                return False
            url = upstream_url(backend.url or "", path)
            return await self._attempt(exchange, backend, backend.name, url, body, headers, timeout, injected)
        tried: set[str] = set()
        key: bytes | None = None  # the prompt's prefix, read only where there is a choice
        for _ in range(MAX_ENDPOINT_TRIES):
            now = self.state.clock()
            candidates = self.state.usable_endpoints(backend, now, excluding=tried)
            if key is None and len(candidates) > 1:
                key = parsed.affinity_key(AFFINITY_PREFIX)
            endpoint = choose(candidates, self.state.in_flight, key=key or None, turn=self.state.next_turn())
            if endpoint is None:
                return False
            tried.add(endpoint)
            if not self.state.quarantine.acquire(endpoint, now):
                continue
            if await self._attempt(
                exchange, backend, endpoint, f"http://{endpoint}{path}", body, headers, timeout, injected
            ):
                return True
        return False

    async def _send(
        self, backend: Backend, url: str, body: bytes, headers: Headers, wait: float
    ) -> Answer | Failure:
        try:
            async with asyncio.timeout(wait):
                return await self.upstreams.send(url, "POST", headers, body, external=backend.external)
        except TimeoutError:
            return Failure("timeout", f"no answer within {wait:g}s")
        except (EgressRefused, InvalidHeader) as refused:
            return Failure("refused", str(refused))
        except ConnectFailed as error:
            # A new connection that could not be made: the endpoint's own verdict.
            return Failure("connect", str(error))
        except ConnectionBroken as error:  # on a new connection, or a reused one's second try
            return Failure("disconnected", str(error))
        except OSError as error:  # the name did not resolve
            return Failure("connect", str(error) or type(error).__name__)

    async def _send_to_pod(
        self,
        exchange: Exchange,
        backend: Backend,
        target: str,
        url: str,
        body: bytes,
        headers: Headers,
        wait: float,
    ) -> tuple[Answer | Failure, str]:
        """The request to the pod at `target`, and the pod that answers it: when `target` leaves its
        Service's ready endpoints (its pod is being deleted) before the answer's head, the same
        request goes to another ready pod alongside, the first answer is used and the other dropped.

        Why both: without the drain annotation llama-server, on SIGTERM, stops generating but holds
        the connections of the requests it had until the kubelet kills it (the grace period, 30 s by
        default), so waiting for it costs that long; with the annotation it finishes them, and
        dropping its work would cost a second generation's time. From here both are an endpoint
        that is no longer ready."""
        state = self.state
        if len(state.endpoints_of(backend)) < 2:  # no other pod to go to (and no task to make)
            return await self._send(backend, url, body, headers, wait), target
        loop = asyncio.get_running_loop()
        first = loop.create_task(self._send(backend, url, body, headers, wait))
        leaving = state.leaving(target)
        second: asyncio.Task[Answer | Failure] | None = None
        other = ""
        won: asyncio.Task[Answer | Failure] | None = None  # None: the client left, both are dropped
        try:
            # One future wakes this request for either event (its answer's head, its pod leaving):
            # a callback costs a third of what asyncio.wait does, on every request to such a backend.
            first.add_done_callback(functools.partial(_resolve, leaving))
            await leaving
            if not first.done():
                now = state.clock()
                others = state.usable_endpoints(backend, now, excluding=(target,))
                chosen = choose(others, state.in_flight, key=None, turn=state.next_turn())
                if chosen is not None and state.quarantine.acquire(chosen, now):
                    other = chosen
                    state.request_began(other)
                    exchange.record.tried.append(backend.name)
                    log.info(
                        "pod left before answering: the request goes to another pod too",
                        request_id=exchange.record.request_id,
                        backend=backend.name,
                        endpoint=target,
                        also=other,
                    )
                    path = exchange.request.path
                    second = loop.create_task(
                        self._send(backend, f"http://{other}{path}", body, headers, wait)
                    )
            if second is not None:
                won = await _first_answer(first, second)
            else:
                await first
                won = first
            return won.result(), target if won is first else other
        finally:
            state.stay(target, leaving)
            for task in (first, second):
                if task is not None and task is not won:
                    _drop(task)
            if second is not None:
                # The caller settles the pod that answered (its count, its verdict), or `target`
                # when none did: the other one is settled here.
                settled = target if won is second else other
                state.request_ended(settled)
                state.quarantine.abandoned(settled, state.clock())

    async def _attempt(
        self,
        exchange: Exchange,
        backend: Backend,
        target: str,
        url: str,
        body: bytes,
        headers: Headers,
        wait: float,
        injected: bool,
    ) -> bool:
        state = self.state
        record = exchange.record
        record.tried.append(backend.name)
        state.request_began(target)
        upstream: Answer | None = None
        verdict: bool | None = None
        exchange.attempting = backend
        try:
            if backend.external:
                sent = await self._send(backend, url, body, headers, wait)
            else:
                sent, target = await self._send_to_pod(exchange, backend, target, url, body, headers, wait)
            if isinstance(sent, Failure):
                verdict = False
                self._failed(exchange, backend, target, sent)
                return False
            upstream = sent
            if upstream.status >= 500:
                verdict = False
                detail = f"{upstream.status} {upstream.reason}".strip()
                self._failed(exchange, backend, target, Failure("5xx", detail))
                return False
            verdict = True
            state.record_latency(backend.name, time.perf_counter() - exchange.started)
            record.backend, record.endpoint = backend.name, target if not backend.external else backend.url
            record.upstream_model = backend.model if backend.external else None
            try:
                await self._relay(exchange, backend, upstream, injected)
                return True
            except UpstreamReset as reset:
                verdict = False
                self._failed(exchange, backend, target, Failure("reset", reset.detail))
                if not exchange.responder.started:
                    record.backend = record.endpoint = record.upstream_model = None
                    return False  # the client has not had a byte yet: the next attempt may serve it
                # Part of the answer reached the client: cut the connection, so it sees a broken stream.
                exchange.responder.abort()
                record.outcome = "upstream_reset"
                self._finish(exchange)
                return True
        finally:
            if exchange.attempting is backend and exchange.follower is None:
                exchange.attempting = None
            state.request_ended(target)
            now = state.clock()
            if verdict is True:
                state.quarantine.succeeded(target, now)
            elif verdict is None:
                state.quarantine.abandoned(target, now)
            if upstream is not None:
                upstream.close()

    def _failed(self, exchange: Exchange, backend: Backend, target: str, failure: Failure) -> None:
        self.state.quarantine.failed(target, self.state.clock())
        self.metrics.failed(backend.name, failure.reason)
        # The client reads the backend's name and what happened, never a pod's address or what the
        # connection's error said of it (the log below has both).
        exchange.failures.append((failure.reason, f"{backend.name}: {_client_detail(failure)}"))
        log.info(
            "attempt failed",
            request_id=exchange.record.request_id,
            backend=backend.name,
            endpoint=target,
            reason=failure.reason,
            detail=failure.detail,
        )

    def _response_headers(self, exchange: Exchange, backend: Backend, upstream: Answer) -> Headers:
        headers = [(name, value) for name, value in upstream.headers if name.lower() not in _NOT_RETURNED]
        headers.append(("X-Request-Id", exchange.record.request_id))
        headers.append(("X-Llmkube-Backend", backend.name))
        headers.append(("X-Llmkube-Rule", exchange.record.rule or ""))
        return headers

    async def _relay(self, exchange: Exchange, backend: Backend, upstream: Answer, injected: bool) -> None:
        record = exchange.record
        parsed = exchange.parsed
        assert parsed is not None
        headers = self._response_headers(exchange, backend, upstream)
        record.status = upstream.status
        usage: Usage | None
        if upstream.content_type == "text/event-stream":
            follower = exchange.follower = StreamUsage(strip_injected=injected)
            await StreamRelay(exchange, upstream, headers, follower).run()
            usage = follower.usage or estimate(len(parsed.prompt_text()), follower.content_events)
        else:
            try:
                body = await upstream.read()
            except AnswerSilent:
                raise UpstreamReset("the answer went silent") from None
            except AnswerBroken as error:
                raise UpstreamReset(str(error)) from None
            usage = usage_of_body(body) if upstream.status < 300 else None
            if usage is None and upstream.status < 300:
                usage = estimate(len(parsed.prompt_text()), len(body) // 16)
            exchange.first_byte = time.perf_counter() - exchange.started
            exchange.responder.respond(upstream.status, headers, body)
        record.outcome = "ok" if upstream.status < 400 else "upstream_refused"
        self._account(exchange, backend, usage)
        self._finish(exchange)

    def _account(self, exchange: Exchange, backend: Backend | None, usage: Usage | None) -> None:
        """What the request used: in its audit line and metrics, and settled against its budgets."""
        if usage is None:
            return
        usd = usage.cost(backend.prompt_usd, backend.completion_usd) if backend is not None else 0.0
        exchange.record.usage, exchange.record.cost_usd = usage, usd
        if backend is not None:
            self.metrics.used(backend.name, usage.prompt, usage.completion, usd)
        self._settle(exchange, usage.total, usd)

    # -- shadows --------------------------------------------------------------------------------

    def _start_shadow(self, exchange: Exchange, backend: Backend) -> None:
        if len(self._shadows) >= MAX_SHADOWS:
            self.metrics.shadow(backend.name, "dropped")
            return
        exchange.record.shadows = [*exchange.record.shadows, backend.name]
        task = asyncio.get_running_loop().create_task(self._shadow(exchange, backend))
        self._shadows.add(task)
        task.add_done_callback(self._shadows.discard)

    async def _shadow(self, exchange: Exchange, backend: Backend) -> None:
        """A copy of the request; its answer is read and discarded (its tokens count)."""
        config, parsed = exchange.config, exchange.parsed
        assert config is not None and parsed is not None
        state = self.state
        body, _ = upstream_body(parsed, exchange.raw, model=backend.model if backend.external else None)
        headers = self._upstream_headers(exchange, backend, config)
        timeout = header_timeout(
            exchange.decision.rule if exchange.decision else None, backend, config.header_timeout
        )
        if backend.external:
            target, url = backend.name, upstream_url(backend.url or "", exchange.request.path)
        else:
            now = state.clock()
            candidates = state.usable_endpoints(backend, now)
            chosen = choose(candidates, state.in_flight, key=None, turn=state.next_turn())
            if chosen is None:
                self.metrics.shadow(backend.name, "failed")
                return
            target, url = chosen, f"http://{chosen}{exchange.request.path}"
        state.request_began(target)
        try:
            sent = await self._send(backend, url, body, headers, timeout)
            if isinstance(sent, Failure) or sent.status >= 500:
                self.metrics.shadow(backend.name, "failed")
                if not isinstance(sent, Failure):
                    sent.close()
                return
            try:
                discarded = Discard(sent.loop, stream=sent.content_type == "text/event-stream")
                sent.stream(discarded)
                await discarded.done
                follower = discarded.follower
                usage = (
                    follower.usage
                    or discarded.usage
                    or estimate(len(parsed.prompt_text()), follower.content_events or discarded.size // 16)
                )
                self.metrics.shadow(backend.name, "ok")
                usd = usage.cost(backend.prompt_usd, backend.completion_usd)
                self.metrics.used(backend.name, usage.prompt, usage.completion, usd)
                state.budgets.record(exchange.applicable, usage.total, usd, state.clock())
            except AnswerBroken:
                self.metrics.shadow(backend.name, "failed")
            finally:
                sent.close()
        finally:
            state.request_ended(target)

    async def stop_shadows(self) -> None:
        for task in list(self._shadows):
            task.cancel()
        await asyncio.gather(*self._shadows, return_exceptions=True)

    # -- /v1/models ----------------------------------------------------------------------------

    def _models(self, request: Request, responder: Responder) -> None:
        config = self.state.config
        exchange = self._exchange(request, responder)
        if config is None:
            self._refuse(exchange, self._no_spec())
            return
        if config.api_keys_secret:
            refused = self._authenticate(exchange, config.api_keys_secret)
            if refused is not None:
                self._refuse(exchange, refused)
                return
        data = [
            {"id": model, "object": "model", "created": 0, "owned_by": owner}
            for model, owner in self.models(config)
        ]
        responder.respond(200, _JSON, orjson.dumps({"object": "list", "data": data}))

    @staticmethod
    def models(config: RouterConfig) -> Iterable[tuple[str, str]]:
        """The model names a client can send: each literal of a rule's `models` (owned by the rule's
        first backend), then the defaultRoute's backend, which takes any other name."""
        seen: dict[str, str] = {}
        for rule in config.rules:
            for glob in rule.models:
                if glob.literal and rule.backends:
                    seen.setdefault(glob.pattern, rule.backends[0])
        if config.default_route:
            seen.setdefault(config.default_route, config.default_route)
        return list(seen.items())


#: what a client is told of a failed attempt, by reason (the detail can name addresses: it is logged)
_CLIENT_DETAILS = {
    "connect": "could not connect",
    "disconnected": "the connection closed before the answer",
    "refused": "refused by the router's egress rules (no loopback, link-local, metadata or API server "
    "address)",
    "reset": "the answer broke off",
}


def _client_detail(failure: Failure) -> str:
    if failure.reason in ("5xx", "timeout"):
        return failure.detail  # a status line, or how long it waited
    return _CLIENT_DETAILS.get(failure.reason, failure.reason)


_TEXT = (("Content-Type", "text/plain; charset=utf-8"),)
_JSON = (("Content-Type", "application/json"),)
_METRICS = (("Content-Type", "text/plain; version=0.0.4; charset=utf-8"),)


async def _first_answer(
    first: asyncio.Task[Answer | Failure], second: asyncio.Task[Answer | Failure]
) -> asyncio.Task[Answer | Failure]:
    """The first of two sends to bring an answer that is not a 5xx (the first one when neither does)."""
    pending: set[asyncio.Task[Answer | Failure]] = {first, second}
    while pending:
        done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        for task in sorted(done, key=lambda t: t is not first):
            result = task.result()
            if isinstance(result, Answer) and result.status < 500:
                return task
    return first


def _resolve(future: asyncio.Future[None], _: object) -> None:
    if not future.done():
        future.set_result(None)


def _drop(task: asyncio.Task[Answer | Failure]) -> None:
    """A send whose answer is not wanted: cancelled (its connection aborted), or its answer closed."""
    if not task.done():
        task.cancel()
        return
    if not task.cancelled() and task.exception() is None:
        result = task.result()
        if isinstance(result, Answer):
            result.close()
