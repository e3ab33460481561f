"""The router's handler of every request the HTTP server reads: the pages (`/healthz`, `/readyz`,
`/metrics`, `/v1/models`) and the routed requests, each through its three looks of admission
(llmkube.plan.router.admission: the head, the body, the parsed request), then its delivery
(llmkube.router.delivery), then its outcome (llmkube.plan.router.outcome): made once it is over,
whatever the client did, and performed here, once: the metrics, the budget reservation settled to
what it used, the audit line, the router's own answer when it gives one.

What this layer does itself is I/O: it reads the client keys' files, the body, runs the detector off
the event loop for a large body, and holds what admission said to hold (the body budget's bytes,
the budget reservation, the rate token, the weighted rule's draw) until the request is over."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import orjson
import structlog

from llmkube.kube.blocking import run_in_daemon_thread
from llmkube.plan.router import (
    DEFAULT_MAX_BODY_BYTES,
    FAILED,
    GONE,
    NO_FACTS,
    NO_RESERVATION,
    PATHS,
    Admission,
    ApiKey,
    Detection,
    Endpoint,
    Facts,
    Outcome,
    ParsedRequest,
    RateLimits,
    Refusal,
    Refused,
    Reservation,
    RouterConfig,
    Ticket,
    abandoned,
    admit,
    admit_body,
    admit_head,
    detect,
    errors,
    outcome_of,
    presented_key,
    reads_body,
    refused,
    request_id,
    served_models,
)
from llmkube.router.audit import AuditSink
from llmkube.router.delivery import Delivery
from llmkube.router.http import BodyError, ByteBudget, Limits, Request, Responder
from llmkube.router.metrics import RouterMetrics
from llmkube.router.relay import ClientGone
from llmkube.router.secrets import ApiKeys, SecretFiles
from llmkube.router.sending import Outgoing, Sender
from llmkube.router.shadows import Shadows
from llmkube.router.state import RouterState
from llmkube.router.trace import Trace
from llmkube.router.upstream import Upstreams
from llmkube.router.waking import Waker

__all__ = ["DETECT_OFF_LOOP_BYTES", "Proxy"]

log = structlog.get_logger("llmkube.router.proxy")

#: bodies larger than this are read by the detector off the event loop
DETECT_OFF_LOOP_BYTES = 256 << 10

_TEXT = (("Content-Type", "text/plain; charset=utf-8"),)
_JSON = (("Content-Type", "application/json"),)
_METRICS = (("Content-Type", "text/plain; version=0.0.4; charset=utf-8"),)


class _InFlight:
    """What the router holds for one request until it is over, and how far admission got."""

    __slots__ = ("admission", "facts", "holds", "reservation", "started", "ticket", "trace")

    def __init__(self, ticket: Ticket) -> None:
        self.ticket = ticket
        self.started = time.perf_counter()
        self.trace = Trace(self.started)
        #: what the audit line says of it before it is admitted (its key, then its body's model)
        self.facts = NO_FACTS
        self.admission: Admission | None = None
        #: bytes of the body budget: its body's parsing and copy
        self.holds = 0
        self.reservation: Reservation = NO_RESERVATION


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
        waker: Waker | None = None,
        wake_timeout: float = 0.0,
    ) -> None:
        self.state = state
        self.upstreams = upstreams
        self.metrics = metrics
        self.audit = audit
        self.api_keys_root = api_keys_root
        self.ready = ready
        self.metrics_page = metrics_page
        #: the most a request waits for a backend's first ready endpoint (llmkube.plan.router.hold)
        self.endpoint_wait = endpoint_wait
        #: the most a request waits for a sleeping backend to wake (llmkube.plan.router.wake)
        self.wake_timeout = wake_timeout
        self._api_keys: dict[str, ApiKeys] = {}
        #: what bodies in flight hold, shared with the HTTP server (which counts them as they come)
        self.bodies = bodies or ByteBudget(Limits().body_budget)
        self.rates = RateLimits()
        sender = Sender(state, upstreams, credentials=credentials, server_keys=server_keys)
        self.shadows = Shadows(sender, metrics)
        self.delivery = Delivery(sender, self.shadows, metrics, waker)
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

    async def stop_shadows(self) -> None:
        await self.shadows.stop()

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

    def _ticket(self, request: Request) -> Ticket:
        config = self.state.config
        return Ticket(
            self.state.name,
            self.state.namespace,
            request_id(request.header("x-request-id"), lambda: os.urandom(8).hex()),
            request.path,
            include_body=config is not None and config.audit.include_body,
        )

    def _unrouted(self, request: Request, responder: Responder, answer: Refused) -> None:
        self._finish(_InFlight(self._ticket(request)), responder, Refusal(answer))

    def _models(self, request: Request, responder: Responder) -> None:
        config = self.state.config
        if config is None:
            self._unrouted(request, responder, self._no_spec())
            return
        if config.api_keys_secret:
            caller = self._caller(request, config)
            if isinstance(caller, Refusal):
                self._finish(_InFlight(self._ticket(request)), responder, caller)
                return
        data = [
            {"id": model, "object": "model", "created": 0, "owned_by": owner}
            for model, owner in served_models(config)
        ]
        responder.respond(200, _JSON, orjson.dumps({"object": "list", "data": data}))

    # -- a routed request -----------------------------------------------------------------------

    async def _serve(self, request: Request, responder: Responder, endpoint: Endpoint) -> None:
        flight = _InFlight(self._ticket(request))
        self.in_flight += 1
        self.idle.clear()
        try:
            end = await self._route(request, responder, endpoint, flight)
        except asyncio.CancelledError:
            self._finish(flight, responder, GONE)
            raise
        except ClientGone:
            self._finish(flight, responder, GONE)
            responder.abort()  # nothing more goes out on it
        except Exception as error:  # a defect: the client gets a 500 in OpenAI's shape, never a traceback
            log.exception("request failed", request_id=flight.ticket.request_id, error=str(error))
            if responder.started:
                responder.abort()
            self._finish(flight, responder, FAILED)
        else:
            self._finish(flight, responder, end)
        finally:
            self.bodies.give(flight.holds)
            self.in_flight -= 1
            if self.in_flight == 0:
                self.idle.set()

    async def _route(
        self, request: Request, responder: Responder, endpoint: Endpoint, flight: _InFlight
    ) -> Refusal | str:
        """The request admitted and delivered: how it ended, or why it was refused."""
        config = self.state.config
        if config is None:
            return Refusal(self._no_spec())
        key: ApiKey | None = None
        if config.api_keys_secret:
            caller = self._caller(request, config)
            if isinstance(caller, Refusal):
                return caller
            key = caller
            flight.facts = Facts(client=key.name)
        # Read only now: a client without its key never made the router read its body.
        try:
            raw = await request.read_body()
        except BodyError as broken:
            return Refusal(errors.unreadable(broken.status, str(broken), broken.retry_after), flight.facts)
        body = admit_body(
            raw, endpoint, limit=config.max_body_bytes, budget=self.bodies.total, free=self.bodies.free
        )
        if isinstance(body, Refused):
            return Refusal(body, flight.facts)
        self.bodies.take(body.holds)  # it fits: admission counted what is free
        flight.holds = body.holds
        parsed, headers = body.parsed, request.lower_headers
        found = None
        if reads_body(config, headers):
            audited = parsed.body if config.audit.include_body else None
            flight.facts = Facts(key.name if key else None, parsed.model, parsed.stream, audited)
            found = await self._detect(parsed, len(body.raw))
        admitted = admit(
            config,
            parsed,
            headers,
            self.state,
            self.state.clock(),
            key=key,
            found=found,
            wait_limit=self.endpoint_wait,
            wake_limit=self.wake_timeout,
        )
        if isinstance(admitted, Refusal):
            return admitted
        flight.admission = admitted
        hold = admitted.hold
        if hold is not None:
            flight.reservation = self.state.budgets.hold(hold.applicable, hold.tokens, hold.usd)
        if admitted.draw is not None:
            self.state.keep_draw(admitted.decision.rule_name, admitted.draw)
        outgoing = Outgoing(
            request.path, request.headers, flight.ticket.request_id, body.raw, config.classification.header
        )
        return await self.delivery.deliver(admitted, outgoing, responder, flight.trace)

    def _caller(self, request: Request, config: RouterConfig) -> Refusal | ApiKey:
        """The client key a request presents, with keys on (its rate taken), or why it is refused."""
        secret = config.api_keys_secret
        assert secret is not None
        presented = presented_key(request.lower_headers)
        keys = self._api_keys.get(secret)
        if keys is None:
            keys = self._api_keys[secret] = ApiKeys(self.api_keys_root / secret)
        client = keys.client(presented) if presented else None
        now = self.state.clock()
        caller = admit_head(config, presented, client, self.rates, now)
        if isinstance(caller, Refused):
            return Refusal(caller, Facts(client=client))
        if caller.rate is not None:
            self.rates.take(caller.key.name, caller.rate, now)
        return caller.key

    def _no_spec(self) -> Refused:
        loaded = self.state.loaded
        invalid = None
        if loaded is not None and loaded.refused:
            invalid = [issue.text() for issue in loaded.issues if issue.severity == "error"]
        return errors.no_spec(self.state.name, deleted=self.state.deleted, invalid=invalid)

    @staticmethod
    async def _detect(parsed: ParsedRequest, size: int) -> Detection:
        if size > DETECT_OFF_LOOP_BYTES:
            return await run_in_daemon_thread(detect, parsed.body)
        return detect(parsed.body)

    # -- the end of a request -------------------------------------------------------------------

    def _finish(self, flight: _InFlight, responder: Responder, end: Refusal | str) -> None:
        """What became of the request, performed once: its metrics, its budgets settled, its audit
        line, and the router's answer when it gives one."""
        latency = time.perf_counter() - flight.started
        at = datetime.now(UTC)
        ticket, admission = flight.ticket, flight.admission
        done: Outcome
        if isinstance(end, Refusal):
            done = refused(ticket, end, latency=latency, at=at)
        elif admission is not None:
            done = outcome_of(
                ticket,
                admission,
                flight.trace.observed(end, started=responder.started),
                latency=latency,
                at=at,
            )
        elif end == GONE:
            done = abandoned(ticket, flight.facts, latency=latency, at=at)
        else:  # a defect before it was admitted
            done = refused(ticket, Refusal(errors.internal_error(), flight.facts), latency=latency, at=at)
        metrics = self.metrics
        answer = done.answer
        if answer is not None:
            metrics.refusal(done.outcome)
        metrics.answered(done.rule, done.backend, done.status, latency, flight.trace.first_byte)
        usage, charged = done.usage, done.charged
        if usage is not None and charged is not None:
            metrics.used(charged.name, usage.prompt, usage.completion, done.cost)
        reservation, flight.reservation = flight.reservation, NO_RESERVATION
        if reservation is not NO_RESERVATION:
            tokens = usage.total if usage is not None else 0
            self.state.budgets.settle(reservation, tokens, done.cost, self.state.clock())
        self.audit.write(done.line)
        if answer is not None:
            if answer.close:
                responder.close_after = True
            headers = answer.headers()
            headers["X-Request-Id"] = ticket.request_id
            responder.respond(answer.status, headers.items(), answer.body())
