"""A streamed chat answer (server-sent events) read line by line for `llmkube chat` (pure).

Each `data:` line holds a JSON chunk whose `choices[0].delta.content` (or `reasoning_content`) is
the next piece of text; `data: [DONE]`, or a `finish_reason`, ends it; a chunk with `usage` gives
the token counts; `{"error": {...}}` is the server's failure after the answer began (llama.cpp's
`Context size has been exceeded.`). Bounded: a line longer than MAX_LINE_BYTES is cut by the reader
(aiohttp's limit) and an answer longer than MAX_STREAM_BYTES is stopped.
"""

from dataclasses import dataclass
from typing import Any

import orjson

#: the longest answer read (a few hundred thousand tokens of text)
MAX_STREAM_BYTES = 16 * 1024 * 1024
_DATA = b"data:"


@dataclass
class ChatStream:
    received: int = 0  # bytes read
    done: bool = False
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None  # the server's words, from an error chunk
    pieces: int = 0

    def feed(self, line: bytes) -> str:
        """The text one line of the stream adds ("" for none)."""
        self.received += len(line)
        if self.received > MAX_STREAM_BYTES:
            self.error = f"the answer is longer than {MAX_STREAM_BYTES} bytes: stopped reading it"
            self.done = True
            return ""
        line = line.strip()
        if not line.startswith(_DATA):
            return ""
        payload = line[len(_DATA) :].strip()
        if payload == b"[DONE]":
            self.done = True
            return ""
        try:
            chunk: Any = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return ""
        if not isinstance(chunk, dict):
            return ""
        if "error" in chunk:
            error = chunk["error"]
            message = error.get("message") if isinstance(error, dict) else error
            self.error = str(message or error)
            self.done = True
            return ""
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.prompt_tokens = _count(usage.get("prompt_tokens"), self.prompt_tokens)
            self.completion_tokens = _count(usage.get("completion_tokens"), self.completion_tokens)
        text = ""
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                text += str(delta.get("content") or delta.get("reasoning_content") or "")
            elif isinstance(choice.get("text"), str):
                text += choice["text"]
        if text:
            self.pieces += 1
        return text

    def summary(self) -> str:
        if self.completion_tokens is None:
            return f"{self.pieces} streamed chunks" if self.pieces else ""
        prompt = "?" if self.prompt_tokens is None else self.prompt_tokens
        return f"{prompt} prompt + {self.completion_tokens} completion tokens"


def _count(value: Any, before: int | None) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else before
