"""Which headers pass the router, each way, and the ones it adds.

To a backend go the client's headers but the hop-by-hop ones (RFC 9110 7.6.1), the client's own
credentials (`Authorization`, `x-api-key`: a backend gets the router's keys, never the client's),
cookies, and what the router sets itself (`Host`, `Content-Length`, `Accept-Encoding: identity`, so
the usage in an answer can be read, and `X-Request-Id`). A cloud backend gets none of the routing
labels (`x-llmkube-*`, the classification header): they stay inside. Back to the client go the
backend's headers but the hop-by-hop ones and `Set-Cookie` (the router's connections are shared
by every client), with the request id, the backend and the rule that served it."""

from collections.abc import Callable, Iterable, Mapping

Headers = list[tuple[str, str]]

#: a client's X-Request-Id is kept if it is this short and printable
MAX_REQUEST_ID = 128

NOT_FORWARDED = frozenset(
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
NOT_RETURNED = frozenset(
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


def request_id(given: str | None, fresh: Callable[[], str]) -> str:
    """The client's X-Request-Id when it is short and printable, else a fresh one."""
    if given and len(given) <= MAX_REQUEST_ID and given.isprintable():
        return given
    return fresh()


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The client key a request presents (lower-case header names): `Authorization: Bearer`, else
    `x-api-key`."""
    value = headers.get("authorization")
    if value and value[:7].lower() == "bearer ":
        bearer = value[7:].strip()
        if bearer:
            return bearer
    return headers.get("x-api-key")


def forwarded(
    headers: Iterable[tuple[str, str]], request: str, *, private: bool, classification_header: str
) -> Headers:
    """The client's headers a backend gets, with the router's own (`request`: the request id);
    `private`: a cloud backend, which gets no routing label."""
    found: Headers = []
    for name, value in headers:
        lower = name.lower()
        if lower in NOT_FORWARDED:
            continue
        if private and (lower.startswith("x-llmkube-") or lower == classification_header):
            continue
        found.append((name, value))
    found.append(("Accept-Encoding", "identity"))
    found.append(("X-Request-Id", request))
    return found


def returned(headers: Iterable[tuple[str, str]], request: str, backend: str, rule: str) -> Headers:
    """A backend's answer headers the client gets, with the request id, the backend and the rule."""
    found = [(name, value) for name, value in headers if name.lower() not in NOT_RETURNED]
    found.append(("X-Request-Id", request))
    found.append(("X-Llmkube-Backend", backend))
    found.append(("X-Llmkube-Rule", rule))
    return found
