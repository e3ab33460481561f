"""What became of a request, once it is over: its status, the tokens it is charged and their cost,
its audit line, and the router's own answer when it gives one. Made once, from what admission
decided and what delivery saw (`Observed`: which backends were tried, what failed, who answered,
how it ended), so a request's facts are never written along the way.

How it ended decides the rest:

* `ANSWERED`: a backend's answer went to the client. Its tokens are the backend's `usage` (a whole
  answer's, read alone from its body; a stream's final usage chunk), else estimated: four
  characters of prompt a token, and a token per event of a stream or per 16 bytes of an answer.
  A whole answer that is not a 2xx is charged nothing.
* `RESET`: the backend's answer broke after the client had bytes of it; the client's connection
  was cut (it sees a broken stream, not a short one). Nothing is charged.
* `GONE`: the client left. It is charged what it was sent: the backend's usage when it came, else
  its prompt and a token per event of a stream; while the backend delivery names as `working`
  (llmkube.router.delivery: the one making or sending its answer when it left) had a whole answer
  in hand, what it was admitted for (how far the backend got before it was let go is not known);
  with no backend working on it (before the first attempt, between two), nothing.
* `UNSERVED`: no attempt served it: 502 naming each backend and what happened to it (504 when they
  all timed out), or 503 when nothing could be tried (fail-closed for a sensitive request or rule).
* `FAILED`: a defect of the router: a 500 in OpenAI's shape when the client had nothing yet, else
  its connection cut.

The client is told backends' names and what happened, never a pod's address nor what a
connection's error said of it (the audit line and the log have those)."""

from collections.abc import Sequence
from datetime import datetime

from llmkube.plan.router import errors
from llmkube.plan.router.admission import Admission, Facts, Refusal
from llmkube.plan.router.audit import AuditRecord, audit_line
from llmkube.plan.router.budgets import reservation_estimate
from llmkube.plan.router.config import Backend
from llmkube.plan.router.errors import Refused
from llmkube.plan.router.requests import NOT_GENERATING
from llmkube.plan.router.usage import Usage, delivered, estimate, usage_of_body
from llmkube.plan.router.value import value

ANSWERED = "answered"
RESET = "reset"
GONE = "gone"
UNSERVED = "unserved"
FAILED = "failed"


@value
class Ticket:
    """A request as it came in: what its audit line says whatever becomes of it."""

    router: str
    namespace: str
    request_id: str
    path: str
    #: the audit line carries the body (`auditLog.includeRequestBody`)
    include_body: bool = False


@value
class Failed:
    """An attempt that failed before the client had a byte of its answer."""

    backend: str
    #: connect, refused, timeout, 5xx, disconnected, reset
    reason: str
    #: what happened: a status line or a wait for a client; else the connection's error (logged only)
    detail: str


@value
class Answered:
    """The answer that went (or was going) to the client."""

    backend: Backend
    #: the pod (host:port) or the external URL
    endpoint: str | None
    status: int


@value
class Observed:
    """What delivery saw of an admitted request."""

    end: str
    #: the backend of each attempt, in order (twice when a pod that left was raced by another)
    tried: Sequence[str] = ()
    failures: Sequence[Failed] = ()
    answered: Answered | None = None
    #: the backend working on it when it ended (llmkube.router.delivery: the one making or sending
    #: its answer when the client left); a client leaving then is charged for that answer
    working: Backend | None = None
    #: a whole answer's body (None: a stream, or no answer)
    body: bytes | None = None
    #: a stream's usage chunk, and the events of content it relayed (None: not a stream)
    streamed: Usage | None = None
    events: int | None = None
    #: the client had a byte of an answer
    started: bool = False
    #: seconds from arrival to the answer's first byte sent, and waited for an endpoint
    first_byte: float | None = None
    waited: float | None = None
    shadows: Sequence[str] = ()


@value
class Outcome:
    status: int
    outcome: str
    #: the labels of the request's metrics (backend "": the router answered)
    rule: str
    backend: str
    usage: Usage | None
    cost: float
    #: the backend whose tokens they are (None: none)
    charged: Backend | None
    #: the router's own answer, still to send (None: a backend's went, or nothing can go)
    answer: Refused | None
    line: bytes


def refused(ticket: Ticket, refusal: Refusal, *, latency: float, at: datetime) -> Outcome:
    """A request turned away before it was admitted (the router's answer goes out)."""
    answer = refusal.answer
    return _unadmitted(ticket, refusal.facts, answer.status, answer.outcome, answer, latency, at)


def abandoned(ticket: Ticket, facts: Facts, *, latency: float, at: datetime) -> Outcome:
    """A request whose client left before it was admitted (while its body came, or was read)."""
    return _unadmitted(ticket, facts, 499, "client_gone", None, latency, at)


def _unadmitted(
    ticket: Ticket,
    facts: Facts,
    status: int,
    label: str,
    answer: Refused | None,
    latency: float,
    at: datetime,
) -> Outcome:
    record = AuditRecord(
        ticket.router,
        ticket.namespace,
        ticket.request_id,
        ticket.path,
        model=facts.model,
        rule=facts.rule,
        status=status,
        outcome=label,
        stream=facts.stream,
        classification=facts.classification,
        detected=facts.detected,
        team=facts.team,
        client=facts.client,
        latency_ms=latency * 1000,
        budget=facts.budget,
        body=facts.body,
    )
    line = audit_line(record, at, include_body=ticket.include_body)
    return Outcome(status, label, facts.rule or "none", "", None, 0.0, None, answer, line)


def outcome_of(
    ticket: Ticket, admission: Admission, seen: Observed, *, latency: float, at: datetime
) -> Outcome:
    """An admitted request, from what delivery saw of it."""
    answered = seen.answered if seen.end != UNSERVED else None
    answer: Refused | None = None
    usage: Usage | None = None
    charged: Backend | None = None
    if seen.end == UNSERVED:
        answer = nothing_served(admission, seen.failures)
        status, label = answer.status, answer.outcome
    elif seen.end == GONE:
        status, label = 499, "client_gone"
        charged = seen.working
        usage = _left(admission, seen)
    elif seen.end == FAILED:
        status, label = 500, "internal_error"
        if not seen.started:
            answer = errors.internal_error()
    else:
        assert answered is not None
        status = answered.status
        if seen.end == RESET:
            label = "upstream_reset"
        else:
            label = "ok" if status < 400 else "upstream_refused"
            charged = answered.backend
            usage = _used(admission, seen, status)
    cost = usage.cost(charged.prompt_usd, charged.completion_usd) if usage is not None and charged else 0.0
    facts = admission.facts
    backend = answered.backend if answered is not None else None
    record = AuditRecord(
        ticket.router,
        ticket.namespace,
        ticket.request_id,
        ticket.path,
        model=facts.model,
        rule=facts.rule,
        backend=backend.name if backend is not None else None,
        endpoint=answered.endpoint if answered is not None else None,
        upstream_model=backend.model if backend is not None and backend.external else None,
        status=status,
        outcome=label,
        stream=facts.stream,
        classification=facts.classification,
        detected=facts.detected,
        team=facts.team,
        client=facts.client,
        usage=usage,
        cost_usd=cost if usage is not None else None,
        latency_ms=latency * 1000,
        ttft_ms=seen.first_byte * 1000 if seen.first_byte is not None else None,
        tried=seen.tried,
        shadows=seen.shadows,
        waited_ms=seen.waited * 1000 if seen.waited is not None else None,
        body=facts.body,
    )
    line = audit_line(record, at, include_body=ticket.include_body)
    name = backend.name if backend is not None else ""
    return Outcome(status, label, facts.rule or "none", name, usage, cost, charged, answer, line)


def _used(admission: Admission, seen: Observed, status: int) -> Usage | None:
    """What an answer that went to the client used: reported, else estimated."""
    if seen.events is not None:  # a stream
        if seen.streamed is not None:
            return seen.streamed
        return estimate(len(admission.parsed.prompt_text()), seen.events)
    if status >= 300:
        return None
    body = seen.body or b""
    return usage_of_body(body) or estimate(len(admission.parsed.prompt_text()), len(body) // 16)


def _left(admission: Admission, seen: Observed) -> Usage | None:
    """What a request whose client left is charged (usage.delivered)."""
    parsed = admission.parsed
    prompt = len(parsed.prompt_text())
    reserved = None
    if seen.working is not None:
        hold = admission.hold
        reserved = (hold.tokens if hold is not None else 0) or reservation_estimate(
            prompt, parsed.max_tokens, answers=parsed.endpoint not in NOT_GENERATING
        )
    return delivered(seen.streamed, prompt, seen.events, reserved=reserved)


#: what a client is told of a failed attempt, by reason (the detail can name addresses: it is logged)
_CLIENT_DETAILS = {
    "connect": "could not connect",
    "disconnected": "the connection closed before the answer",
    "refused": "refused by the router's egress rules (no loopback, link-local, metadata or API server "
    "address)",
    "reset": "the answer broke off",
}


def client_detail(failure: Failed) -> str:
    """What the client is told of a failed attempt: a status line or how long it waited, else what
    kind of failure it was."""
    if failure.reason in ("5xx", "timeout"):
        return failure.detail
    return _CLIENT_DETAILS.get(failure.reason, failure.reason)


def nothing_served(admission: Admission, failures: Sequence[Failed]) -> Refused:
    """The answer to a request no attempt served."""
    decision, config = admission.decision, admission.config
    tried = "; ".join(f"{failure.backend}: {client_detail(failure)}" for failure in failures)
    if decision.fail_closed or admission.sensitive:
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
    timeouts = all(failure.reason == "timeout" for failure in failures)
    return Refused(
        504 if timeouts else 502,
        f"Every backend failed: {tried}.",
        errors.SERVER,
        "upstream_timeout" if timeouts else "upstream_failed",
        outcome="upstream_failed",
    )
