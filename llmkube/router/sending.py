"""A request on its way to one backend: the headers it carries (the client's that may pass, with the
router's own: the request id, the pod's server key, the provider's key), one send within its header
timeout, and the race for a pod that leaves before it answers.

The race: when a pod leaves its Service's ready endpoints (it is being deleted) before the answer's
head, the same request goes to another ready pod alongside, the first answer that is not a 5xx is
used and the other one dropped. Without the drain annotation llama-server, on SIGTERM, stops
generating but holds the connections of the requests it had until the kubelet kills it (the grace
period, 30 s by default), so waiting for it costs that long; with the annotation it finishes them,
and dropping its work would cost a second generation's time. From here both are an endpoint that is
no longer ready."""

from __future__ import annotations

import asyncio
import functools

import structlog

from llmkube.api.constants import SERVER_KEY_SECRET_KEY as SERVER_KEY
from llmkube.plan.router import Backend, Failed, auth_headers, choose, forwarded
from llmkube.plan.router.value import value
from llmkube.router.http import Answer, ConnectFailed, ConnectionBroken, Headers, InvalidHeader
from llmkube.router.secrets import SecretFiles
from llmkube.router.state import RouterState
from llmkube.router.trace import Trace
from llmkube.router.upstream import EgressRefused, Upstreams

__all__ = ["Outgoing", "Sender"]

log = structlog.get_logger("llmkube.router.sending")

Sent = Answer | Failed


@value
class Outgoing:
    """The client's request as it may go to backends."""

    path: str
    #: the client's headers, as received
    headers: Headers
    request_id: str
    raw: bytes
    #: the spec's classification header (a routing label a cloud backend does not get)
    classification_header: str


class Sender:
    def __init__(
        self,
        state: RouterState,
        upstreams: Upstreams,
        *,
        credentials: SecretFiles,
        server_keys: SecretFiles | None,
    ) -> None:
        self.state = state
        self.upstreams = upstreams
        self.credentials = credentials
        #: the InferenceService backends' server keys (a metal service's host servers ask for them)
        self.server_keys = server_keys

    def headers(self, outgoing: Outgoing, backend: Backend) -> Headers:
        private = backend.external and backend.tier == "cloud"
        headers = forwarded(
            outgoing.headers,
            outgoing.request_id,
            private=private,
            classification_header=outgoing.classification_header,
        )
        if backend.inference_service and self.server_keys is not None:
            server_key = self.server_keys.value(backend.inference_service, SERVER_KEY)
            if server_key:
                headers.append(("Authorization", f"Bearer {server_key}"))
        if backend.external:
            key = (
                self.credentials.value(backend.credentials_secret, backend.credential_key)
                if backend.credentials_secret and backend.credential_key
                else None
            )
            headers.extend(auth_headers(backend.provider, key).items())
        return headers

    async def send(self, backend: Backend, url: str, body: bytes, headers: Headers, wait: float) -> Sent:
        """The request to `url`, and its answer's head within `wait` seconds (or what failed)."""
        try:
            async with asyncio.timeout(wait):
                return await self.upstreams.send(url, "POST", headers, body, external=backend.external)
        except TimeoutError:
            return Failed(backend.name, "timeout", f"no answer within {wait:g}s")
        except (EgressRefused, InvalidHeader) as refused:
            return Failed(backend.name, "refused", str(refused))
        except ConnectFailed as error:
            # A new connection that could not be made: the endpoint's own verdict.
            return Failed(backend.name, "connect", str(error))
        except ConnectionBroken as error:  # on a new connection, or a reused one's second try
            return Failed(backend.name, "disconnected", str(error))
        except OSError as error:  # the name did not resolve
            return Failed(backend.name, "connect", str(error) or type(error).__name__)

    async def send_to_pod(
        self,
        backend: Backend,
        target: str,
        outgoing: Outgoing,
        body: bytes,
        headers: Headers,
        wait: float,
        trace: Trace,
    ) -> tuple[Sent, str]:
        """The request to the pod at `target`, and the pod that answers it (the race above)."""
        state = self.state
        path = outgoing.path
        url = f"http://{target}{path}"
        if len(state.endpoints_of(backend)) < 2:  # no other pod to go to (and no task to make)
            return await self.send(backend, url, body, headers, wait), target
        loop = asyncio.get_running_loop()
        first = loop.create_task(self.send(backend, url, body, headers, wait))
        leaving = state.leaving(target)
        second: asyncio.Task[Sent] | None = None
        other = ""
        won: asyncio.Task[Sent] | None = None  # None: the client left, both are dropped
        try:
            # One future wakes this request for either event (its answer's head, its pod leaving):
            # a callback costs a third of what asyncio.wait does, on every request to such a backend.
            first.add_done_callback(functools.partial(_resolve, leaving))
            await leaving
            if not first.done():
                now = state.clock()
                others = state.usable_endpoints(backend, now, excluding=(target,))
                chosen = choose(others, state.in_flight, key=None, turn=state.next_turn())
                if chosen is not None and state.quarantine.acquire(chosen, now):
                    other = chosen
                    state.request_began(other)
                    trace.tried.append(backend.name)
                    log.info(
                        "pod left before answering: the request goes to another pod too",
                        request_id=outgoing.request_id,
                        backend=backend.name,
                        endpoint=target,
                        also=other,
                    )
                    second = loop.create_task(
                        self.send(backend, f"http://{other}{path}", body, headers, wait)
                    )
            if second is not None:
                won = await _first_answer(first, second)
            else:
                await first
                won = first
            return won.result(), target if won is first else other
        finally:
            state.stay(target, leaving)
            for task in (first, second):
                if task is not None and task is not won:
                    _drop(task)
            if second is not None:
                # The caller settles the pod that answered (its count, its verdict), or `target`
                # when none did: the other one is settled here.
                settled = target if won is second else other
                state.request_ended(settled)
                state.quarantine.abandoned(settled, state.clock())


async def _first_answer(first: asyncio.Task[Sent], second: asyncio.Task[Sent]) -> asyncio.Task[Sent]:
    """The first of two sends to bring an answer that is not a 5xx (the first one when neither does)."""
    pending: set[asyncio.Task[Sent]] = {first, second}
    while pending:
        done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        for task in sorted(done, key=lambda t: t is not first):
            result = task.result()
            if isinstance(result, Answer) and result.status < 500:
                return task
    return first


def _resolve(future: asyncio.Future[None], _: object) -> None:
    if not future.done():
        future.set_result(None)


def _drop(task: asyncio.Task[Sent]) -> None:
    """A send whose answer is not wanted: cancelled (its connection aborted), or its answer closed."""
    if not task.done():
        task.cancel()
        return
    if not task.cancelled() and task.exception() is None:
        result = task.result()
        if isinstance(result, Answer):
            result.close()
