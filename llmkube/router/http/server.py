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
from collections.abc import Callable

from llmkube.router.http.budget import ByteBudget
from llmkube.router.http.connection import Connection, ErrorBody
from llmkube.router.http.limits import Limits
from llmkube.router.http.responder import Handler, Responder
from llmkube.router.http.stats import ServerStats

__all__ = ["ErrorBody", "Handler", "HttpServer", "Limits", "Responder", "ServerStats"]


def _plain(status: int, message: str) -> tuple[str, bytes]:
    return "text/plain; charset=utf-8", message.encode() + b"\n"


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
        self.connections: set[Connection] = set()
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
            lambda: Connection(self), host, port, backlog=backlog, reuse_address=True
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
