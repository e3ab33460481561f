"""Error answers in OpenAI's shape (`{"error": {"message", "type", "param", "code"}}`): what every
OpenAI client library parses into its exceptions. The router never answers with a traceback."""

from dataclasses import dataclass

import orjson

INVALID_REQUEST = "invalid_request_error"
AUTHENTICATION = "authentication_error"
RATE_LIMIT = "rate_limit_error"
PERMISSION = "permission_error"
SERVER = "server_error"
UNAVAILABLE = "service_unavailable"


@dataclass(frozen=True)
class Refused:
    """A request answered by the router itself."""

    status: int
    message: str
    type: str = INVALID_REQUEST
    code: str | None = None
    param: str | None = None
    #: seconds, for 429 (Retry-After) and 503
    retry_after: float | None = None
    #: the audit line's outcome
    outcome: str = "refused"

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
