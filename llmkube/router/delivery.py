"""An admitted request delivered: its attempts made in the order admission planned them, the answer
relayed, what happened noted in its `Trace`.

* A request nothing can serve now waits, as long as admission allowed (`Admission.wait`), for a
  backend's Service to get a ready endpoint (between the pods of a rollout); the EndpointSlice
  watch wakes it, and a client that leaves ends the wait (the server cancels its request).
  A backend that sleeps (scale to zero) is woken: the request joins its wake queue, the first one
  held makes the scale write (llmkube.router.waking), and it leaves the queue however it ends.
* A request an InferenceService backend works on is activity on its idle clock while it lasts (a
  stream too), which the routers share (llmkube.plan.router.wake).
* An attempt that fails before the client got a byte (a connect error, a 5xx, no headers within
  the timeout) goes to the next endpoint of the same InferenceService (at most
  `MAX_ENDPOINT_TRIES`), then to the next backend of the route. A pod is chosen per attempt
  (llmkube.plan.router.balancer: the fewest in flight, prefix affinity), and a pod that leaves
  before answering is raced by another (llmkube.router.sending).
* Once a byte has reached the client nothing is retried: a stream that breaks is cut off, so the
  client sees a broken stream, not a spliced one.
* Each attempt gives its endpoint a verdict (llmkube.plan.router.quarantine): a failure quarantines
  it, an answer ends a quarantine, a client that leaves says nothing about it.
* A client that leaves while an attempt is under way leaves that backend in the `Trace` as the one
  working on its request: it is charged for the answer (llmkube.plan.router.outcome, `GONE`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection

import structlog

from llmkube.plan.router import (
    AFFINITY_PREFIX,
    ANSWERED,
    RESET,
    UNSERVED,
    Admission,
    Answered,
    Attempts,
    Backend,
    Failed,
    StreamUsage,
    choose,
    header_timeout,
    plan_attempts,
    returned,
    sleeping,
    upstream_body,
    upstream_url,
)
from llmkube.plan.router.value import value
from llmkube.router.http import Answer, AnswerBroken, AnswerSilent, Headers, Responder
from llmkube.router.metrics import RouterMetrics
from llmkube.router.relay import StreamRelay, UpstreamReset
from llmkube.router.sending import Outgoing, Sender
from llmkube.router.shadows import Shadows
from llmkube.router.trace import Trace
from llmkube.router.waking import Waker

__all__ = ["MAX_ENDPOINT_TRIES", "Delivery"]

log = structlog.get_logger("llmkube.router.delivery")

#: endpoints of one InferenceService tried for one request before the next backend
MAX_ENDPOINT_TRIES = 3


class Delivery:
    def __init__(
        self, sender: Sender, shadows: Shadows, metrics: RouterMetrics, waker: Waker | None = None
    ) -> None:
        self.sender = sender
        self.state = sender.state
        self.shadows = shadows
        self.metrics = metrics
        self.waker = waker or Waker(None, sender.state)

    async def deliver(
        self, admission: Admission, outgoing: Outgoing, responder: Responder, trace: Trace
    ) -> str:
        """How it ended (llmkube.plan.router.outcome): ANSWERED, RESET (a backend's answer broke after
        the client had bytes of it, and the client's connection was cut) or UNSERVED."""
        planned = admission.attempts
        if not planned.order and admission.wait > 0:
            planned = await self._wait(admission, trace)
        config = admission.config
        for name in planned.shadows:
            backend = config.backend(name)
            if backend is not None and self.shadows.start(admission, outgoing, backend):
                trace.shadows = (*trace.shadows, name)
        try:
            for name in planned.order:
                backend = config.backend(name)
                assert backend is not None
                if await self._try_backend(admission, outgoing, backend, responder, trace):
                    return ANSWERED
        except UpstreamReset:
            return RESET
        return UNSERVED

    async def _wait(self, admission: Admission, trace: Trace) -> Attempts:
        state = self.state
        planned = admission.attempts
        started = time.perf_counter()
        deadline = started + admission.wait
        self.metrics.waiting(1)
        joined = self._hold_for_wake(admission)
        try:
            while not planned.order and (left := deadline - time.perf_counter()) > 0:
                if not await state.endpoints_change(left) or state.deleted:
                    break
                planned = plan_attempts(
                    admission.config,
                    admission.decision,
                    state,
                    sensitive=admission.sensitive,
                    draw=admission.draw,
                )
                joined += self._hold_for_wake(admission, already=joined)
        finally:
            self.waker.release(joined)
            self.metrics.waiting(-1)
            trace.waited = time.perf_counter() - started
        return planned

    def _hold_for_wake(self, admission: Admission, already: Collection[str] = ()) -> list[str]:
        """The sleeping backends of its route it now waits for: it joins their wake queues (a
        backend may fall asleep while it waits for it: it joins then)."""
        config, state = admission.config, self.state
        asleep = frozenset(b.name for b in config.backends.values() if not b.external and state.asleep(b))
        if not asleep:
            return []
        names = sleeping(config, admission.decision, asleep, sensitive=admission.sensitive)
        backends = tuple(
            backend
            for name in names
            if (backend := config.backend(name)) is not None and backend.inference_service not in already
        )
        return self.waker.hold(backends)

    async def _try_backend(
        self, admission: Admission, outgoing: Outgoing, backend: Backend, responder: Responder, trace: Trace
    ) -> bool:
        """Whether the backend answered (the answer is then on its way to the client, or there)."""
        state = self.state
        parsed = admission.parsed
        body, injected = upstream_body(
            parsed, outgoing.raw, model=backend.model if backend.external else None
        )
        headers = self.sender.headers(outgoing, backend)
        timeout = header_timeout(admission.decision.rule, backend, admission.config.header_timeout)
        attempt = _Attempt(admission, outgoing, backend, body, headers, timeout, injected, responder, trace)
        if backend.external:
            if not state.quarantine.acquire(backend.name, state.clock()):
                return False
            return await self._attempt(attempt, backend.name, upstream_url(backend.url or "", outgoing.path))
        tried: set[str] = set()
        key: bytes | None = None  # the prompt's prefix, read only where there is a choice
        for _ in range(MAX_ENDPOINT_TRIES):
            now = state.clock()
            candidates = state.usable_endpoints(backend, now, excluding=tried)
            if key is None and len(candidates) > 1:
                key = parsed.affinity_key(AFFINITY_PREFIX)
            endpoint = choose(candidates, state.in_flight, key=key or None, turn=state.next_turn())
            if endpoint is None:
                return False
            tried.add(endpoint)
            if not state.quarantine.acquire(endpoint, now):
                continue
            if await self._attempt(attempt, endpoint, None):
                return True
        return False

    async def _attempt(self, attempt: _Attempt, target: str, url: str | None) -> bool:
        """One attempt at `target` (a pod, or an external backend at `url`): whether it served."""
        state, trace, backend = self.state, attempt.trace, attempt.backend
        trace.tried.append(backend.name)
        state.request_began(target)
        upstream: Answer | None = None
        verdict: bool | None = None  # None: no verdict (the client left)
        left = False  # the client went away while this backend had its request
        trace.working = backend
        if not backend.external:
            self.waker.began(backend)
        try:
            if url is not None:
                sent = await self.sender.send(backend, url, attempt.body, attempt.headers, attempt.timeout)
            else:
                sent, target = await self.sender.send_to_pod(
                    backend, target, attempt.outgoing, attempt.body, attempt.headers, attempt.timeout, trace
                )
            if isinstance(sent, Answer) and sent.status >= 500:
                upstream = sent  # closed below
                sent = Failed(backend.name, "5xx", f"{sent.status} {sent.reason}".strip())
            if isinstance(sent, Failed):
                verdict = False
                self._failed(attempt, target, sent)
                return False
            upstream = sent
            verdict = True
            state.record_latency(backend.name, time.perf_counter() - trace.started)
            endpoint = backend.url if backend.external else target
            trace.answered = Answered(backend, endpoint, upstream.status)
            try:
                await self._relay(attempt, upstream)
                return True
            except UpstreamReset as reset:
                verdict = False
                self._failed(attempt, target, Failed(backend.name, "reset", reset.detail))
                if attempt.responder.started:
                    # Part of the answer reached the client: cut its connection, so it sees a
                    # broken stream (nothing is tried again).
                    attempt.responder.abort()
                    raise
                trace.answered = trace.stream = None
                return False  # the client has not had a byte yet: the next attempt may serve it
        except asyncio.CancelledError:
            left = True  # the server cancels a request whose client went away
            raise
        finally:
            if trace.stream is None and not left:
                # The backend stays the one working on the request when the client left while it
                # made or sent the answer (a stream: it is charged what it was sent; a whole answer:
                # what it was admitted for, as how far the backend got is not known), so hanging up
                # never makes an answer free; an attempt that ended otherwise hands the request on.
                trace.working = None
            state.request_ended(target)
            if not backend.external:
                self.waker.ended(backend)
            now = state.clock()
            if verdict is True:
                state.quarantine.succeeded(target, now)
            elif verdict is None:
                state.quarantine.abandoned(target, now)
            if upstream is not None:
                upstream.close()

    async def _relay(self, attempt: _Attempt, upstream: Answer) -> None:
        trace, responder = attempt.trace, attempt.responder
        rule = attempt.admission.facts.rule or ""
        headers = returned(upstream.headers, attempt.outgoing.request_id, attempt.backend.name, rule)
        if upstream.content_type == "text/event-stream":
            follower = trace.stream = StreamUsage(strip_injected=attempt.injected)
            await StreamRelay(responder, upstream, headers, follower, trace).run()
            return
        try:
            body = await upstream.read()
        except AnswerSilent:
            raise UpstreamReset("the answer went silent") from None
        except AnswerBroken as error:
            raise UpstreamReset(str(error)) from None
        trace.sent_first_byte()
        trace.body = body
        responder.respond(upstream.status, headers, body)

    def _failed(self, attempt: _Attempt, target: str, failure: Failed) -> None:
        self.state.quarantine.failed(target, self.state.clock())
        self.metrics.failed(failure.backend, failure.reason)
        attempt.trace.failures.append(failure)
        log.info(
            "attempt failed",
            request_id=attempt.outgoing.request_id,
            backend=failure.backend,
            endpoint=target,
            reason=failure.reason,
            detail=failure.detail,
        )


@value
class _Attempt:
    """One backend's attempts at a request: what goes to it, and where the answer goes."""

    admission: Admission
    outgoing: Outgoing
    backend: Backend
    body: bytes
    headers: Headers
    timeout: float
    #: the router asked for the stream's usage chunk (the client did not: it is taken out)
    injected: bool
    responder: Responder
    trace: Trace
