"""The router's HTTP/1.1 server: one protocol object per client connection, llhttp's parser, one task
per connection that hands its requests to the handler in turn, and a `Responder` the handler
answers through.

* Keep-alive as HTTP/1.1 has it (HTTP/1.0 only when asked); requests a client pipelines are taken in
  turn, and reading stops while one is being answered.
* The handler gets a request as soon as its head is whole, and reads its body when it wants it
  (`Request.read_body`), up to `body_limit()`: a larger one (declared, or counted as it comes) is
  not read (None). A handler that refuses from the head alone (a missing key) never makes the
  server read a body; the connection closes after any answer given before the body was all in.
  `Expect: 100-continue` is answered when the body is asked for; a body whose framing breaks is a
  BodyError for the handler (let through, it is answered 400).
* A head larger than `max_head_bytes` or `max_headers`, or a malformed one, is answered by the
  server itself (431, 400; the body from `error_body`) and the connection closed: the handler never
  sees it. Head bytes are counted as they arrive, not as llhttp hands them over: httptools keeps a
  header's name and value whole before it calls back, so the parser is fed no more than what is left
  of the head's budget at a time (a 16 MiB header value costs at most `max_head_bytes` of reading,
  then a 431). Chunked framing and trailers, which it keeps the same way, are held to the same budget
  between two pieces of body; trailers are read and dropped.
* Bodies in flight on all connections together hold at most `body_budget` bytes (a `ByteBudget` the
  handler shares for what parsing them costs): a body that does not fit now is not read, the handler
  reads a `BodyBusy` (503 with Retry-After) and the connection closes after the answer.
* At most `max_connections` connections, and `max_connections_per_client` from one address: one
  more is answered 503 (Retry-After) and closed at once, before a byte of it is read.
* A client that goes away cancels its request (the handler's `finally` and CancelledError handlers
  run): a request in flight upstream is dropped at once.
* A connection idle between requests, or one sending a request (head and body) slower than
  `idle_timeout` allows, is closed; a head must be whole within `head_timeout` of its first byte (a
  head dribbled a byte at a time holds a connection that long, no longer).
* A client that stops reading: once its socket buffer is full (`writing_paused`), it has
  `write_timeout` seconds to take something; then the connection is aborted and its request
  cancelled (the handler's upstream connection closes with it, freeing the backend's slot).
* Back-pressure: `Responder.writing_paused` while the client's socket buffer is over the high-water
  mark; `Responder.when_drained` calls back once it is not.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import cast

import httptools
import structlog

from llmkube.router.http.budget import ByteBudget
from llmkube.router.http.limits import Limits
from llmkube.router.http.messages import (
    BodyBusy,
    BodyError,
    Headers,
    Request,
    date_header,
    decode,
    encode,
    status_line,
)

__all__ = ["Handler", "HttpServer", "Limits", "Responder", "ServerStats"]

log = structlog.get_logger("llmkube.router.http")

Handler = Callable[[Request, "Responder"], Awaitable[None]]
#: (status, message) -> (content type, body) of an answer the server gives itself
ErrorBody = Callable[[int, str], tuple[str, bytes]]


def _plain(status: int, message: str) -> tuple[str, bytes]:
    return "text/plain; charset=utf-8", message.encode() + b"\n"


class ServerStats:
    """What the server refused and cut (counters for the metrics; read at scrape time)."""

    __slots__ = ("closed", "refused")

    def __init__(self) -> None:
        #: requests or connections refused, by reason: head_too_large, malformed, connections,
        #: client_connections, body_budget
        self.refused: dict[str, int] = {}
        #: connections the server closed, by reason: idle_timeout, head_timeout, write_timeout
        self.closed: dict[str, int] = {}

    def refuse(self, reason: str) -> None:
        self.refused[reason] = self.refused.get(reason, 0) + 1

    def close(self, reason: str) -> None:
        self.closed[reason] = self.closed.get(reason, 0) + 1


class Responder:
    """How a handler answers: `respond` (a whole answer), or `start`, `send`... `end` (a stream,
    chunked). Nothing is written once the client is gone (`gone`)."""

    __slots__ = (
        "_connection",
        "_detached",
        "_drained",
        "_head_only",
        "_incoming",
        "chunked",
        "close_after",
        "finished",
        "started",
    )

    def __init__(
        self,
        connection: _Connection,
        incoming: _Incoming | None,
        *,
        close_after: bool,
        chunked: bool,
        head_only: bool,
    ) -> None:
        self._connection = connection
        self._incoming = incoming
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

    def _resumed(self) -> None:
        callbacks, self._drained = self._drained, []
        for callback in callbacks:
            callback()

    def _head(self, status: int, headers: Iterable[tuple[str, str]], framing: bytes) -> bytes:
        if self._incoming is not None and not self._incoming.whole:
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

    def abort(self) -> None:
        """End the client's connection at once (a stream that broke: the client must not take
        what it got for a whole answer)."""
        self.finished = True
        self.close_after = True
        if not self._detached:
            self._connection.abort()


class _Incoming:
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


class _Connection(asyncio.Protocol):
    """One client connection."""

    def __init__(self, server: HttpServer) -> None:
        self.server = server
        self.loop = asyncio.get_running_loop()
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport = None  # type: ignore[assignment]  # set in connection_made
        self.peer: tuple[str, int] | None = None
        self.closed = False
        self.writing_paused = False
        #: counted in the server's connections (and its client's)
        self._counted = False
        # the head being read: between two messages the parser is in a head; the bytes fed to it
        # since the last message ended are counted there as they arrive
        self._in_head = True
        self._head_fed = 0
        self._url = b""
        self._headers: Headers = []
        self._head_too_large = False
        #: bytes fed in a body that brought no byte of body (chunk framing, trailers)
        self._stall = 0
        self._progress = False
        self._write_timer: asyncio.TimerHandle | None = None
        #: the request whose body is being read
        self._reading: _Incoming | None = None
        #: an unread body is being skipped (it was too large): nothing after it can be parsed
        self._skipping = False
        #: requests whose head is in, waiting their turn
        self._waiting: deque[_Incoming] = deque()
        #: answers the connection's requests in turn: one task for the connection, not one per
        #: request (a task's creation and its removal from asyncio's set of tasks cost more than the
        #: rest of a short request's handling on the server's side)
        self._worker: asyncio.Task[None] | None = None
        #: what the worker waits on between requests
        self._next: asyncio.Future[None] | None = None
        #: a request is being answered
        self._busy = False
        self._responder: Responder | None = None
        self._idle_timer: asyncio.TimerHandle | None = None
        #: the connection ends once the request being answered is (a stop, a protocol error)
        self._ending = False

    # -- asyncio.Protocol -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (uvloop's transports are not asyncio.Transport subclasses, but have its methods)
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            # Each write goes out at once: a stream's chunks are small and must not wait for more.
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername")
        self.peer = (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) and len(peer) >= 2 else None
        server = self.server
        refused = server.admit(self.peer[0] if self.peer is not None else "")
        if refused is not None:
            # Over a cap: told so before a byte is read, and closed (the kernel already accepted it).
            server.stats.refuse(refused)
            self._skipping = True
            content_type, body = server.error_body(
                503, "The router has as many connections open as it takes: retry shortly."
            )
            self.transport.write(
                status_line(503)
                + encode(f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n")
                + b"Retry-After: 1\r\nConnection: close\r\n\r\n"
                + body
            )
            self.transport.close()
            return
        self._counted = True
        server.connections.add(self)
        self._arm_idle()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._counted:
            self._counted = False
            self.server.connections.discard(self)
            self.server.released(self.peer[0] if self.peer is not None else "")
        self._cancel_idle()
        self._cancel_write_timer()
        for incoming in self._waiting:
            self._release(incoming)  # never answered: what they held goes back now
        if self._reading is not None:
            self._release(self._reading)
            self._reading.body.cancel()  # a handler reading it is cancelled with the worker anyway
        if self._worker is not None and not self._worker.done():
            self._worker.cancel()  # the client went away: so does its request
        if self._responder is not None:
            self._responder._resumed()  # whoever waited for a drain learns the client is gone

    def pause_writing(self) -> None:
        self.writing_paused = True
        if self._write_timer is None and not self.closed:
            self._write_timer = self.loop.call_later(self.server.limits.write_timeout, self._write_expired)

    def resume_writing(self) -> None:
        self.writing_paused = False
        self._cancel_write_timer()
        if self._responder is not None:
            self._responder._resumed()

    def _cancel_write_timer(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None

    def _write_expired(self) -> None:
        """The client took nothing of a full buffer for `write_timeout`: it is cut (and its request
        cancelled, so the backend it holds is let go)."""
        self._write_timer = None
        if not self.closed and self.writing_paused:
            self.server.stats.close("write_timeout")
            log.info(
                "client stopped reading: connection cut",
                peer=self.peer,
                after=self.server.limits.write_timeout,
            )
            self.abort()

    def data_received(self, data: bytes) -> None:
        if self._skipping:
            return
        limit = self.server.limits.max_head_bytes
        view = memoryview(data)
        try:
            while view:
                # httptools keeps a header (or a trailer, or a chunk's framing) whole before it calls
                # back: it is never fed more than what is left of the budget of bytes without
                # progress, so what it keeps is bounded as the bytes arrive, not once they are in.
                room = limit - (self._head_fed if self._in_head else self._stall)
                if room <= 0:
                    self._head_too_large = True
                    raise _HeadTooLarge
                piece = view[:room] if len(view) > room else view
                view = view[len(piece) :]
                in_head = self._in_head
                self._progress = False
                if in_head:
                    self._head_fed += len(piece)
                self.parser.feed_data(piece)
                if self._skipping:
                    return
                if not in_head and not self._in_head:
                    self._stall = 0 if self._progress else self._stall + len(piece)
                if self._in_head and self._head_fed >= limit:
                    self._head_too_large = True
                    raise _HeadTooLarge
        except _HeadTooLarge:
            self._too_large()
        except httptools.HttpParserUpgrade:
            self.server.stats.refuse("malformed")
            self._refuse(400, "Protocol upgrades are not supported.")
        except httptools.HttpParserError as error:
            if self._head_too_large:
                self._too_large()
            else:
                self.server.stats.refuse("malformed")
                self._refuse(400, f"Malformed HTTP request: {error}.")

    def _too_large(self) -> None:
        limits = self.server.limits
        self.server.stats.refuse("head_too_large")
        what = "head" if self._reading is None else "chunk framing or trailers"
        self._refuse(
            431,
            f"The request's {what} is too large: at most {limits.max_head_bytes} bytes "
            f"and {limits.max_headers} headers.",
        )

    def eof_received(self) -> bool:
        # The client closed its side: HTTP clients do that when they give up (a half-close that
        # still waits for the answer is too rare to tell apart), so its request is cancelled.
        return False

    # -- llhttp's callbacks -----------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._cancel_idle()
        # The head must be whole within the head timeout, the rest of the request within the idle
        # timeout (armed again once the head is in).
        limits = self.server.limits
        self._arm_idle(min(limits.head_timeout, limits.idle_timeout))
        self._url = b""
        self._headers = []

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self._in_head:
            return  # a trailer: counted (data_received), never added to a head already handed over
        self._headers.append((decode(name), decode(value)))
        if len(self._headers) > self.server.limits.max_headers:
            self._head_too_large = True
            raise _HeadTooLarge  # the parser stops; data_received answers 431

    def on_headers_complete(self) -> None:
        """The head is whole: the request goes to the handler now, its body follows (or not)."""
        self._in_head = False
        self._progress = True
        self._stall = 0
        self._cancel_idle()
        self._arm_idle()
        url = httptools.parse_url(self._url) if self._url else None
        headers = self._headers
        incoming = _Incoming(
            Request(
                method=self.parser.get_method().decode("ascii", "replace"),
                path=decode(url.path) if url is not None and url.path else "/",
                query=decode(url.query) if url is not None and url.query else "",
                version=self.parser.get_http_version(),
                headers=headers,
                peer=self.peer,
            ),
            self.loop.create_future(),
            keep_alive=self.parser.should_keep_alive(),
        )
        incoming.request.reader = lambda: self._read_body(incoming)
        self._reading = incoming
        declared = _declared_length(headers)
        if declared is not None and declared > self.server.body_limit():
            self._skip(incoming)  # not read: 413 at once, then the connection closes
        elif declared is not None and not self._reserve(incoming, declared):
            self._busy_body(incoming)
        else:
            incoming.expects_continue = any(
                n.lower() == "expect" and v.lower() == "100-continue" for n, v in headers
            )
        self._waiting.append(incoming)
        if self._busy:
            self.transport.pause_reading()  # pipelined: read on once the answers caught up
        elif self._worker is None:
            self._worker = self.loop.create_task(self._work())
        elif self._next is not None and not self._next.done():
            self._next.set_result(None)

    def on_body(self, body: bytes) -> None:
        self._progress = True
        incoming = self._reading
        if self._skipping or incoming is None:
            return
        incoming.size += len(body)
        if incoming.size > self.server.body_limit():
            self._skip(incoming)
            return
        if incoming.size > incoming.reserved and not self._reserve(incoming, incoming.size):
            self._busy_body(incoming)  # a chunked body, reserved as it comes
            return
        incoming.chunks.append(body)

    def on_message_complete(self) -> None:
        self._in_head = True
        self._head_fed = 0
        self._progress = True
        self._stall = 0
        incoming, self._reading = self._reading, None
        if self._skipping or incoming is None:
            return
        self._cancel_idle()
        chunks, incoming.chunks = incoming.chunks, []
        incoming.finish(chunks[0] if len(chunks) == 1 else b"".join(chunks))

    def _skip(self, incoming: _Incoming) -> None:
        """A body over the limit: not read (None), and nothing after it can be parsed."""
        incoming.chunks = []
        self._release(incoming)
        incoming.finish(None)
        self._reading = None
        self._skipping = True
        self._cancel_idle()
        self.transport.pause_reading()

    def _reserve(self, incoming: _Incoming, size: int) -> bool:
        """Hold `size` bytes of the server's body budget for this request (in all)."""
        more = size - incoming.reserved
        if more <= 0:
            return True
        if not self.server.body_budget.take(more):
            return False
        incoming.reserved = size
        return True

    def _release(self, incoming: _Incoming) -> None:
        if incoming.reserved:
            self.server.body_budget.give(incoming.reserved)
            incoming.reserved = 0

    def _busy_body(self, incoming: _Incoming) -> None:
        """No room for this body now: not read (BodyBusy), and nothing after it can be parsed."""
        self.server.stats.refuse("body_budget")
        incoming.chunks = []
        self._release(incoming)
        incoming.fail(BodyBusy("The router is holding as many request bodies as it can: retry shortly."))
        self._reading = None
        self._skipping = True
        self._cancel_idle()
        self.transport.pause_reading()

    async def _read_body(self, incoming: _Incoming) -> bytes | None:
        if not incoming.body.done() and incoming.expects_continue and not incoming.continued:
            incoming.continued = True
            if not self.closed:
                self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # send it: it will be read
        return await asyncio.shield(incoming.body)

    # -- requests ---------------------------------------------------------------------------------

    async def _work(self) -> None:
        """The connection's requests, in turn, until it closes (then this task is cancelled, and
        with it the request being answered: the client went away, or the server is stopping)."""
        while not self.closed:
            if not self._waiting:
                self._next = self.loop.create_future()
                await self._next
                continue
            incoming = self._waiting.popleft()
            request = incoming.request
            self._busy = True
            responder = Responder(
                self,
                incoming,
                close_after=not incoming.keep_alive or self._ending,
                chunked=request.version != "1.0",
                head_only=request.method == "HEAD",
            )
            self._responder = responder
            try:
                await self.server.handler(request, responder)
            except BodyError as error:  # the handler let it through: the client gets its 400 (503)
                if not responder.started:
                    self._error_answer(responder, error.status, str(error), error.retry_after)
            except Exception:  # a defect of the handler: the client gets a 500, never a traceback
                log.exception("handler failed", path=request.path)
                if not responder.started:
                    self._error_answer(responder, 500, "The router failed on this request (see its log).")
            finally:
                self._answered(responder)

    def _answered(self, responder: Responder) -> None:
        if responder._incoming is not None:
            self._release(responder._incoming)
        if not responder.finished:
            if responder.started:
                responder.abort()  # a stream the handler left unfinished is not a whole answer
            else:
                self._error_answer(responder, 500, "The router failed on this request (see its log).")
        responder._detached = True
        responder._resumed()  # a drain callback still waiting learns the answer is over
        self._busy = False
        self._responder = None
        if self.closed:
            return
        if responder.close_after or self._ending:
            self.transport.close()
            return
        if self._waiting:
            return  # the worker takes the next one at once
        self.transport.resume_reading()
        if self._reading is None:
            self._arm_idle()

    def _error_answer(
        self, responder: Responder, status: int, message: str, retry_after: float | None = None
    ) -> None:
        content_type, body = self.server.error_body(status, message)
        headers = [("Content-Type", content_type)]
        if retry_after is not None:
            headers.append(("Retry-After", str(max(1, round(retry_after)))))
        responder.respond(status, headers, body)

    def _refuse(self, status: int, message: str) -> None:
        """A request the handler never sees: answered here, then the connection closes."""
        self._skipping = True
        if self._reading is not None:
            # The body of a request the handler has: it is told (BodyError), and answers.
            self._reading.fail(BodyError(message))
            self._reading = None
        if self._busy or self._waiting:
            self._ending = True  # answer the request in hand; what follows it is unreadable
            if self._responder is not None and not self._responder.started:
                self._responder.close_after = True
            self.transport.pause_reading()
            return
        responder = Responder(self, None, close_after=True, chunked=False, head_only=False)
        self._error_answer(responder, status, message)
        self.transport.close()

    # -- timers and stopping ----------------------------------------------------------------------

    def _arm_idle(self, seconds: float | None = None) -> None:
        timeout = self.server.limits.idle_timeout if seconds is None else seconds
        self._idle_timer = self.loop.call_later(timeout, self._idle_expired)

    def _cancel_idle(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None

    def _idle_expired(self) -> None:
        """Nothing was asked for that long, or a request (head or body) took that long to arrive."""
        self._idle_timer = None
        if (self._reading is not None or not self._busy) and not self.closed:
            started_head = self._in_head and self._head_fed > 0
            self.server.stats.close("head_timeout" if started_head else "idle_timeout")
            self.transport.close()

    @property
    def busy(self) -> bool:
        return self._busy

    def end_when_idle(self) -> None:
        """Stopping: close now when no request is being answered, else after it."""
        self._ending = True
        if not self._busy and not self._waiting and not self.closed:
            self.transport.close()
        elif self._responder is not None and not self._responder.started:
            self._responder.close_after = True

    def abort(self) -> None:
        if not self.closed:
            self.closed = True
            self.transport.abort()


class _HeadTooLarge(Exception):
    """Raised from a parser callback: the head is over the limit (the parser stops)."""


def _declared_length(headers: Headers) -> int | None:
    for name, value in headers:
        if name.lower() == "content-length":
            return int(value) if value.isdigit() else None
    return None


class HttpServer:
    def __init__(
        self,
        handler: Handler,
        *,
        body_limit: Callable[[], int],
        error_body: ErrorBody = _plain,
        limits: Limits | None = None,
        body_budget: ByteBudget | None = None,
    ) -> None:
        self.handler = handler
        self.body_limit = body_limit
        self.error_body = error_body
        self.limits = limits or Limits()
        #: what bodies in flight hold (the handler may hold more of it for what it makes of them)
        self.body_budget = body_budget or ByteBudget(self.limits.body_budget)
        self.stats = ServerStats()
        self.connections: set[_Connection] = set()
        #: open connections by client address
        self.clients: dict[str, int] = {}
        self._server: asyncio.AbstractServer | None = None

    def admit(self, client: str) -> str | None:
        """Count a new connection from `client`, or the cap it is over."""
        limits = self.limits
        if limits.max_connections and len(self.connections) >= limits.max_connections:
            return "connections"
        count = self.clients.get(client, 0)
        if limits.max_connections_per_client and count >= limits.max_connections_per_client:
            return "client_connections"
        self.clients[client] = count + 1
        return None

    def released(self, client: str) -> None:
        left = self.clients.get(client, 0) - 1
        if left > 0:
            self.clients[client] = left
        else:
            self.clients.pop(client, None)

    async def start(self, host: str, port: int, *, backlog: int = 1024) -> tuple[str, int]:
        """Listen; the address bound (port 0: the one the kernel chose)."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Connection(self), host, port, backlog=backlog, reuse_address=True
        )
        bound = self._server.sockets[0].getsockname()
        return str(bound[0]), int(bound[1])

    def stop_listening(self) -> None:
        """No new connections; those open go on (`end_connections` ends them)."""
        if self._server is not None:
            self._server.close()

    def end_connections(self) -> None:
        """Close idle connections now and the others once their request is answered."""
        for connection in list(self.connections):
            connection.end_when_idle()

    @property
    def busy(self) -> int:
        return sum(1 for connection in self.connections if connection.busy)

    async def close(self) -> None:
        """Stop listening and end every connection now."""
        self.stop_listening()
        for connection in list(self.connections):
            connection.abort()
        if self._server is not None:
            await self._server.wait_closed()
