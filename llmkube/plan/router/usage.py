"""Tokens a request used, from the backend's own `usage`: the body of an answer, or the final
usage chunk of a stream (which the router asks for when the client did not, and then takes out of
what the client receives: it asked for a stream without it, and some clients index `choices[0]` of
every chunk).

Streams are passed through chunk by chunk; a chunk is only looked into when it mentions "usage",
and only rewritten when it carries the usage chunk the router asked for. When a backend reports no
usage (a stream cut short, a server that never reports it), the tokens are estimated: a token per
streamed event, and four characters per token of prompt; the audit line says which it was."""

import math
import re
from dataclasses import dataclass
from typing import Any

import orjson

_USAGE = b'"usage"'
#: a usage object (every chunk of some servers carries `"usage":null`, which needs no look)
_USAGE_OBJECT = re.compile(rb'"usage"\s*:\s*\{')
_MAX_CARRY = 1 << 20


@dataclass(frozen=True)
class Usage:
    prompt: int
    completion: int
    #: the backend reported it (False: estimated)
    reported: bool = True

    @property
    def total(self) -> int:
        return self.prompt + self.completion

    def cost(self, prompt_usd: float, completion_usd: float) -> float:
        return self.prompt * prompt_usd + self.completion * completion_usd


def _from(value: Any) -> Usage | None:
    if not isinstance(value, dict):
        return None
    prompt, completion = value.get("prompt_tokens"), value.get("completion_tokens")
    total = value.get("total_tokens")
    if not isinstance(prompt, int) or isinstance(prompt, bool):
        return None
    if not isinstance(completion, int) or isinstance(completion, bool):
        completion = total - prompt if isinstance(total, int) and total >= prompt else 0
    return Usage(max(0, prompt), max(0, completion))


def usage_of_body(body: bytes) -> Usage | None:
    if _USAGE not in body:
        return None
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return _from(parsed.get("usage")) if isinstance(parsed, dict) else None


def estimate(prompt_chars: int, completion_events: int) -> Usage:
    return Usage(math.ceil(prompt_chars / 4), max(0, completion_events), reported=False)


class StreamUsage:
    """Follows one SSE stream: `feed` each chunk, send what it returns."""

    def __init__(self, *, strip_injected: bool) -> None:
        self.strip_injected = strip_injected
        self.usage: Usage | None = None
        #: `data:` events seen (the [DONE] marker included): a token estimate when none is reported
        self.events = 0
        self._carry = b""

    @property
    def content_events(self) -> int:
        return max(0, self.events - 1)

    def feed(self, chunk: bytes) -> bytes:
        carried = len(self._carry)
        data = self._carry + chunk if carried else chunk
        self.events += chunk.count(b"data:")
        cut = data.rfind(b"\n") + 1
        self._carry = data[cut:] if cut < len(data) and len(data) - cut <= _MAX_CARRY else b""
        if _USAGE_OBJECT.search(data) is None:
            return chunk
        return self._look_into(data, chunk, carried, cut)

    def _look_into(self, data: bytes, chunk: bytes, carried: int, complete: int) -> bytes:
        # Only the lines holding a usage object are read: a chunk can carry a whole answer's events
        # (a fast backend, a slow client), and splitting all of them cost more than relaying them.
        cuts: list[tuple[int, int]] = []
        done = 0
        for found in _USAGE_OBJECT.finditer(data, 0, complete):
            start = data.rfind(b"\n", 0, found.start()) + 1
            if start < done:
                continue  # a second usage object on a line already read
            end = data.find(b"\n", found.end(), complete)
            end = complete - 1 if end < 0 else end
            done = end + 1
            line = data[start:end].rstrip(b"\r")
            if line.startswith(b"data:"):
                event = self._parse(line[5:])
                if event is not None:
                    usage = _from(event.get("usage"))
                    if usage is not None:
                        self.usage = usage
                        if self.strip_injected and event.get("choices") == [] and start >= carried:
                            # The event and the blank line after it: gone from what the client gets.
                            stop = end + 1
                            if data[stop : stop + 1] == b"\n":
                                stop += 1
                            elif data[stop : stop + 2] == b"\r\n":
                                stop += 2
                            cuts.append((start - carried, stop - carried))
        if not cuts:
            return chunk
        kept, position = [], 0
        for left, right in cuts:
            kept.append(chunk[position:left])
            position = right
        kept.append(chunk[position:])
        return b"".join(kept)

    @staticmethod
    def _parse(payload: bytes) -> dict[str, Any] | None:
        try:
            event = orjson.loads(payload.strip())
        except orjson.JSONDecodeError:
            return None
        return event if isinstance(event, dict) else None
