"""A stream on its way: from the backend's connection to the client's, chunk by chunk, in the
backend connection's callbacks (no task wakes per chunk), with its usage followed."""

from __future__ import annotations

import asyncio

from llmkube.plan.router import StreamUsage
from llmkube.router.http import Answer, AnswerBroken, AnswerSilent, Headers, Responder
from llmkube.router.trace import Trace

__all__ = ["ClientGone", "StreamRelay", "UpstreamReset"]


class StreamRelay:
    """A stream from the backend's connection to the client's, in the backend connection's
    callbacks (no task wakes per chunk). What one read from the backend holds (one chunk or
    several) goes to the client in one write once it has been through the usage follower, as it
    arrived: nothing is held back for later. `run()` waits for the stream's end."""

    __slots__ = ("done", "follower", "headers", "held", "pending", "responder", "status", "trace", "upstream")

    def __init__(
        self, responder: Responder, upstream: Answer, headers: Headers, follower: StreamUsage, trace: Trace
    ) -> None:
        self.responder = responder
        self.trace = trace
        self.upstream = upstream
        self.status = upstream.status
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
        self.responder.start(self.status, self.headers, first)
        if first:
            self.trace.sent_first_byte()

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
        elif self.trace.first_byte is None:
            self.trace.sent_first_byte()
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
        elif last:
            self.trace.sent_first_byte()
        self.responder.end(last)
        self.done.set_result(None)

    def failed(self, error: AnswerBroken) -> None:
        if not self.done.done():
            detail = "the stream went silent" if isinstance(error, AnswerSilent) else str(error)
            self.done.set_exception(UpstreamReset(detail))


class ClientGone(Exception):
    """A write to the client failed: its connection is closing."""


class UpstreamReset(Exception):
    """The backend's answer broke: before the client got a byte (the responder has not started),
    or after."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail
