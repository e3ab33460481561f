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

Behind a company proxy (`route` gives a `Tunnel` for an origin) a connection is a `CONNECT
host:port` tunnel through the proxy (plain TCP, or TLS to an https proxy), and TLS to the backend
inside it: the backend sees the same bytes as without the proxy. The backend's host is still
resolved and checked first (`resolve`: the egress rules are about where the request goes, never
about the proxy, which is the admin's); a proxy's refusal of the tunnel is a ConnectFailed naming
its status.
"""

from __future__ import annotations

import asyncio
import re
import ssl
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import cast

from llmkube.router.http.backend import (
    Answer,
    AnswerBroken,
    AnswerSilent,
    BackendConnection,
    ConnectFailed,
    ConnectionBroken,
    Origin,
    Sink,
)
from llmkube.router.http.messages import encode

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
    "Route",
    "Sink",
    "Tunnel",
]

#: (host, port) -> the addresses to connect to, each checked (raises to refuse)
Resolve = Callable[[str, int], Awaitable[list[tuple[str, int]]]]


@dataclass(frozen=True)
class Tunnel:
    """Connect through this proxy (`CONNECT`); `authorization`: its Proxy-Authorization, if any."""

    proxy: Origin
    authorization: str = ""


#: origin -> the proxy to reach it through, or None to connect directly
Route = Callable[[Origin], "Tunnel | None"]
#: the longest proxy answer to a CONNECT read (its head)
_TUNNEL_HEAD_LIMIT = 16 * 1024
_STATUS_LINE = re.compile(rb"^HTTP/1\.[01] (\d{3})")


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


class _HandshakeFailed(ConnectFailed):
    """The proxy's answer to CONNECT never came whole (closed, too large)."""


class _TunnelHandshake(asyncio.Protocol):
    """The proxy's answer to CONNECT: its head, then the connection is handed to the backend's."""

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self._buffer = b""
        self._done: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    async def answer(self, request: bytes) -> bytes:
        assert self._transport is not None
        self._transport.write(request)
        return await self._done

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        end = self._buffer.find(b"\r\n\r\n")
        if self._done.done():
            return
        if end >= 0:
            # (a proxy sends nothing after its head until the client speaks: TLS, or the request)
            self._done.set_result(self._buffer[: end + 4])
        elif len(self._buffer) > _TUNNEL_HEAD_LIMIT:
            self._done.set_exception(_HandshakeFailed("the proxy's answer to CONNECT is too large"))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._done.done():
            self._done.set_exception(
                _HandshakeFailed(f"the proxy closed the connection ({exc or 'no answer'})")
            )


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
        route: Route | None = None,
    ) -> None:
        self.keepalive = keepalive
        self.read_timeout = read_timeout
        self.connect_timeout = connect_timeout
        self._resolve = resolve
        self._route = route
        self._ssl = ssl_context
        self._idle: dict[Origin, list[BackendConnection]] = {}
        self._open: set[BackendConnection] = set()
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

    def _reuse(self, origin: Origin) -> BackendConnection | None:
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

    async def _connect(self, origin: Origin) -> BackendConnection:
        loop = asyncio.get_running_loop()
        if self._resolve is not None:
            addresses = await self._resolve(origin.host, origin.port)
        else:
            addresses = [(origin.host, origin.port)]
        tunnel = self._route(origin) if self._route is not None else None
        if tunnel is not None:
            return await self._through(tunnel, origin)
        failure: OSError | None = None
        for host, port in addresses:
            try:
                async with asyncio.timeout(self.connect_timeout):
                    _, connection = await loop.create_connection(
                        lambda: BackendConnection(self, origin),
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

    async def _through(self, tunnel: Tunnel, origin: Origin) -> BackendConnection:
        """A connection to `origin` in a CONNECT tunnel through `tunnel.proxy`."""
        loop = asyncio.get_running_loop()
        proxy = tunnel.proxy
        where = f"{origin.host}:{origin.port} through the proxy {proxy.host}:{proxy.port}"
        host = f"[{origin.host}]" if ":" in origin.host else origin.host
        authority = f"{host}:{origin.port}"
        head = f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n"
        if tunnel.authorization:
            head += f"Proxy-Authorization: {tunnel.authorization}\r\n"
        transport: asyncio.BaseTransport | None = None
        try:
            async with asyncio.timeout(self.connect_timeout):
                transport, handshake = await loop.create_connection(
                    _TunnelHandshake,
                    proxy.host,
                    proxy.port,
                    ssl=self._tls() if proxy.tls else None,
                    server_hostname=proxy.host if proxy.tls else None,
                )
                answer = await handshake.answer(encode(head + "\r\n"))
                status = _STATUS_LINE.match(answer)
                if status is None or status.group(1) != b"200":
                    code = status.group(1).decode() if status is not None else "no HTTP"
                    raise ConnectFailed(f"cannot connect to {where}: the proxy answered {code} to CONNECT")
                connection = BackendConnection(self, origin)
                if origin.tls:
                    tls = await loop.start_tls(
                        cast(asyncio.WriteTransport, transport),
                        connection,
                        self._tls(),
                        server_hostname=origin.host,
                    )
                    if tls is None:
                        raise ConnectFailed(f"cannot connect to {where}: no TLS inside the tunnel")
                    transport = tls
                else:
                    transport.set_protocol(connection)
                connection.connection_made(transport)
        except TimeoutError:
            if transport is not None:
                transport.close()
            raise ConnectFailed(f"no connection to {where} within {self.connect_timeout:g}s") from None
        except OSError as error:
            if transport is not None:
                transport.close()
            if isinstance(error, ConnectFailed) and not isinstance(error, _HandshakeFailed):
                raise
            raise ConnectFailed(f"cannot connect to {where}: {error.strerror or error}") from error
        self._open.add(connection)
        return connection

    def _tls(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = ssl.create_default_context()
        return self._ssl

    def release(self, connection: BackendConnection) -> None:
        if self.closed:
            connection.abort()
            return
        connection.idle_since = connection.loop.time()
        self._idle.setdefault(connection.origin, []).append(connection)
        if self._sweep is None:
            self._sweep = connection.loop.call_later(self.keepalive, self._sweep_idle)

    def forget(self, connection: BackendConnection) -> None:
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
