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
_USAGE_MEMBER = re.compile(rb'"usage"\s*:\s*\{')
#: a usage object is a few hundred bytes: one larger is not read
MAX_USAGE_OBJECT = 8192
#: occurrences of "usage" looked at from the end of an answer
_USAGE_TRIES = 8


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


def _object_at(body: bytes, start: int) -> bytes | None:
    """The JSON object that opens at `start`, when it closes within MAX_USAGE_OBJECT bytes."""
    depth, quoted, escaped = 0, False, False
    for index in range(start, min(len(body), start + MAX_USAGE_OBJECT)):
        byte = body[index]
        if quoted:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:
                quoted = False
        elif byte == 0x22:
            quoted = True
        elif byte == 0x7B:
            depth += 1
        elif byte == 0x7D:
            depth -= 1
            if depth == 0:
                return body[start : index + 1]
    return None


def usage_of_body(body: bytes) -> Usage | None:
    """The usage object of an answer, read alone: the answer itself is never parsed (an embedding's
    answer is megabytes of numbers, a hostile one anything), only the last `"usage": {...}` in it,
    which is where OpenAI-compatible servers put it (a string holding those bytes escapes its
    quotes, so it cannot be taken for it)."""
    end = len(body)
    for _ in range(_USAGE_TRIES):
        at = body.rfind(_USAGE, 0, end)
        if at < 0:
            return None
        found = _USAGE_MEMBER.match(body, at)
        if found is not None:
            member = _object_at(body, found.end() - 1)
            if member is not None:
                try:
                    return _from(orjson.loads(member))
                except orjson.JSONDecodeError:
                    return None
        end = at
    return None


def estimate(prompt_chars: int, completion_events: int) -> Usage:
    return Usage(math.ceil(prompt_chars / 4), max(0, completion_events), reported=False)


def delivered(
    reported: Usage | None, prompt_chars: int, events: int | None, *, reserved: int | None
) -> Usage | None:
    """What a request whose client left is charged: the usage the backend reported, else, for a
    stream, its prompt and a token per event it was sent; else, while a backend was working on an
    answer, all it was admitted for (`reserved` tokens: how far the backend got before it was
    cancelled is not known); else nothing (no backend had it)."""
    if reported is not None:
        return reported
    if events is not None:
        return estimate(prompt_chars, events)
    if reserved is not None:
        prompt = math.ceil(prompt_chars / 4)
        return Usage(prompt, max(0, reserved - prompt), reported=False)
    return None


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
