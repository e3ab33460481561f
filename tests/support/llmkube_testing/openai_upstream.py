"""A stand-in for an OpenAI-compatible server (llama.cpp's, vLLM's, a provider's), for the router's
tests and benchmark: it speaks the real protocol (the answer shapes of /v1/chat/completions,
/v1/completions, /v1/embeddings and /v1/models, SSE streams ending in `data: [DONE]`, the final
usage chunk when `stream_options.include_usage` asks for it) and misbehaves on demand.

`behaviour` can be changed while it runs: `ok`, `error` (a 500 with an OpenAI error body), `hang`
(headers never come), `reset` (a stream cut after `reset_after` chunks, the connection aborted), or
`delay` seconds before the headers; `health` does the same for GET /health alone. Every request
is remembered (path, headers, body) up to `keep`, so a test can see what the router sent.

    python -m llmkube_testing.openai_upstream --port 9000 --tokens 200 --interval 0.005

runs one in its own process (the benchmark does).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from aiohttp import web

Behaviour = Literal["ok", "error", "hang", "reset"]


def outbound_address() -> str | None:
    """An address of this machine that is not loopback, for a stand-in a router may reach: its
    egress guard refuses loopback for external backends, the API server refuses it in
    EndpointSlices, and pods are never there. None on a machine with loopback alone."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks a source address
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") else address


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Upstream:
    name: str = "upstream"
    host: str = "127.0.0.1"
    port: int = 0
    behaviour: Behaviour = "ok"
    #: seconds before the headers of each answer
    delay: float = 0.0
    #: streamed tokens per answer, and the pause between two
    tokens: int = 8
    interval: float = 0.0
    #: chunks a `reset` stream sends before the connection is aborted
    reset_after: int = 2
    #: report usage (in answers, and in the final chunk when asked)
    usage: bool = True
    #: how GET /health answers: `ok` (200), `error` (a 503), `hang` (never), whatever `behaviour` is
    health: Literal["ok", "error", "hang"] = "ok"
    #: GET /health requests seen
    health_checks: int = 0
    #: a Set-Cookie header on every answer (a backend behind a sticky load balancer sends one)
    set_cookie: str | None = None
    keep: int = 1000
    seen: deque[Seen] = field(default_factory=lambda: deque(maxlen=1000))
    requests: int = 0
    #: streams whose client went away before the end
    cancelled: int = 0
    in_flight: int = 0
    _runner: web.ServerRunner | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> Upstream:
        self.seen = deque(maxlen=self.keep)
        server = web.Server(self._handle, access_log=None, handler_cancellation=True)
        runner = self._runner = web.ServerRunner(server, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, backlog=4096)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or ()
        if sockets:
            self.port = int(sockets[0].getsockname()[1])
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- the protocol ---------------------------------------------------------------------------

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        path = request.path
        if request.method == "GET":
            if path == "/health":
                self.health_checks += 1
                if self.health == "hang":
                    await asyncio.Event().wait()
                if self.health == "error":
                    return _error(503, f"{self.name} is unhealthy on purpose")
                return web.json_response({"status": "ok"})
            if path == "/v1/models":
                body = {"object": "list", "data": [{"id": self.name, "object": "model", "owned_by": "test"}]}
                return web.json_response(body)
            return _error(404, f"no route {path}")
        raw = await request.read()
        try:
            body = orjson.loads(raw) if raw else {}
        except orjson.JSONDecodeError:
            return _error(400, "invalid JSON")
        self.requests += 1
        self.seen.append(Seen(path, dict(request.headers), body))
        self.in_flight += 1
        try:
            return await self._answer(request, path, body)
        finally:
            self.in_flight -= 1

    async def _answer(self, request: web.BaseRequest, path: str, body: dict[str, Any]) -> web.StreamResponse:
        if self.behaviour == "hang":
            await asyncio.Event().wait()
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.behaviour == "error":
            return _error(500, f"{self.name} is failing on purpose")
        model = str(body.get("model") or self.name)
        if path == "/v1/embeddings":
            return self._json(
                {
                    "object": "list",
                    "data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2, 0.3]}],
                    "model": model,
                    **({"usage": {"prompt_tokens": 4, "total_tokens": 4}} if self.usage else {}),
                }
            )
        chat = path == "/v1/chat/completions"
        if path not in ("/v1/chat/completions", "/v1/completions"):
            return _error(404, f"no route {path}")
        if body.get("stream") is True:
            options = body.get("stream_options")
            include_usage = isinstance(options, dict) and options.get("include_usage") is True
            return await self._stream(request, model, chat, include_usage)
        text = " ".join(f"t{i}" for i in range(self.tokens))
        choice: dict[str, Any] = (
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            if chat
            else {"index": 0, "text": text, "finish_reason": "stop"}
        )
        answer: dict[str, Any] = {
            "id": f"cmpl-{self.requests}",
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()),
            "model": model,
            "choices": [choice],
        }
        if self.usage:
            answer["usage"] = {
                "prompt_tokens": 10,
                "completion_tokens": self.tokens,
                "total_tokens": 10 + self.tokens,
            }
        return self._json(answer)

    def _headers(self) -> dict[str, str]:
        headers = {"X-Upstream": self.name}
        if self.set_cookie:
            headers["Set-Cookie"] = self.set_cookie
        return headers

    def _json(self, body: dict[str, Any]) -> web.Response:
        return web.Response(body=orjson.dumps(body), content_type="application/json", headers=self._headers())

    async def _stream(
        self, request: web.BaseRequest, model: str, chat: bool, include_usage: bool
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", **self._headers()}
        )
        await response.prepare(request)
        created = int(time.time())
        kind = "chat.completion.chunk" if chat else "text_completion"
        try:
            for i in range(self.tokens):
                if self.behaviour == "reset" and i == self.reset_after:
                    transport = request.transport
                    if transport is not None:
                        transport.abort()
                    return response
                choice: dict[str, Any] = (
                    {"index": 0, "delta": {"content": f"t{i} "}, "finish_reason": None}
                    if chat
                    else {"index": 0, "text": f"t{i} ", "finish_reason": None}
                )
                event = {"id": "s", "object": kind, "created": created, "model": model, "choices": [choice]}
                await response.write(b"data: " + orjson.dumps(event) + b"\n\n")
                if self.interval:
                    await asyncio.sleep(self.interval)
            final: dict[str, Any] = {"index": 0, "finish_reason": "stop"}
            if chat:
                final["delta"] = {}
            else:
                final["text"] = ""
            await response.write(
                b"data: "
                + orjson.dumps(
                    {"id": "s", "object": kind, "created": created, "model": model, "choices": [final]}
                )
                + b"\n\n"
            )
            if include_usage and self.usage:
                usage = {
                    "prompt_tokens": 10,
                    "completion_tokens": self.tokens,
                    "total_tokens": 10 + self.tokens,
                }
                event = {
                    "id": "s",
                    "object": kind,
                    "created": created,
                    "model": model,
                    "choices": [],
                    "usage": usage,
                }
                await response.write(b"data: " + orjson.dumps(event) + b"\n\n")
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
        except (asyncio.CancelledError, ConnectionResetError):
            self.cancelled += 1
            raise
        return response


def _error(status: int, message: str) -> web.Response:
    body = {
        "error": {"message": message, "type": "server_error" if status >= 500 else "invalid_request_error"}
    }
    return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")


async def _serve(args: argparse.Namespace) -> None:
    upstream = await Upstream(
        name=args.name, host=args.host, port=args.port, tokens=args.tokens, interval=args.interval, keep=1
    ).start()
    print(f"listening {upstream.url}", flush=True)
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--name", default="upstream")
    parser.add_argument("--tokens", type=int, default=8)
    parser.add_argument("--interval", type=float, default=0.0)
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args))


if __name__ == "__main__":
    main()
