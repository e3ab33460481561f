"""One client connection of the router's HTTP server (llmkube.router.http.server says what it does):
llhttp's parser fed within the head's budget, the bodies read against the shared body budget, one
task answering the connection's requests in turn, its timers (idle, head, write)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections import deque
from collections.abc import Callable
from typing import Protocol, cast

import httptools
import structlog

from llmkube.router.http.budget import ByteBudget
from llmkube.router.http.limits import Limits
from llmkube.router.http.messages import (
    BodyBusy,
    BodyError,
    Headers,
    Incoming,
    Request,
    decode,
    encode,
    status_line,
)
from llmkube.router.http.responder import Handler, Responder
from llmkube.router.http.stats import ServerStats

__all__ = ["Connection", "ErrorBody", "Front"]

log = structlog.get_logger("llmkube.router.http")

#: (status, message) -> (content type, body) of an answer the server gives itself
ErrorBody = Callable[[int, str], tuple[str, bytes]]


class Front(Protocol):
    """What a connection reads of its server (llmkube.router.http.server.HttpServer)."""

    handler: Handler
    body_limit: Callable[[], int]
    error_body: ErrorBody
    limits: Limits
    body_budget: ByteBudget
    stats: ServerStats
    connections: set[Connection]

    def admit(self, client: str) -> str | None: ...

    def released(self, client: str) -> None: ...


class Connection(asyncio.Protocol):
    """One client connection."""

    def __init__(self, server: Front) -> None:
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
        self._reading: Incoming | None = None
        #: an unread body is being skipped (it was too large): nothing after it can be parsed
        self._skipping = False
        #: requests whose head is in, waiting their turn
        self._waiting: deque[Incoming] = deque()
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
            self._responder.resumed()  # whoever waited for a drain learns the client is gone

    def pause_writing(self) -> None:
        self.writing_paused = True
        if self._write_timer is None and not self.closed:
            self._write_timer = self.loop.call_later(self.server.limits.write_timeout, self._write_expired)

    def resume_writing(self) -> None:
        self.writing_paused = False
        self._cancel_write_timer()
        if self._responder is not None:
            self._responder.resumed()

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
        incoming = Incoming(
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

    def _skip(self, incoming: Incoming) -> None:
        """A body over the limit: not read (None), and nothing after it can be parsed."""
        incoming.chunks = []
        self._release(incoming)
        incoming.finish(None)
        self._reading = None
        self._skipping = True
        self._cancel_idle()
        self.transport.pause_reading()

    def _reserve(self, incoming: Incoming, size: int) -> bool:
        """Hold `size` bytes of the server's body budget for this request (in all)."""
        more = size - incoming.reserved
        if more <= 0:
            return True
        if not self.server.body_budget.take(more):
            return False
        incoming.reserved = size
        return True

    def _release(self, incoming: Incoming) -> None:
        if incoming.reserved:
            self.server.body_budget.give(incoming.reserved)
            incoming.reserved = 0

    def _busy_body(self, incoming: Incoming) -> None:
        """No room for this body now: not read (BodyBusy), and nothing after it can be parsed."""
        self.server.stats.refuse("body_budget")
        incoming.chunks = []
        self._release(incoming)
        incoming.fail(BodyBusy("The router is holding as many request bodies as it can: retry shortly."))
        self._reading = None
        self._skipping = True
        self._cancel_idle()
        self.transport.pause_reading()

    async def _read_body(self, incoming: Incoming) -> bytes | None:
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
        if responder.incoming is not None:
            self._release(responder.incoming)
        if not responder.finished:
            if responder.started:
                responder.abort()  # a stream the handler left unfinished is not a whole answer
            else:
                self._error_answer(responder, 500, "The router failed on this request (see its log).")
        responder.detach()
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
