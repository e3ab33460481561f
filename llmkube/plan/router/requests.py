"""What the router reads from a request body, and the body it sends upstream.

The body is parsed once (orjson). It is sent upstream unchanged (the very bytes received) unless
the router must change it: the model of an external backend, or `stream_options.include_usage`
asked for on a stream whose client did not ask (the final usage chunk is how tokens are counted)."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from llmkube.plan.router.errors import Refused

Endpoint = Literal["chat", "completions", "embeddings"]
PATHS: Mapping[str, Endpoint] = {
    "/v1/chat/completions": "chat",
    "/v1/completions": "completions",
    "/v1/embeddings": "embeddings",
}


@dataclass(frozen=True)
class ParsedRequest:
    endpoint: Endpoint
    body: dict[str, Any]
    model: str
    stream: bool
    #: the client asked for the final usage chunk itself (it then gets it)
    client_wants_usage: bool

    def prompt_text(self) -> str:
        """The prompt's text, in order: what prefix affinity and token estimates read."""
        if self.endpoint == "chat":
            parts = []
            for message in self.body.get("messages") or ():
                if not isinstance(message, dict):
                    continue
                content = message.get("content")
                parts.append(str(message.get("role") or ""))
                if isinstance(content, str):
                    parts.append(content)
                elif isinstance(content, list):
                    parts.extend(
                        str(p.get("text"))
                        for p in content
                        if isinstance(p, dict) and isinstance(p.get("text"), str)
                    )
            return "\n".join(parts)
        value = self.body.get("prompt" if self.endpoint == "completions" else "input")
        if isinstance(value, str):
            return value
        if isinstance(value, list):
            return "\n".join(v for v in value if isinstance(v, str))
        return ""

    def affinity_key(self, prefix: int) -> bytes:
        return self.prompt_text()[:prefix].encode()


def parse_request(raw: bytes, endpoint: Endpoint) -> ParsedRequest | Refused:
    if not raw.strip():
        return Refused(
            400, "The request has no body: send a JSON object.", code="invalid_body", outcome="bad_request"
        )
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        return Refused(
            400, f"The request body is not valid JSON: {error}.", code="invalid_json", outcome="bad_request"
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
    return ParsedRequest(endpoint, body, model, stream and endpoint != "embeddings", wants_usage)


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
