"""What each benchmark request asks (pure): a synthetic prompt of about N tokens, or prompts read
from a file, and the OpenAI-style request body for the chat or the completions endpoint.

A synthetic prompt is N common English words drawn with a fixed seed: with the BPE vocabularies of
llama, Mistral, Qwen and GPT models each of these words (with its leading space) is one token, so
the prompt is about N tokens; the server's own count (`usage.prompt_tokens`) is what the report
shows. Every request gets a different prompt (a different draw), so a server's prompt cache does
not turn the benchmark into a cache benchmark.
"""

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

Endpoint = Literal["chat", "completions"]
PATHS: dict[Endpoint, str] = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}

# Short, frequent words: one token each in the common BPE vocabularies.
_WORD_TEXT = (
    "the of and to in is that for it as was with be by on not he this are or his from at which but "
    "have an they you were her she there one all we their can has been if more when will would who "
    "so no time out up about into them some could see other than then now only its over new also "
    "after use two how our work first well way even because any these give day most us people year "
    "good make know take come think look want find tell ask seem feel try leave call keep let begin "
    "help talk turn start show hear play run move like live hold bring write sit stand lose pay meet "
    "set learn lead read grow open walk win offer speak cut reach kill send build stay fall plan"
)
WORDS = tuple(_WORD_TEXT.split(" "))


class PromptFileError(ValueError):
    pass


@dataclass(frozen=True)
class RequestShape:
    endpoint: Endpoint
    max_tokens: int
    stream: bool
    model: str | None = None
    ignore_eos: bool = True
    temperature: float | None = None


def synthetic_prompt(tokens: int, index: int, seed: int = 0) -> str:
    """About `tokens` tokens of text, different for each `index`, the same for the same arguments."""
    draw = random.Random(f"{seed}:{index}")
    return " ".join(draw.choice(WORDS) for _ in range(max(1, tokens)))


def parse_prompt_file(text: str) -> list[str | list[dict[str, Any]]]:
    """One prompt per line; blank lines are skipped. A line that starts with `{` is JSON with a
    "prompt" (text) or "messages" (a chat conversation); any other line is the prompt itself."""
    prompts: list[str | list[dict[str, Any]]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if not line.startswith("{"):
            prompts.append(line)
            continue
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError as error:
            raise PromptFileError(f"line {number}: not JSON ({error})") from None
        messages, prompt = entry.get("messages"), entry.get("prompt")
        if isinstance(messages, list) and messages and all(isinstance(m, dict) for m in messages):
            prompts.append(messages)
        elif isinstance(prompt, str) and prompt:
            prompts.append(prompt)
        else:
            raise PromptFileError(f'line {number}: a JSON line needs "prompt" (text) or "messages" (a list)')
    if not prompts:
        raise PromptFileError("the file holds no prompt")
    return prompts


def request_body(prompt: str | Sequence[dict[str, Any]], shape: RequestShape) -> bytes:
    body: dict[str, Any] = {"max_tokens": shape.max_tokens, "stream": shape.stream}
    if shape.endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    else:
        body["prompt"] = (
            prompt if isinstance(prompt, str) else "\n".join(str(m.get("content") or "") for m in prompt)
        )
    if shape.model:
        body["model"] = shape.model
    if shape.stream:
        body["stream_options"] = {"include_usage": True}
    if shape.ignore_eos:
        # llama.cpp, vLLM, SGLang and TGI honour it: every answer is max_tokens long, so levels
        # compare like with like (a model that stops early would look fast).
        body["ignore_eos"] = True
    if shape.temperature is not None:
        body["temperature"] = shape.temperature
    return orjson.dumps(body)
