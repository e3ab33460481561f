"""One connection of the router to a backend, and the answer it carries: its head parsed by llhttp,
its body handed to a `Sink` as it arrives (or collected whole: `Answer.read`), silence in the middle
of it timed out; the connection goes back to its pool (llmkube.router.http.client) once the answer
is whole and both sides meant to keep it, else it is closed."""

from __future__ import annotations

import asyncio
import contextlib
from typing import NamedTuple, Protocol, cast

import httptools
import structlog

from llmkube.router.http.messages import Headers, decode

__all__ = [
    "Answer",
    "AnswerBroken",
    "AnswerSilent",
    "BackendConnection",
    "ConnectFailed",
    "ConnectionBroken",
    "Keeper",
    "Origin",
    "Sink",
]

log = structlog.get_logger("llmkube.router.http")


class ConnectFailed(OSError):
    """No connection to the backend could be made."""


class ConnectionBroken(Exception):
    """The connection ended before the answer's head was whole."""

    def __init__(self, detail: str, *, reused: bool) -> None:
        super().__init__(detail)
        #: the connection had served an earlier request (it came from the pool)
        self.reused = reused


class AnswerBroken(Exception):
    """The answer's body was cut short."""


class AnswerSilent(AnswerBroken):
    """The backend sent nothing for longer than the idle timeout in the middle of its answer."""


class Sink(Protocol):
    """Where an answer's body goes as it arrives. Called from the connection's callbacks: they must
    not raise (an exception is logged by the pool and breaks the connection).

    `body` for each piece of the body llhttp finds in what was read, then `flush` once everything
    read at once has been through `body` (a backend's chunks that arrived together: a relay writes
    them on together, in one write, rather than one by one), or `end`."""

    def body(self, data: bytes) -> None: ...

    def flush(self) -> None: ...

    def end(self) -> None: ...

    def failed(self, error: AnswerBroken) -> None: ...


class Origin(NamedTuple):
    """Where connections go (a pool's key: a tuple, hashed and compared in C)."""

    scheme: str  # "http" or "https"
    host: str
    port: int

    @property
    def tls(self) -> bool:
        return self.scheme == "https"

    @property
    def host_header(self) -> str:
        default = 443 if self.tls else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


class Keeper(Protocol):
    """What a connection reads of the pool that keeps it (llmkube.router.http.client.Pool)."""

    read_timeout: float

    def release(self, connection: BackendConnection) -> None: ...

    def forget(self, connection: BackendConnection) -> None: ...


class Answer:
    """A backend's answer, from its head on. `close()` when done with it, whatever happened."""

    __slots__ = ("_connection", "headers", "reason", "status")

    def __init__(self, connection: BackendConnection, status: int, headers: Headers) -> None:
        self._connection = connection
        self.status = status
        self.headers = headers
        self.reason = ""

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop its connection runs on (for a sink's futures)."""
        return self._connection.loop

    @property
    def content_type(self) -> str:
        for name, value in self.headers:
            if name.lower() == "content-type":
                return value.partition(";")[0].strip().lower()
        return ""

    # Each call names this answer: once it is over, its connection may carry another one, which a
    # late call (a drain callback, a close in a `finally`) must leave alone.

    def stream(self, sink: Sink) -> None:
        """Hand the body to `sink` as it arrives (what arrived already, at once)."""
        self._connection.attach(self, sink)

    async def read(self) -> bytes:
        """The whole body (raises AnswerBroken)."""
        collector = _Collector(self._connection.loop)
        self._connection.attach(self, collector)
        return await collector.done

    def pause_reading(self) -> None:
        self._connection.pause(self)

    def resume_reading(self) -> None:
        self._connection.resume(self)

    def close(self) -> None:
        """Done with the answer: its connection goes back to the pool when the answer was read
        whole, else it is closed (the backend stops sending)."""
        self._connection.done_with(self)


class _Collector:
    __slots__ = ("chunks", "done")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.chunks: list[bytes] = []
        self.done: asyncio.Future[bytes] = loop.create_future()

    def body(self, data: bytes) -> None:
        self.chunks.append(data)

    def flush(self) -> None:
        pass

    def end(self) -> None:
        if not self.done.done():
            chunks = self.chunks
            self.done.set_result(chunks[0] if len(chunks) == 1 else b"".join(chunks))

    def failed(self, error: AnswerBroken) -> None:
        if not self.done.done():
            self.done.set_exception(error)


class BackendConnection(asyncio.Protocol):
    """One connection to a backend, carrying one request and its answer at a time."""

    def __init__(self, pool: Keeper, origin: Origin) -> None:
        self.pool = pool
        self.origin = origin
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport = None  # type: ignore[assignment]  # set in connection_made
        self.parser = httptools.HttpResponseParser(self)
        self.closed = False
        #: answers this connection has carried (a reused one may have been closed by the backend)
        self.served = 0
        self.idle_since = 0.0
        self._head: asyncio.Future[Answer] | None = None
        self._headers: Headers = []
        self._reason = b""
        self._answer: Answer | None = None
        self._sink: Sink | None = None
        self._pending: list[bytes] = []
        self._whole = False
        self._keep_alive = False
        self._until_close = False
        self._error: AnswerBroken | None = None
        self._paused = False
        self._last_read = 0.0
        self._timer: asyncio.TimerHandle | None = None

    # -- asyncio.Protocol -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (uvloop's transports are not asyncio.Transport subclasses, but have its methods)
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self._head is None and self._answer is None:
            self.abort()  # bytes nobody asked for: the connection is unusable
            return
        self._last_read = self.loop.time()
        try:
            self.parser.feed_data(data)
            if self._sink is not None:
                self._sink.flush()
        except httptools.HttpParserCallbackError:
            # A sink's defect (they must not raise): the backend is not to blame for it.
            log.exception("relaying an answer failed", origin=f"{self.origin.host}:{self.origin.port}")
            self._broke("the router failed relaying the answer")
        except httptools.HttpParserError as error:
            self._broke(f"malformed answer: {error}")

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool.forget(self)
        self._cancel_timer()
        if self._answer is not None and not self._whole and self._until_close and exc is None:
            self.on_message_complete()  # an answer framed by the end of the connection
            return
        what = f"reset ({exc})" if exc is not None else "closed by the backend"
        self._broke(f"the connection was {what}")

    def eof_received(self) -> bool:
        return False

    # -- llhttp's callbacks -----------------------------------------------------------------------

    def on_status(self, reason: bytes) -> None:
        self._reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((decode(name), decode(value)))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        headers, self._headers = self._headers, []
        reason, self._reason = self._reason, b""
        if status < 200:
            return  # 100 Continue and the like: the answer follows
        framed = any(n.lower() in ("content-length", "transfer-encoding") for n, _ in headers)
        self._until_close = not framed and status not in (204, 304)
        self._answer = Answer(self, status, headers)
        self._answer.reason = decode(reason)
        head = self._head
        self._head = None
        if head is not None and not head.done():
            head.set_result(self._answer)
        self._arm_timer(self.pool.read_timeout)

    def on_body(self, body: bytes) -> None:
        sink = self._sink
        if sink is None:
            self._pending.append(body)
        else:
            sink.body(body)

    def on_message_complete(self) -> None:
        if self._answer is None:
            return  # the end of a 1xx
        self._whole = True
        self._keep_alive = self.parser.should_keep_alive() and not self._until_close
        self._cancel_timer()
        sink = self._sink
        if sink is not None:
            self._sink = None
            sink.end()
            self.done_with(self._answer)

    # -- an exchange ------------------------------------------------------------------------------

    async def exchange(self, head: bytes, body: bytes) -> Answer:
        """Send a request (its head and body); the answer once its head is whole."""
        if self.closed or self.transport.is_closing():
            raise ConnectionBroken("the connection was closed by the backend", reused=self.served > 0)
        future: asyncio.Future[Answer] = self.loop.create_future()
        self._head = future
        self._answer, self._sink, self._pending, self._whole, self._error = None, None, [], False, None
        self._headers = []
        if body:
            self.transport.writelines((head, body))
        else:
            self.transport.write(head)
        try:
            return await future
        except BaseException:
            self._head = None
            self.abort()  # given up before the answer (a timeout, a cancelled request)
            raise

    def attach(self, answer: Answer, sink: Sink) -> None:
        if answer is not self._answer:
            sink.failed(AnswerBroken("the answer is over"))
            return
        pending, self._pending = self._pending, []
        for data in pending:
            sink.body(data)
        if pending and not self._whole:
            sink.flush()
        if self._whole:
            sink.end()
            self.done_with(answer)
        elif self._error is not None or self.closed:
            sink.failed(self._error or AnswerBroken("the connection was closed"))
        else:
            self._sink = sink

    def pause(self, answer: Answer) -> None:
        if answer is self._answer and not self._paused and not self.closed:
            self._paused = True
            self.transport.pause_reading()

    def resume(self, answer: Answer) -> None:
        if answer is self._answer:
            self._resume()

    def _resume(self) -> None:
        if self._paused and not self.closed:
            self._paused = False
            self._last_read = self.loop.time()  # a wait for the client is not the backend's silence
            self.transport.resume_reading()

    def done_with(self, answer: Answer | None) -> None:
        if answer is None or answer is not self._answer:
            return
        self._answer = None
        self._sink = None
        self._pending = []
        self.served += 1
        if self._whole and self._keep_alive and not self.closed:
            self._resume()  # paused as its last bytes came: nothing more is due on it
            self.pool.release(self)
        else:
            self.abort()

    def _broke(self, detail: str) -> None:
        head = self._head
        if head is not None:
            self._head = None
            if not head.done():
                head.set_exception(ConnectionBroken(detail, reused=self.served > 0))
            self.abort()
            return
        if self._answer is not None and not self._whole:
            error = self._error = AnswerBroken(detail)
            sink, self._sink = self._sink, None
            if sink is not None:
                # What came before the break goes on, then the break (a sink that already failed
                # here was logged where it failed).
                with contextlib.suppress(Exception):
                    sink.flush()
                sink.failed(error)
        self.abort()

    def _arm_timer(self, after: float) -> None:
        self._timer = self.loop.call_later(after, self._check_silence)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _check_silence(self) -> None:
        """The read timeout, counted from the last bytes received (a timer per answer, not per
        chunk: each chunk only notes its time)."""
        self._timer = None
        if self._answer is None or self._whole or self.closed:
            return
        timeout = self.pool.read_timeout
        silent = self.loop.time() - self._last_read
        if self._paused or silent < timeout:
            self._arm_timer(timeout if self._paused else timeout - silent)
            return
        error = self._error = AnswerSilent(f"the backend sent nothing for {timeout:g}s")
        sink, self._sink = self._sink, None
        if sink is not None:
            sink.failed(error)
        self.abort()

    def abort(self) -> None:
        if not self.closed:
            self.closed = True
            self.pool.forget(self)
            self._cancel_timer()
            if self.transport is not None:
                self.transport.abort()
