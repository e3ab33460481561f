"""Sends a level's requests: N workers in a closed loop, each sending its next request as soon as
the previous answer ends, until the level's duration or request count is reached (requests in
flight then finish, within --timeout). Every answer is read to its end as it arrives; the only
work per streamed line is one JSON parse (orjson), so one core keeps up with thousands of tokens
per second (bench/bench_benchmark_overhead.py measures it against a stand-in that answers at once).

llama-server closes the connection after every streamed answer without saying so (no
`Connection: close`; its `Keep-Alive` header says the opposite), so the next request on that
pooled connection fails to be written, or finds it closed before any answer. Such a request never
reached the server: it is sent again on another connection, as browsers and HTTP libraries do with
a stale keep-alive connection. A failure on a fresh connection is an error and counted as one.
"""

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp
import orjson

from llmkube.sources import read_bounded
from llmkube.usercli.benchmark.sse import StreamState, answer_tokens
from llmkube.usercli.benchmark.stats import (
    BAD_RESPONSE,
    CONNECT,
    DISCONNECTED,
    INCOMPLETE,
    TIMEOUT,
    RequestRecord,
    http_error,
    server_message,
)

JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
# An error answer is read (so the connection can be reused) up to this much.
ERROR_BODY_LIMIT = 64 * 1024
# Stale pooled connections one request may find before it gets a fresh one: at most one per
# connection in the pool, and the pool holds at most the level's concurrency; this bounds the worst.
MAX_STALE_RETRIES = 64


@dataclass(frozen=True)
class Level:
    concurrency: int
    duration: float | None  # seconds, or
    requests: int | None  # a request count
    timeout: float  # seconds for one request, from send to the end of the answer


@dataclass
class LiveCounts:
    """What the progress line shows while a level runs."""

    ok: int = 0
    failed: int = 0
    output_tokens: int = 0
    started: float = 0.0


def connector(*, fresh: bool = False) -> aiohttp.TCPConnector:
    """No pool limit of its own: the level's concurrency is the limit. `fresh`: a connection per
    request, for a port-forward, which cannot tell that the server closed a connection until a
    second later (kube/rest/portforward.py)."""
    return aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, force_close=fresh)


@dataclass
class Attempt:
    """What the session's tracing saw of one attempt: whether it went out on a pooled connection."""

    reused: bool = False


async def _on_reuse(_: object, context: object, __: object) -> None:
    attempt = getattr(context, "trace_request_ctx", None)
    if isinstance(attempt, Attempt):
        attempt.reused = True


def tracing() -> aiohttp.TraceConfig:
    """The session's trace config: marks attempts sent on a reused connection (see one_request)."""
    config: aiohttp.TraceConfig = aiohttp.TraceConfig()
    config.on_connection_reuseconn.append(_on_reuse)
    return config


async def run_level(
    http: aiohttp.ClientSession,
    url: str,
    body: Callable[[int], bytes],
    *,
    stream: bool,
    level: Level,
    live: LiveCounts,
    first_index: int = 0,
) -> list[RequestRecord]:
    """The records of one level; `body(i)` is the i-th request's body (i counts from first_index)."""
    records: list[RequestRecord] = []
    origin = live.started = time.perf_counter()
    deadline = origin + level.duration if level.duration is not None else None
    sent = 0

    async def worker() -> None:
        nonlocal sent
        while True:
            if level.requests is not None and sent >= level.requests:
                return
            if deadline is not None and time.perf_counter() >= deadline:
                return
            index = first_index + sent
            sent += 1
            record = await one_request(
                http, url, body(index), stream=stream, within=level.timeout, origin=origin
            )
            records.append(record)
            if record.ok:
                live.ok += 1
                live.output_tokens += record.output_tokens
            else:
                live.failed += 1

    await asyncio.gather(*(worker() for _ in range(level.concurrency)))
    return records


async def one_request(
    http: aiohttp.ClientSession, url: str, body: bytes, *, stream: bool, within: float, origin: float
) -> RequestRecord:
    started = time.perf_counter()
    first: float | None = None
    last: float | None = None

    def record(
        error: str | None, tokens: int = 0, prompt: int | None = None, detail: str | None = None
    ) -> RequestRecord:
        finished = time.perf_counter()
        return RequestRecord(
            started=started - origin,
            finished=finished - origin,
            error=error,
            first_token=None if first is None else first - started,
            last_token=None if last is None else last - started,
            output_tokens=tokens,
            prompt_tokens=prompt,
            detail=detail,
        )

    try:
        async with asyncio.timeout(within), await _send(http, url, body) as response:
            if response.status >= 400:
                said = server_message(await read_bounded(response.content, ERROR_BODY_LIMIT))
                return record(http_error(response.status), detail=said)
            if not stream:
                try:
                    counted = answer_tokens(orjson.loads(await response.read()))
                except orjson.JSONDecodeError:
                    counted = None
                return record(BAD_RESPONSE) if counted is None else record(None, *counted)
            state = StreamState()
            async for line in response.content:
                if state.feed(line):
                    last = time.perf_counter()
                    first = first or last
            if state.error is not None:
                return record(state.error, detail=state.error_message)
            if not state.finished:
                return record(INCOMPLETE, state.output_tokens, state.prompt_tokens)
            return record(None, state.output_tokens, state.prompt_tokens)
    except TimeoutError:
        return record(TIMEOUT)
    except aiohttp.ClientConnectorError:
        return record(CONNECT)
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError, aiohttp.ClientOSError):
        return record(DISCONNECTED)
    except (aiohttp.ClientResponseError, ValueError):  # a malformed answer; a line beyond aiohttp's limit
        return record(BAD_RESPONSE)


async def _send(http: aiohttp.ClientSession, url: str, body: bytes) -> aiohttp.ClientResponse:
    """The response's headers, sending again when a pooled connection had been closed by the server
    before the request reached it (the module's docstring says why)."""
    for _ in range(MAX_STALE_RETRIES):
        attempt = Attempt()
        try:
            return await http.post(url, data=body, headers=JSON_HEADERS, trace_request_ctx=attempt)
        except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError):
            if not attempt.reused:
                raise
    return await http.post(url, data=body, headers=JSON_HEADERS)
