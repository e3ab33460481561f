"""What delivery sees of one request as it goes: the backends it tried, the attempts that failed, the
answer being relayed, when its first byte went out. Only what was seen is noted here, as it is
seen (a client may leave at any moment, and what it is charged depends on how far the request got);
once the request is over it is handed on as a value (`observed`), and what it comes to (status,
tokens, cost, the audit line) is llmkube.plan.router.outcome's to say."""

from __future__ import annotations

import time

from llmkube.plan.router import Answered, Backend, Failed, Observed, StreamUsage

__all__ = ["Trace"]


class Trace:
    __slots__ = (
        "answered",
        "body",
        "failures",
        "first_byte",
        "shadows",
        "started",
        "stream",
        "tried",
        "waited",
        "working",
    )

    def __init__(self, started: float) -> None:
        #: perf_counter() when the request arrived
        self.started = started
        self.tried: list[str] = []
        self.failures: list[Failed] = []
        #: the answer on its way to the client (None again when it broke before the client had a byte)
        self.answered: Answered | None = None
        #: the backend working on the request now
        self.working: Backend | None = None
        #: the stream being relayed, followed for its usage
        self.stream: StreamUsage | None = None
        #: a whole answer's body, as sent to the client
        self.body: bytes | None = None
        self.first_byte: float | None = None
        self.waited: float | None = None
        self.shadows: tuple[str, ...] = ()

    def sent_first_byte(self) -> None:
        if self.first_byte is None:
            self.first_byte = time.perf_counter() - self.started

    def observed(self, end: str, *, started: bool) -> Observed:
        """What was seen, as a value; `started`: the client had a byte of an answer."""
        stream = self.stream
        return Observed(
            end,
            tuple(self.tried),
            tuple(self.failures),
            self.answered,
            self.working,
            self.body,
            stream.usage if stream is not None else None,
            stream.content_events if stream is not None else None,
            started,
            self.first_byte,
            self.waited,
            self.shadows,
        )
