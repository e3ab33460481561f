"""What goes over the wire, both ways: headers, a request as the server hands it to the handler (and
as its connection reads it: `Incoming`), and the bytes of a message head.

Header names and values are `str`, decoded from bytes as UTF-8 with surrogate escapes (as aiohttp
did): lossless, so a header passed on is the very bytes received. llhttp has already refused any
name or value with a CR, LF or NUL in it, so nothing received can split a head it is written into.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from http import HTTPStatus

__all__ = [
    "BodyBusy",
    "BodyError",
    "Headers",
    "Incoming",
    "Request",
    "date_header",
    "decode",
    "encode",
    "first",
    "reason_phrase",
    "status_line",
]

#: (name, value) pairs in the order received; a name may repeat
Headers = list[tuple[str, str]]


def decode(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def first(headers: Iterable[tuple[str, str]], name: str) -> str | None:
    """The first value of `name` (lower case), whatever its case in `headers`."""
    for key, value in headers:
        if key.lower() == name:
            return value
    return None


class BodyError(Exception):
    """The request's body cannot be had: it broke off, or its framing is malformed (the connection
    ends after the answer), or the server has no room for it now. `status` is what to answer (400,
    or 503 with `retry_after` seconds)."""

    status = 400
    retry_after: float | None = None


class BodyBusy(BodyError):
    """The bodies in flight on every connection already hold the server's byte budget: this one is
    not read (the client may retry after `retry_after` seconds)."""

    status = 503
    retry_after = 1.0


@dataclass(slots=True)
class Request:
    """A request as received: its head at once, its body when asked for (`read_body`)."""

    method: str
    path: str
    query: str
    #: "1.1" or "1.0"
    version: str
    headers: Headers
    #: the client's address and port
    peer: tuple[str, int] | None = None
    #: reads the body (the server's; none: an empty body)
    reader: Callable[[], Awaitable[bytes | None]] | None = field(default=None, repr=False)
    #: every header, names in lower case, first value of each (made on first use)
    _lower: dict[str, str] | None = field(default=None, repr=False)

    async def read_body(self) -> bytes | None:
        """The whole body; None when it is larger than the server takes (it is not read, and the
        connection closes after the answer); raises BodyError when its framing is malformed. A
        handler that answers without reading it (a refusal) spares the server the read: the
        connection closes after the answer if the body is not all in by then."""
        return b"" if self.reader is None else await self.reader()

    @property
    def lower_headers(self) -> dict[str, str]:
        lower = self._lower
        if lower is None:
            lower = {}
            for name, value in self.headers:
                lower.setdefault(name.lower(), value)
            self._lower = lower
        return lower

    def header(self, name: str) -> str | None:
        """The first value of `name` (any case)."""
        return self.lower_headers.get(name.lower())

    @property
    def content_length(self) -> int | None:
        value = self.header("content-length")
        return int(value) if value is not None and value.isdigit() else None


_REASONS = {status.value: status.phrase for status in HTTPStatus}


def reason_phrase(status: int) -> str:
    return _REASONS.get(status, "Unknown")


_STATUS_LINES: dict[int, bytes] = {}


def status_line(status: int) -> bytes:
    line = _STATUS_LINES.get(status)
    if line is None:
        line = _STATUS_LINES[status] = f"HTTP/1.1 {status} {reason_phrase(status)}\r\n".encode()
    return line


_date: tuple[int, bytes] = (0, b"")


def date_header() -> bytes:
    """`Date: ...\\r\\n` for an answer of the router's own (formatted once a second)."""
    global _date
    now = int(time.time())
    if _date[0] != now:
        _date = (now, b"Date: " + email.utils.formatdate(now, usegmt=True).encode() + b"\r\n")
    return _date[1]


class Incoming:
    """A request as the connection reads it: its head is whole, its body comes (or is skipped)."""

    __slots__ = (
        "body",
        "chunks",
        "continued",
        "expects_continue",
        "keep_alive",
        "request",
        "reserved",
        "size",
    )

    def __init__(self, request: Request, body: asyncio.Future[bytes | None], *, keep_alive: bool) -> None:
        self.request = request
        self.body = body
        self.keep_alive = keep_alive
        self.chunks: list[bytes] = []
        self.size = 0
        #: bytes of the server's body budget this request holds (given back once it is answered)
        self.reserved = 0
        self.expects_continue = False
        self.continued = False

    @property
    def whole(self) -> bool:
        """All of the body is in, and was kept (the connection can go on to the next request)."""
        body = self.body
        return body.done() and not body.cancelled() and body.exception() is None and body.result() is not None

    def finish(self, body: bytes | None) -> None:
        if not self.body.done():
            self.body.set_result(body)

    def fail(self, error: BodyError) -> None:
        if not self.body.done():
            self.body.set_exception(error)
            self.body.exception()  # a handler that never reads the body needs not be told
