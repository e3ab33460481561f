"""How a handler answers a request of the router's HTTP server: a whole answer, or a stream (chunked
on HTTP/1.1, else ended by the connection's close), with back-pressure from the client's socket."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

from llmkube.router.http.messages import Incoming, Request, date_header, encode, status_line

__all__ = ["Handler", "Responder", "Wire"]

Handler = Callable[[Request, "Responder"], Awaitable[None]]


class Wire(Protocol):
    """What a responder writes through: the client's connection (llmkube.router.http.connection)."""

    transport: asyncio.Transport
    closed: bool
    writing_paused: bool

    def abort(self) -> None: ...


class Responder:
    """How a handler answers: `respond` (a whole answer), or `start`, `send`... `end` (a stream,
    chunked). Nothing is written once the client is gone (`gone`)."""

    __slots__ = (
        "_connection",
        "_detached",
        "_drained",
        "_head_only",
        "chunked",
        "close_after",
        "finished",
        "incoming",
        "started",
    )

    def __init__(
        self,
        connection: Wire,
        incoming: Incoming | None,
        *,
        close_after: bool,
        chunked: bool,
        head_only: bool,
    ) -> None:
        self._connection = connection
        #: its request as read (None: the server answers by itself)
        self.incoming = incoming
        #: the connection ends after this answer (the client asked, HTTP/1.0, an unread body)
        self.close_after = close_after
        #: the stream is framed in chunks (HTTP/1.1); else it ends with the connection
        self.chunked = chunked
        self._head_only = head_only
        self.started = False
        self.finished = False
        #: its request is over: the connection may be answering the next one, which it must not touch
        self._detached = False
        self._drained: list[Callable[[], None]] = []

    @property
    def gone(self) -> bool:
        """The client's connection is closed (or closing), or this answer is over."""
        return self._detached or self._connection.closed

    @property
    def writing_paused(self) -> bool:
        return self._connection.writing_paused

    def when_drained(self, callback: Callable[[], None]) -> None:
        """`callback()` once the client's buffer is below its low-water mark again (or it is gone)."""
        if not self._connection.writing_paused or self.gone:
            callback()
        else:
            self._drained.append(callback)

    def resumed(self) -> None:
        """The client's buffer drained, or it is gone: whoever waits for a drain is called back."""
        callbacks, self._drained = self._drained, []
        for callback in callbacks:
            callback()

    def _head(self, status: int, headers: Iterable[tuple[str, str]], framing: bytes) -> bytes:
        if self.incoming is not None and not self.incoming.whole:
            # Answered before its body was all in (a refusal), or a body not read: what follows on
            # the connection cannot be told from the rest of that body.
            self.close_after = True
        lines = [status_line(status)]
        dated = False
        for name, value in headers:
            lines.append(encode(f"{name}: {value}\r\n"))
            dated = dated or name.lower() == "date"
        if not dated:
            lines.append(date_header())
        lines.append(framing)
        if self.close_after:
            lines.append(b"Connection: close\r\n")
        lines.append(b"\r\n")
        return b"".join(lines)

    def respond(self, status: int, headers: Iterable[tuple[str, str]], body: bytes = b"") -> None:
        """The whole answer, with its Content-Length."""
        if self.started:
            raise RuntimeError("the answer has already started")
        self.started = self.finished = True
        if self.gone:
            return
        head = self._head(status, headers, b"Content-Length: %d\r\n" % len(body))
        transport = self._connection.transport
        if body and not self._head_only:
            transport.writelines((head, body))
        else:
            transport.write(head)

    def start(self, status: int, headers: Iterable[tuple[str, str]], first: bytes = b"") -> None:
        """The head of a stream, and its first bytes when they are at hand (one write)."""
        if self.started:
            raise RuntimeError("the answer has already started")
        self.started = True
        if not self.chunked:
            # The end of a stream without framing is the end of the connection: the head says so.
            self.close_after = True
        if self.gone:
            return
        framing = b"Transfer-Encoding: chunked\r\n" if self.chunked else b""
        head = self._head(status, headers, framing)
        if first and not self._head_only:
            self._connection.transport.writelines((head, self._frame(first)))
        else:
            self._connection.transport.write(head)

    def _frame(self, data: bytes) -> bytes:
        return b"%x\r\n%b\r\n" % (len(data), data) if self.chunked else data

    def send(self, data: bytes) -> bool:
        """Write `data` as the stream's next bytes; False when the client is gone."""
        if self.gone:
            return False
        if data and not self._head_only:
            self._connection.transport.write(self._frame(data))
        return True

    def end(self, last: bytes = b"") -> None:
        """The end of the stream, after its `last` bytes (one write)."""
        if self.finished:
            return
        self.finished = True
        if self.gone:
            return
        if self._head_only:
            return
        if self.chunked:
            self._connection.transport.write(self._frame(last) + b"0\r\n\r\n" if last else b"0\r\n\r\n")
        elif last:
            self._connection.transport.write(last)  # the close that follows ends it (see `start`)

    def detach(self) -> None:
        """Its request is over: the connection may answer the next one, which this must not touch
        (a drain callback still waiting learns the answer is over)."""
        self._detached = True
        self.resumed()

    def abort(self) -> None:
        """End the client's connection at once (a stream that broke: the client must not take
        what it got for a whole answer)."""
        self.finished = True
        self.close_after = True
        if not self._detached:
            self._connection.abort()
