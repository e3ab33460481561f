"""An answer's body on its way: a stream from the backend's connection to the client's, chunk by
chunk, in the backend connection's callbacks (no task wakes per chunk), with its usage followed; and
a shadow's answer, read to its end and dropped."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from llmkube.plan.router.usage import StreamUsage, Usage, usage_of_body
from llmkube.router.http.client import Answer, AnswerBroken, AnswerSilent
from llmkube.router.http.messages import Headers

if TYPE_CHECKING:
    from llmkube.router.proxy import Exchange

__all__ = ["ClientGone", "Discard", "StreamRelay", "UpstreamReset"]


class StreamRelay:
    """A stream from the backend's connection to the client's, in the backend connection's
    callbacks (no task wakes per chunk). What one read from the backend holds (one chunk or
    several) goes to the client in one write once it has been through the usage follower, as it
    arrived: nothing is held back for later. `run()` waits for the stream's end."""

    __slots__ = ("done", "exchange", "follower", "headers", "held", "pending", "responder", "upstream")

    def __init__(self, exchange: Exchange, upstream: Answer, headers: Headers, follower: StreamUsage) -> None:
        self.exchange = exchange
        self.responder = exchange.responder
        self.upstream = upstream
        self.headers = headers
        self.follower = follower
        #: what the current read of the backend's connection has brought so far
        self.pending: list[bytes] = []
        #: reading from the backend is held while the client drains its buffer
        self.held = False
        self.done: asyncio.Future[None] = upstream.loop.create_future()

    async def run(self) -> None:
        self.upstream.stream(self)
        if not self.responder.started and not self.done.done():
            # The backend sent its head alone (it answers before its first token): the client gets
            # the head now, not with that token.
            self._start(b"")
        await self.done

    def _start(self, first: bytes) -> None:
        self.responder.start(self.exchange.record.status, self.headers, first)
        if first:
            self.exchange.first_byte = time.perf_counter() - self.exchange.started

    def _taken(self) -> bytes:
        pending = self.pending
        data = pending[0] if len(pending) == 1 else b"".join(pending)
        pending.clear()
        return data

    # -- the Sink, called from the backend connection's callbacks ---------------------------------

    def body(self, data: bytes) -> None:
        if self.done.done():
            return
        try:
            out = self.follower.feed(data)
        except Exception as error:  # a defect here must not break the backend's connection silently
            self.done.set_exception(error)
            return
        if out:
            self.pending.append(out)

    def flush(self) -> None:
        if not self.pending or self.done.done():
            return
        data = self._taken()
        responder = self.responder
        if not responder.started:
            self._start(data)
        elif not responder.send(data):
            self.done.set_exception(ClientGone())
            return
        elif self.exchange.first_byte is None:
            self.exchange.first_byte = time.perf_counter() - self.exchange.started
        if responder.writing_paused and not self.held:
            # The client's buffer is full: read no more from the backend until it drains.
            self.held = True
            self.upstream.pause_reading()
            responder.when_drained(self._drained)

    def _drained(self) -> None:
        self.held = False
        self.upstream.resume_reading()

    def end(self) -> None:
        if self.done.done():
            return
        last = self._taken() if self.pending else b""
        if not self.responder.started:
            self._start(last)
            last = b""
        elif last and self.exchange.first_byte is None:
            self.exchange.first_byte = time.perf_counter() - self.exchange.started
        self.responder.end(last)
        self.done.set_result(None)

    def failed(self, error: AnswerBroken) -> None:
        if not self.done.done():
            detail = "the stream went silent" if isinstance(error, AnswerSilent) else str(error)
            self.done.set_exception(UpstreamReset(detail))


class Discard:
    """A shadow's answer: read to its end and dropped, but for its usage (a stream's is followed as
    it goes, an answer is kept, up to a bound, for its own)."""

    __slots__ = ("done", "follower", "kept", "size", "stream", "usage")

    def __init__(self, loop: asyncio.AbstractEventLoop, *, stream: bool) -> None:
        self.stream = stream
        self.follower = StreamUsage(strip_injected=False)
        self.size = 0
        self.kept: list[bytes] = []
        self.usage: Usage | None = None
        self.done: asyncio.Future[None] = loop.create_future()

    def body(self, data: bytes) -> None:
        self.size += len(data)
        if self.stream:
            self.follower.feed(data)
        elif self.size <= SHADOW_BODY_KEPT:
            self.kept.append(data)

    def flush(self) -> None:
        pass

    def end(self) -> None:
        if not self.stream:
            self.usage = usage_of_body(b"".join(self.kept))
        if not self.done.done():
            self.done.set_result(None)

    def failed(self, error: AnswerBroken) -> None:
        if not self.done.done():
            self.done.set_exception(error)


#: a shadow's non-streamed answer is kept this far to read its usage (an answer is small; an
#: embedding's vectors beyond this are counted, not kept)
SHADOW_BODY_KEPT = 1 << 20


class ClientGone(Exception):
    """A write to the client failed: its connection is closing."""


class UpstreamReset(Exception):
    """The backend's answer broke: before the client got a byte (the responder has not started),
    or after."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail
