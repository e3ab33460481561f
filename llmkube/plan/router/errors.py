"""The answers the router gives itself, in OpenAI's error shape (`{"error": {"message", "type",
"param", "code"}}`: what every OpenAI client library parses into its exceptions), one builder per
reason. The router never answers with a traceback, and a message names backends and rules, never a
pod's address (the log and the audit line have those)."""

from collections.abc import Sequence
from dataclasses import dataclass

import orjson

INVALID_REQUEST = "invalid_request_error"
AUTHENTICATION = "authentication_error"
RATE_LIMIT = "rate_limit_error"
PERMISSION = "permission_error"
SERVER = "server_error"
UNAVAILABLE = "service_unavailable"


@dataclass(frozen=True, slots=True)
class Refused:
    """A request answered by the router itself."""

    status: int
    message: str
    type: str = INVALID_REQUEST
    code: str | None = None
    param: str | None = None
    #: seconds, for 429 (Retry-After) and 503
    retry_after: float | None = None
    #: the audit line's outcome (and the reason of `llmkube_router_refused_requests_total`)
    outcome: str = "refused"
    #: the connection closes after the answer: what the client sends next is the rest of a body
    #: the router did not read
    close: bool = False

    def body(self) -> bytes:
        error = {"message": self.message, "type": self.type, "param": self.param, "code": self.code}
        return orjson.dumps({"error": error})

    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.retry_after is not None:
            headers["Retry-After"] = str(max(1, int(self.retry_after + 0.999)))
        if self.status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="llmkube-router"'
        return headers


def for_http(status: int, message: str) -> Refused:
    """What the HTTP server answers by itself (a malformed request, a head too large)."""
    return Refused(status, message, SERVER if status >= 500 else INVALID_REQUEST, "invalid_http")


def not_found(path: str) -> Refused:
    return Refused(
        404,
        f"Unknown request URL: {path}. The router serves POST /v1/chat/completions, "
        "/v1/completions, /v1/embeddings, /v1/rerank and GET /v1/models.",
        code="unknown_url",
        outcome="unknown_url",
    )


def method_not_allowed(method: str, path: str, allowed: str) -> Refused:
    return Refused(
        405,
        f"{method} is not allowed on {path}; use {allowed}.",
        code="method_not_allowed",
        outcome="method_not_allowed",
    )


def no_spec(router: str, *, deleted: bool, invalid: Sequence[str] | None) -> Refused:
    """No spec to route by: the ModelRouter is gone, its spec was refused (`invalid`: the errors),
    or none was loaded yet."""
    if deleted:
        message = f'ModelRouter "{router}" was deleted.'
    elif invalid is not None:
        message = f'The spec of ModelRouter "{router}" is invalid: {"; ".join(invalid)}'
    else:
        message = f'ModelRouter "{router}" is not loaded yet.'
    return Refused(503, message, UNAVAILABLE, "router_not_ready", retry_after=1, outcome="no_spec")


def unauthorized(presented: bool) -> Refused:
    return Refused(
        401,
        "Incorrect API key provided." if presented else "Missing API key: send Authorization: Bearer <key>.",
        AUTHENTICATION,
        "invalid_api_key",
        outcome="unauthorized",
    )


def over_rate(client: str, per_minute: int, wait: float) -> Refused:
    return Refused(
        429,
        f'The API key "{client}" is over its rate of {per_minute} requests a minute.',
        RATE_LIMIT,
        "rate_limit_exceeded",
        retry_after=wait,
        outcome="rate_limited",
    )


def unreadable(status: int, message: str, retry_after: float | None) -> Refused:
    """The body could not be had: broken off or malformed (400), or no room for it now (503)."""
    busy = status == 503
    return Refused(
        status,
        message,
        UNAVAILABLE if busy else INVALID_REQUEST,
        "server_busy" if busy else "invalid_http",
        retry_after=retry_after,
        outcome="busy" if busy else "bad_request",
    )


def too_large(limit: int) -> Refused:
    return Refused(
        413,
        f"The request body is larger than this router takes: {limit} bytes.",
        code="request_too_large",
        outcome="too_large",
        close=True,
    )


def busy() -> Refused:
    return Refused(
        503,
        "The router is holding as many request bodies as it can: retry shortly.",
        UNAVAILABLE,
        "server_busy",
        retry_after=1,
        outcome="busy",
    )


def wake_queue_full(backend: str) -> Refused:
    """A request for a sleeping backend whose wake queue is full (plan/router/wake.py)."""
    return Refused(
        503,
        f'Backend "{backend}" is waking from zero and as many requests as the router holds are waiting '
        "for it: retry shortly.",
        UNAVAILABLE,
        "waking",
        retry_after=5,
        outcome="wake_queue_full",
    )


def no_route(router: str, model: str) -> Refused:
    return Refused(
        503,
        f'No rule of router "{router}" matches this request (model "{model}"), and it has no defaultRoute.',
        UNAVAILABLE,
        "no_route",
        outcome="no_route",
    )


def rule_not_allowed(key: str, rule: str, allowed: Sequence[str]) -> Refused:
    return Refused(
        403,
        f'The API key "{key}" may not use rule "{rule}" (it may use: {", ".join(sorted(allowed))}).',
        PERMISSION,
        "rule_not_allowed",
        outcome="forbidden",
    )


def budget_spent(message: str, retry_after: float) -> Refused:
    return Refused(429, message, RATE_LIMIT, "budget_exceeded", retry_after=retry_after, outcome="budget")


def internal_error() -> Refused:
    return Refused(
        500,
        "The router failed on this request (see its log).",
        SERVER,
        "internal_error",
        outcome="internal_error",
    )
