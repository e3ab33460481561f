"""Typed API errors, built from the server's ``Status`` body (a pure mapping, unit-tested)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

__all__ = [
    "NAMESPACE_TERMINATING",
    "AlreadyExists",
    "ApiError",
    "Conflict",
    "Expired",
    "FieldCause",
    "Forbidden",
    "Invalid",
    "NotFound",
    "ServerTimeout",
    "TooManyRequests",
    "Unauthorized",
    "error_from_response",
    "is_resource_version_too_large",
    "namespace_terminating",
    "parse_retry_after",
]

#: ``Status.details.causes[].reason`` of a request for a resourceVersion newer than the server
#: knows (metav1.CauseTypeResourceVersionTooLarge): after an etcd restore, or from a lagging
#: API server's watch cache.
RESOURCE_VERSION_TOO_LARGE = "ResourceVersionTooLarge"
#: ``Status.details.causes[].reason`` of a 403 for new content in a namespace being deleted
#: (v1.NamespaceTerminatingCause, set by the NamespaceLifecycle admission plugin).
NAMESPACE_TERMINATING = "NamespaceTerminating"


@dataclass(frozen=True, slots=True)
class FieldCause:
    """One entry of ``Status.details.causes``: which field the server rejected and why."""

    field: str
    reason: str
    message: str


class ApiError(Exception):
    """A non-2xx answer from the API server (``status`` is the HTTP code)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        reason: str = "",
        causes: tuple[FieldCause, ...] = (),
        details: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {reason or 'Error'}: {message}")
        self.status = status
        self.message = message
        self.reason = reason
        self.causes = causes
        self.details = details or {}
        self.retry_after = retry_after


class NotFound(ApiError):
    pass


class AlreadyExists(ApiError):
    pass


class Conflict(ApiError):
    """409 other than AlreadyExists: a stale resourceVersion, a failed precondition, an SSA conflict."""


class Expired(ApiError):
    """410 Gone / reason Expired: the resourceVersion is older than the server still remembers."""


class Invalid(ApiError):
    """422: validation failed; ``causes`` lists the offending fields (what a caller decides from:
    see field_policy.py, never the message text)."""


class Forbidden(ApiError):
    pass


class Unauthorized(ApiError):
    pass


class TooManyRequests(ApiError):
    pass


class ServerTimeout(ApiError):
    pass


def is_resource_version_too_large(error: BaseException) -> bool:
    """The server refused a resourceVersion it has not reached (504 Timeout carrying the
    ``ResourceVersionTooLarge`` cause).  Decided from the cause, never from the message."""
    return isinstance(error, ApiError) and any(
        cause.reason == RESOURCE_VERSION_TOO_LARGE for cause in error.causes
    )


_BY_REASON: dict[str, type[ApiError]] = {
    "NotFound": NotFound,
    "AlreadyExists": AlreadyExists,
    "Conflict": Conflict,
    "Expired": Expired,
    "Gone": Expired,
    "Invalid": Invalid,
    "Forbidden": Forbidden,
    "Unauthorized": Unauthorized,
    "TooManyRequests": TooManyRequests,
    "Timeout": ServerTimeout,
    "ServerTimeout": ServerTimeout,
}

_BY_STATUS: dict[int, type[ApiError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Expired,
    422: Invalid,
    429: TooManyRequests,
    504: ServerTimeout,
}


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (the API server only sends delta-seconds)."""
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return max(0.0, seconds)


def error_from_status(status: int, body: Any, retry_after: float | None = None) -> ApiError:
    """Build the typed error for an HTTP status and a decoded ``Status`` object (or anything else)."""
    payload = body if isinstance(body, dict) else {}
    reason = str(payload.get("reason") or "")
    message = str(payload.get("message") or (body if isinstance(body, str) else "") or f"HTTP {status}")
    details = payload.get("details") if isinstance(payload.get("details"), dict) else {}
    causes = tuple(
        FieldCause(
            field=str(cause.get("field") or ""),
            reason=str(cause.get("reason") or ""),
            message=str(cause.get("message") or ""),
        )
        for cause in (details or {}).get("causes") or ()
        if isinstance(cause, dict)
    )
    code = int(payload.get("code") or status)
    # A 409 with reason AlreadyExists is its own type; an ERROR watch event carries 410 in `code`.
    error_type = _BY_REASON.get(reason) or _BY_STATUS.get(code) or ApiError
    return error_type(code, message, reason=reason, causes=causes, details=details, retry_after=retry_after)


def error_from_response(status: int, body: bytes, retry_after_header: str | None = None) -> ApiError:
    try:
        decoded: Any = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        decoded = body.decode("utf-8", "replace").strip()
    return error_from_status(status, decoded, parse_retry_after(retry_after_header))


def namespace_terminating(error: ApiError) -> bool:
    """The API refuses new objects in a namespace being deleted (403 with cause
    NamespaceTerminating): not an RBAC problem, and retrying cannot help."""
    if not isinstance(error, Forbidden):
        return False
    return any(cause.reason == NAMESPACE_TERMINATING for cause in error.causes)
