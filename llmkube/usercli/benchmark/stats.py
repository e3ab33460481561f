"""Each request's record and each concurrency level's figures (pure).

Percentiles interpolate linearly between the two nearest ranks (numpy's default, and what most
benchmark tools print), so p50 of an even count is the mean of the middle two. Throughput counts
only requests that finished well, over the level's wall time: from its first request's start to
its last request's end, so a level that ends with slow stragglers is not flattered.
"""

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

# The kinds of failure, named from what happened (an exception type, a status code, a stream that
# ended early), never from a message: the table groups errors by these.
CONNECT = "connect"  # no connection (refused, unreachable, DNS)
TIMEOUT = "timeout"  # no complete answer within --timeout
DISCONNECTED = "disconnected"  # the server closed the connection before the answer ended
INCOMPLETE = "incomplete"  # a stream that ended without its final chunk ([DONE] or a finish_reason)
BAD_RESPONSE = "bad-response"  # an answer that is not an OpenAI-style completion


STREAM_ERROR = "stream-error"  # an error chunk in a stream that had begun (HTTP 200 already sent)


def http_error(status: int) -> str:
    return f"http-{status}"


def stream_error(code: int | None) -> str:
    """The kind of an error chunk: named from the code the server put in it, when it gave one."""
    return STREAM_ERROR if code is None else f"{STREAM_ERROR}-{code}"


@dataclass(frozen=True)
class RequestRecord:
    """One request. Times are seconds: `started` and `finished` since the level began, the token
    times since the request started (None when no token arrived, or the answer was not streamed)."""

    started: float
    finished: float
    error: str | None = None
    first_token: float | None = None
    last_token: float | None = None
    output_tokens: int = 0
    prompt_tokens: int | None = None
    #: what the server said of its error (its JSON `error.message`, or the start of its answer)
    detail: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def latency(self) -> float:
        return self.finished - self.started

    @property
    def time_per_output_token(self) -> float | None:
        """Seconds between output tokens after the first (vLLM's and llama.cpp's TPOT)."""
        if self.first_token is None or self.last_token is None or self.output_tokens < 2:
            return None
        return (self.last_token - self.first_token) / (self.output_tokens - 1)


@dataclass(frozen=True)
class Percentiles:
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100), linear between ranks; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def percentiles(values: Sequence[float]) -> Percentiles:
    return Percentiles(percentile(values, 50), percentile(values, 90), percentile(values, 99))


@dataclass(frozen=True)
class LevelResult:
    concurrency: int
    seconds: float  # wall time of the level
    requests: int  # finished well
    errors: dict[str, int]  # kind -> count
    requests_per_second: float
    output_tokens_per_second: float
    output_tokens_mean: float | None
    prompt_tokens_mean: float | None
    ttft: Percentiles
    tpot: Percentiles
    latency: Percentiles
    # CPU seconds the benchmark process itself used during the level: near `seconds`, one core was
    # busy sending and reading, and the figures may say more about this machine than the server.
    client_cpu_seconds: float | None = None
    #: kind -> what the server said the first time it failed so (its own words)
    error_messages: dict[str, str] = field(default_factory=dict)

    @property
    def failed(self) -> int:
        return sum(self.errors.values())


def summarize(
    concurrency: int, records: Sequence[RequestRecord], client_cpu_seconds: float | None = None
) -> LevelResult:
    good = [r for r in records if r.ok]
    seconds = max(r.finished for r in records) - min(r.started for r in records) if records else 0.0
    output = sum(r.output_tokens for r in good)
    prompts = [r.prompt_tokens for r in good if r.prompt_tokens is not None]
    return LevelResult(
        concurrency=concurrency,
        seconds=seconds,
        requests=len(good),
        errors=dict(sorted(Counter(r.error for r in records if r.error is not None).items())),
        requests_per_second=len(good) / seconds if seconds > 0 else 0.0,
        output_tokens_per_second=output / seconds if seconds > 0 else 0.0,
        output_tokens_mean=output / len(good) if good else None,
        prompt_tokens_mean=sum(prompts) / len(prompts) if prompts else None,
        ttft=percentiles([r.first_token for r in good if r.first_token is not None]),
        tpot=percentiles([t for r in good if (t := r.time_per_output_token) is not None]),
        latency=percentiles([r.latency for r in good]),
        client_cpu_seconds=client_cpu_seconds,
        error_messages=first_messages(records),
    )


def first_messages(records: Sequence[RequestRecord]) -> dict[str, str]:
    messages: dict[str, str] = {}
    for record in records:
        if record.error is not None and record.detail and record.error not in messages:
            messages[record.error] = record.detail
    return dict(sorted(messages.items()))


#: the most of a server's words kept for one kind of error
MAX_DETAIL = 300


def server_message(body: bytes) -> str | None:
    """An error answer's message: OpenAI's and llama.cpp's `{"error": {"message": ...}}`, vLLM's and
    TGI's `{"message"|"error": "..."}`, else the start of the text; None for an empty body."""
    try:
        document: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        document = None
    if isinstance(document, dict):
        error = document.get("error")
        for candidate in (
            error.get("message") if isinstance(error, dict) else error,
            document.get("message"),
        ):
            if isinstance(candidate, str) and candidate.strip():
                return _bounded(candidate)
    text = body.decode(errors="replace").strip()
    return _bounded(text) if text else None


def _bounded(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 1] + "\u2026"
