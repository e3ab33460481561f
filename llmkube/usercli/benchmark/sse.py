"""Reading a streamed OpenAI-style answer (server-sent events), one line at a time (pure).

Each `data:` line holds a JSON chunk; chat chunks carry `choices[].delta.content` (or
`reasoning_content`), completion chunks `choices[].text`. The answer is complete when a choice
says its `finish_reason` or the server sends `data: [DONE]`. With `stream_options.include_usage`
a last chunk carries `usage`, whose token counts are preferred to counting chunks (a server may
put several tokens in one chunk). Comments (`:`), `event:` and `id:` lines are skipped.

A server that fails after the answer began (HTTP 200 already sent) says so in the stream: llama.cpp
sends `data: {"error": {"code": 500, "message": "Context size has been exceeded.", ...}}` when its
KV cache is full. That is the server's error, not a malformed answer: its kind is named from the
code it gives (`stream-error-500`).
"""

from dataclasses import dataclass
from typing import Any

import orjson

from llmkube.usercli.benchmark.stats import BAD_RESPONSE, server_message, stream_error

DATA = b"data:"
DONE = b"[DONE]"


@dataclass
class StreamState:
    chunks_with_text: int = 0
    finished: bool = False  # a finish_reason or [DONE] arrived
    done: bool = False  # [DONE] arrived
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    error: str | None = None  # the kind of failure (stats): an error chunk, or one that is not JSON
    error_message: str | None = None  # what the error chunk said

    @property
    def output_tokens(self) -> int:
        return self.completion_tokens if self.completion_tokens is not None else self.chunks_with_text

    def feed(self, line: bytes) -> bool:
        """Reads one line of the stream; True when it carried generated text."""
        line = line.strip()
        if not line.startswith(DATA):
            return False
        payload = line[len(DATA) :].strip()
        if payload == DONE:
            self.done = self.finished = True
            return False
        try:
            chunk = orjson.loads(payload)
        except orjson.JSONDecodeError:
            self.error = BAD_RESPONSE  # a chunk that is not JSON
            return False
        if not isinstance(chunk, dict):
            self.error = BAD_RESPONSE  # a chunk that is not a JSON object
            return False
        if "error" in chunk:
            error = chunk["error"]
            self.error = stream_error(_count(error.get("code")) if isinstance(error, dict) else None)
            self.error_message = server_message(payload)
            return False
        self._read_usage(chunk.get("usage"))
        text = False
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            text = text or _has_text(choice)
            if choice.get("finish_reason"):
                self.finished = True
        if text:
            self.chunks_with_text += 1
        return text

    def _read_usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        completion, prompt = _count(usage.get("completion_tokens")), _count(usage.get("prompt_tokens"))
        if completion is not None:
            self.completion_tokens = completion
        if prompt is not None:
            self.prompt_tokens = prompt


def _has_text(choice: dict[str, Any]) -> bool:
    delta = choice.get("delta")
    if isinstance(delta, dict):
        return bool(delta.get("content") or delta.get("reasoning_content"))
    return bool(choice.get("text"))


def answer_tokens(answer: Any) -> tuple[int, int | None] | None:
    """(completion tokens, prompt tokens) of a whole (non-streamed) answer, or None when it is not
    a completion. Without `usage`, each choice with text counts as one token: the length is unknown."""
    if not isinstance(answer, dict) or not isinstance(answer.get("choices"), list):
        return None
    usage = answer.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    completion = _count(usage.get("completion_tokens"))
    if completion is None:
        completion = sum(
            1 for choice in answer["choices"] if isinstance(choice, dict) and _message_text(choice)
        )
    return completion, _count(usage.get("prompt_tokens"))


def _message_text(choice: dict[str, Any]) -> bool:
    message = choice.get("message")
    if isinstance(message, dict):
        return bool(message.get("content") or message.get("reasoning_content"))
    return bool(choice.get("text"))


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
