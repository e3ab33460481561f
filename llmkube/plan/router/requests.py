"""What the router reads from a request body, and the body it sends upstream.

The body is parsed once (orjson), after its cost was bounded (llmkube.plan.router.bodies: a body
whose parsed form would be out of proportion to its size is refused unparsed) and with the garbage
collector held off: the objects parsing makes are all alive, and looking at them again and again as
they are made was most of the time a body of many small containers took. It is sent upstream
unchanged (the very bytes received) unless the router must change it: the model of an external
backend, or `stream_options.include_usage` asked for on a stream whose client did not ask (the
final usage chunk is how tokens are counted).

Every walk of a body here and in the detector is iterative, and reads strings only where it expects
them: a body nests at most MAX_DEPTH deep, but no walk relies on that."""

import gc
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from llmkube.plan.router.bodies import MAX_DEPTH, depth_over, parse_allowance, parse_cost
from llmkube.plan.router.errors import Refused

Endpoint = Literal["chat", "completions", "embeddings", "rerank"]
PATHS: Mapping[str, Endpoint] = {
    "/v1/chat/completions": "chat",
    "/v1/completions": "completions",
    "/v1/embeddings": "embeddings",
    "/v1/rerank": "rerank",  # llama-server's, vLLM's and SGLang's reranking endpoint
}
#: the endpoints whose answers are not generated text (no stream, no output tokens)
NOT_GENERATING: frozenset[Endpoint] = frozenset({"embeddings", "rerank"})


@dataclass(frozen=True)
class ParsedRequest:
    endpoint: Endpoint
    body: dict[str, Any]
    model: str
    stream: bool
    #: the client asked for the final usage chunk itself (it then gets it)
    client_wants_usage: bool
    #: the most tokens the answer may have, as the client set it (max_tokens, max_completion_tokens)
    max_tokens: int | None = None

    def prompt_text(self) -> str:
        """The prompt's text, in order: what prefix affinity and token estimates read."""
        if self.endpoint == "chat":
            parts = []
            for message in self.body.get("messages") or ():
                if not isinstance(message, dict):
                    continue
                content, role = message.get("content"), message.get("role")
                parts.append(role if isinstance(role, str) else "")
                if isinstance(content, str):
                    parts.append(content)
                elif isinstance(content, list):
                    for part in content:
                        text = part.get("text") if isinstance(part, dict) else None
                        if isinstance(text, str):
                            parts.append(text)
            return "\n".join(parts)
        if self.endpoint == "rerank":
            documents = self.body.get("documents")
            texts = [self.body.get("query"), *(documents if isinstance(documents, list) else ())]
            return "\n".join(t for t in texts if isinstance(t, str))
        value = self.body.get("prompt" if self.endpoint == "completions" else "input")
        if isinstance(value, str):
            return value
        if isinstance(value, list):
            return "\n".join(v for v in value if isinstance(v, str))
        return ""

    def affinity_key(self, prefix: int) -> bytes:
        return self.prompt_text()[:prefix].encode()


def too_costly(size: int, cost: int) -> Refused:
    return Refused(
        413,
        f"The request body holds too many JSON values for its size ({size} bytes): arrays, objects "
        f"and members that would take about {cost >> 20} MiB to read, where this router reads at most "
        f"{parse_allowance(size) >> 20} MiB for a body of that size.",
        code="request_too_large",
        outcome="too_large",
    )


def parse_request(raw: bytes, endpoint: Endpoint, *, cost: int | None = None) -> ParsedRequest | Refused:
    """The request a body asks for, or why it is refused; `cost` is `parse_cost(raw)` when the
    caller has it already."""
    if not raw.strip():
        return Refused(
            400, "The request has no body: send a JSON object.", code="invalid_body", outcome="bad_request"
        )
    cost = parse_cost(raw) if cost is None else cost
    if cost > parse_allowance(len(raw)):
        return too_costly(len(raw), cost)
    collecting = gc.isenabled()
    gc.disable()
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        return Refused(
            400, f"The request body is not valid JSON: {error}.", code="invalid_json", outcome="bad_request"
        )
    finally:
        if collecting:
            gc.enable()
    if depth_over(body):
        return Refused(
            400,
            f"The request body nests arrays and objects deeper than {MAX_DEPTH} levels.",
            code="invalid_body",
            outcome="bad_request",
        )
    if not isinstance(body, dict):
        return Refused(
            400, "The request body must be a JSON object.", code="invalid_body", outcome="bad_request"
        )
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return Refused(
            400,
            "You must provide a model parameter (a string).",
            code="missing_model",
            param="model",
            outcome="bad_request",
        )
    stream = body.get("stream") is True
    options = body.get("stream_options")
    wants_usage = isinstance(options, dict) and options.get("include_usage") is True
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    max_tokens = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None
    return ParsedRequest(
        endpoint, body, model, stream and endpoint not in NOT_GENERATING, wants_usage, max_tokens
    )


def upstream_body(request: ParsedRequest, raw: bytes, *, model: str | None) -> tuple[bytes, bool]:
    """(the body to send, whether the router asked for the usage chunk the client did not)."""
    rewrite_model = model is not None and model != request.model
    ask_usage = request.stream and not request.client_wants_usage
    if not rewrite_model and not ask_usage:
        return raw, False
    body = dict(request.body)
    if rewrite_model:
        body["model"] = model
    if ask_usage:
        options = body.get("stream_options")
        body["stream_options"] = {**(options if isinstance(options, dict) else {}), "include_usage": True}
    return orjson.dumps(body), ask_usage
