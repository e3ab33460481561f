"""Shadow copies (`strategy: shadow`): each backend of the route but the first gets a copy of the
request, whose answer is read to its end and dropped; its tokens count in the metrics and the
budgets (held by no reservation: the copy never delays or refuses the request). At most
`MAX_SHADOWS` are in flight: beyond, a copy is dropped (shadows never queue)."""

from __future__ import annotations

import asyncio

from llmkube.plan.router import (
    Admission,
    Backend,
    StreamUsage,
    Usage,
    choose,
    estimate,
    header_timeout,
    upstream_body,
    upstream_url,
    usage_of_body,
)
from llmkube.router.http import Answer, AnswerBroken
from llmkube.router.metrics import RouterMetrics
from llmkube.router.sending import Outgoing, Sender

__all__ = ["MAX_SHADOWS", "Shadows"]

#: shadow copies in flight at most (beyond, a copy is dropped: shadows never queue)
MAX_SHADOWS = 64
#: a shadow's non-streamed answer is kept this far to read its usage (an answer is small; an
#: embedding's vectors beyond this are counted, not kept)
SHADOW_BODY_KEPT = 1 << 20


class Shadows:
    def __init__(self, sender: Sender, metrics: RouterMetrics) -> None:
        self.sender = sender
        self.metrics = metrics
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, admission: Admission, outgoing: Outgoing, backend: Backend) -> bool:
        """A copy of the request to `backend`; False when too many are in flight (it is dropped)."""
        if len(self._tasks) >= MAX_SHADOWS:
            self.metrics.shadow(backend.name, "dropped")
            return False
        task = asyncio.get_running_loop().create_task(self._copy(admission, outgoing, backend))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _copy(self, admission: Admission, outgoing: Outgoing, backend: Backend) -> None:
        sender, state, parsed = self.sender, self.sender.state, admission.parsed
        body, _ = upstream_body(parsed, outgoing.raw, model=backend.model if backend.external else None)
        headers = sender.headers(outgoing, backend)
        timeout = header_timeout(admission.decision.rule, backend, admission.config.header_timeout)
        if backend.external:
            target, url = backend.name, upstream_url(backend.url or "", outgoing.path)
        else:
            candidates = state.usable_endpoints(backend, state.clock())
            chosen = choose(candidates, state.in_flight, key=None, turn=state.next_turn())
            if chosen is None:
                self.metrics.shadow(backend.name, "failed")
                return
            target, url = chosen, f"http://{chosen}{outgoing.path}"
        state.request_began(target)
        try:
            sent = await sender.send(backend, url, body, headers, timeout)
            if not isinstance(sent, Answer) or sent.status >= 500:
                self.metrics.shadow(backend.name, "failed")
                if isinstance(sent, Answer):
                    sent.close()
                return
            try:
                discarded = Discard(sent.loop, stream=sent.content_type == "text/event-stream")
                sent.stream(discarded)
                await discarded.done
                follower = discarded.follower
                usage = (
                    follower.usage
                    or discarded.usage
                    or estimate(len(parsed.prompt_text()), follower.content_events or discarded.size // 16)
                )
                self.metrics.shadow(backend.name, "ok")
                usd = usage.cost(backend.prompt_usd, backend.completion_usd)
                self.metrics.used(backend.name, usage.prompt, usage.completion, usd)
                state.budgets.record(admission.applicable, usage.total, usd, state.clock())
            except AnswerBroken:
                self.metrics.shadow(backend.name, "failed")
            finally:
                sent.close()
        finally:
            state.request_ended(target)


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
