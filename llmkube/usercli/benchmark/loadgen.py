"""Sends a level's requests: N workers in a closed loop, each sending its next request as soon as
the previous answer ends, until the level's duration or request count is reached (requests in
flight then finish, within --timeout). Every answer is read to its end as it arrives; the only
work per streamed line is one JSON parse (orjson), so one core keeps up with thousands of tokens
per second (bench/bench_benchmark_overhead.py measures it against a stand-in that answers at once).
"""

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp
import orjson

from llmkube.usercli.benchmark.sse import StreamState, answer_tokens
from llmkube.usercli.benchmark.stats import (
    BAD_RESPONSE,
    CONNECT,
    DISCONNECTED,
    INCOMPLETE,
    TIMEOUT,
    RequestRecord,
    http_error,
)

JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
# An error answer is read (so the connection can be reused) up to this much.
ERROR_BODY_LIMIT = 64 * 1024


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


def connector() -> aiohttp.TCPConnector:
    # No pool limit of its own: the level's concurrency is the limit.
    return aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)


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

    def record(error: str | None, tokens: int = 0, prompt: int | None = None) -> RequestRecord:
        finished = time.perf_counter()
        return RequestRecord(
            started=started - origin,
            finished=finished - origin,
            error=error,
            first_token=None if first is None else first - started,
            last_token=None if last is None else last - started,
            output_tokens=tokens,
            prompt_tokens=prompt,
        )

    try:
        async with asyncio.timeout(within), http.post(url, data=body, headers=JSON_HEADERS) as response:
            if response.status >= 400:
                await response.content.read(ERROR_BODY_LIMIT)
                return record(http_error(response.status))
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
                return record(BAD_RESPONSE)
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
