"""The router's connections to backends: a pool per origin (plain HTTP to pods, TLS to providers),
one request at a time on each connection, the answer parsed by llhttp.

An answer's body goes to a `Sink` as it arrives (a stream: each chunk is a callback, no task wakes
for it), or is read whole (`Answer.read`). A connection goes back to its pool once its answer is
whole and both sides meant to keep it; otherwise it is closed. What can go wrong, by type:

* ConnectFailed: no connection could be made (refused, unreachable, no answer to the handshake);
* ConnectionBroken: a connection was made (or taken from the pool) and ended before the answer's
  head was whole: most often a kept-alive connection the backend closed just as the request went out
  (`Pool.send` then tries once more on a new connection);
* AnswerBroken: the answer's body was cut (a reset, a close before its end, malformed framing, or
  silence longer than the idle timeout: AnswerSilent).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import ssl
from collections.abc import Awaitable, Callable, Iterable
from typing import NamedTuple, Protocol, cast

import httptools
import structlog

from llmkube.router.http.messages import Headers, decode, encode

__all__ = [
    "Answer",
    "AnswerBroken",
    "AnswerSilent",
    "ConnectFailed",
    "ConnectionBroken",
    "InvalidHeader",
    "Origin",
    "Pool",
    "Resolve",
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


#: (host, port) -> the addresses to connect to, each checked (raises to refuse)
Resolve = Callable[[str, int], Awaitable[list[tuple[str, int]]]]


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


class Answer:
    """A backend's answer, from its head on. `close()` when done with it, whatever happened."""

    __slots__ = ("_connection", "headers", "reason", "status")

    def __init__(self, connection: _Connection, status: int, headers: Headers) -> None:
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


class _Connection(asyncio.Protocol):
    def __init__(self, pool: Pool, origin: Origin) -> None:
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


class InvalidHeader(ValueError):
    """A header the router was to send has a line break or NUL in it (a Secret's value, say)."""


_BREAK = re.compile("[\r\n\0]")


def request_head(
    method: str, target: str, host: str, headers: Iterable[tuple[str, str]], length: int
) -> bytes:
    lines = [encode(f"{method} {target} HTTP/1.1\r\nHost: {host}\r\n")]
    for name, value in headers:
        line = f"{name}: {value}"
        if _BREAK.search(line):
            raise InvalidHeader(f"the header {name!r} has a line break or NUL in it")
        lines.append(encode(line + "\r\n"))
    if length or method in ("POST", "PUT", "PATCH"):
        lines.append(b"Content-Length: %d\r\n" % length)
    lines.append(b"\r\n")
    return b"".join(lines)


class Pool:
    """Connections to any number of origins, kept alive `keepalive` seconds when idle. No limit on
    their number: a backend's concurrency is its own, and a limit here would queue requests inside
    the router where no metric shows them."""

    def __init__(
        self,
        *,
        keepalive: float,
        read_timeout: float,
        connect_timeout: float = 10.0,
        resolve: Resolve | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.keepalive = keepalive
        self.read_timeout = read_timeout
        self.connect_timeout = connect_timeout
        self._resolve = resolve
        self._ssl = ssl_context
        self._idle: dict[Origin, list[_Connection]] = {}
        self._open: set[_Connection] = set()
        self._sweep: asyncio.TimerHandle | None = None
        self.closed = False

    async def send(
        self, origin: Origin, method: str, target: str, headers: Iterable[tuple[str, str]], body: bytes = b""
    ) -> Answer:
        """The request on a kept-alive connection if there is one; when that connection broke before
        a byte of the answer (the backend had closed it as the request went out, so never read
        it), once more on a new connection, whose outcome is the verdict."""
        head = request_head(method, target, origin.host_header, headers, len(body))
        connection = self._reuse(origin)
        if connection is not None:
            try:
                return await connection.exchange(head, body)
            except ConnectionBroken:
                pass
        connection = await self._connect(origin)
        return await connection.exchange(head, body)

    def _reuse(self, origin: Origin) -> _Connection | None:
        idle = self._idle.get(origin)
        if not idle:
            return None
        now = idle[-1].loop.time()
        while idle:
            connection = idle.pop()
            if not idle:
                del self._idle[origin]
            if not connection.closed and now - connection.idle_since < self.keepalive:
                return connection
            connection.abort()
        return None

    async def _connect(self, origin: Origin) -> _Connection:
        loop = asyncio.get_running_loop()
        if self._resolve is not None:
            addresses = await self._resolve(origin.host, origin.port)
        else:
            addresses = [(origin.host, origin.port)]
        failure: OSError | None = None
        for host, port in addresses:
            try:
                async with asyncio.timeout(self.connect_timeout):
                    _, connection = await loop.create_connection(
                        lambda: _Connection(self, origin),
                        host,
                        port,
                        ssl=self._tls() if origin.tls else None,
                        server_hostname=origin.host if origin.tls else None,
                    )
            except TimeoutError:
                failure = ConnectFailed(f"no connection to {host}:{port} within {self.connect_timeout:g}s")
            except OSError as error:
                failure = error
            else:
                self._open.add(connection)
                return connection
        if isinstance(failure, ConnectFailed):
            raise failure
        detail = f"{failure.strerror or failure}" if failure is not None else "no address"
        raise ConnectFailed(f"cannot connect to {origin.host}:{origin.port}: {detail}") from failure

    def _tls(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = ssl.create_default_context()
        return self._ssl

    def release(self, connection: _Connection) -> None:
        if self.closed:
            connection.abort()
            return
        connection.idle_since = connection.loop.time()
        self._idle.setdefault(connection.origin, []).append(connection)
        if self._sweep is None:
            self._sweep = connection.loop.call_later(self.keepalive, self._sweep_idle)

    def forget(self, connection: _Connection) -> None:
        self._open.discard(connection)
        idle = self._idle.get(connection.origin)
        if idle and connection in idle:
            idle.remove(connection)
            if not idle:
                del self._idle[connection.origin]

    def _sweep_idle(self) -> None:
        """Close the connections idle for `keepalive` (so they do not linger until reused)."""
        self._sweep = None
        now = asyncio.get_running_loop().time()
        for connections in list(self._idle.values()):
            for connection in [c for c in connections if now - c.idle_since >= self.keepalive]:
                connection.abort()
        if self._idle:
            self._sweep = asyncio.get_running_loop().call_later(self.keepalive, self._sweep_idle)

    @property
    def open_connections(self) -> int:
        return len(self._open)

    async def close(self) -> None:
        self.closed = True
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for connection in list(self._open):
            connection.abort()
        self._idle.clear()
