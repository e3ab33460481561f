"""A stand-in for an OpenAI-compatible inference server (llama.cpp's `llama-server` as far as the
tests need it), answering with configurable delays and no model at all.

It speaks the real protocol: `POST /v1/chat/completions` and `/v1/completions`, whole answers or
server-sent events (`data: {...}` chunks, a `finish_reason`, a usage chunk when
`stream_options.include_usage` asks for it, `data: [DONE]`), `GET /v1/models`, `/health`, and
`/metrics` with llama.cpp's `llamacpp:requests_processing` and `llamacpp:requests_deferred` gauges
(requests beyond `--slots` wait for a slot, as llama-server's do). Every answer is exactly
`max_tokens` tokens long. With `close_after_stream` it closes the connection after each streamed
answer without saying so beforehand, as llama-server does (its `Keep-Alive` header notwithstanding).
With no delays it answers as fast as it can, which is what
`bench/bench_benchmark_overhead.py` measures the load generator against.

    python -m llmkube_testing.openai_standin [--port 0] [--ttft-ms 0] [--token-ms 0] [--slots 4]
        [--fail-every N] [--cut-every N] [--close-after-stream]

prints `listening on http://127.0.0.1:PORT` once it accepts connections.
"""

import argparse
import asyncio
import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

MODEL_ID = "openai-stand-in"
DEFAULT_MAX_TOKENS = 16


@dataclass
class Behaviour:
    ttft: float = 0.0  # seconds before the first token
    per_token: float = 0.0  # seconds between tokens
    slots: int = 4  # requests generated at once; more wait (deferred)
    fail_every: int = 0  # every Nth request is answered 503 (0: none)
    cut_every: int = 0  # every Nth streamed answer stops after half its tokens, the connection closed
    close_after_stream: bool = False  # close the connection once a streamed answer is complete


class StandIn:
    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.slots = asyncio.Semaphore(behaviour.slots)
        self.processing = 0
        self.deferred = 0
        self.served = 0
        self.received = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.complete)
        app.router.add_post("/v1/completions", self.complete)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/health", self.health)
        app.router.add_get("/metrics", self.metrics)
        return app

    async def health(self, _: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def models(self, _: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": MODEL_ID, "object": "model"}]})

    async def metrics(self, _: web.Request) -> web.Response:
        text = (
            "# HELP llamacpp:requests_processing Number of requests processing\n"
            "# TYPE llamacpp:requests_processing gauge\n"
            f"llamacpp:requests_processing {self.processing}\n"
            "# HELP llamacpp:requests_deferred Number of requests deferred\n"
            "# TYPE llamacpp:requests_deferred gauge\n"
            f"llamacpp:requests_deferred {self.deferred}\n"
        )
        return web.Response(text=text, content_type="text/plain")

    async def complete(self, request: web.Request) -> web.StreamResponse:
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return _error(400, "the body is not JSON")
        if not isinstance(body, dict):
            return _error(400, "the body is not a JSON object")
        chat = request.path.endswith("/chat/completions")
        if chat and not isinstance(body.get("messages"), list):
            return _error(400, '"messages" is required')
        tokens = body.get("max_tokens") or DEFAULT_MAX_TOKENS
        if not isinstance(tokens, int) or tokens < 1:
            return _error(400, '"max_tokens" must be a positive integer')
        prompt_tokens = _prompt_tokens(body, chat)
        self.received += 1
        number = self.received
        if self.behaviour.fail_every and number % self.behaviour.fail_every == 0:
            return _error(503, "the stand-in fails this request on purpose", "server_error")
        cut = bool(self.behaviour.cut_every and number % self.behaviour.cut_every == 0)
        self.deferred += 1
        try:
            await self.slots.acquire()
        finally:
            self.deferred -= 1
        self.processing += 1
        try:
            if body.get("stream"):
                return await self._stream(request, body, chat, tokens, prompt_tokens, cut=cut)
            await asyncio.sleep(self.behaviour.ttft + self.behaviour.per_token * max(0, tokens - 1))
            return web.Response(
                body=orjson.dumps(_whole(chat, tokens, prompt_tokens)), content_type="application/json"
            )
        finally:
            self.processing -= 1
            self.slots.release()
            self.served += 1

    async def _stream(
        self,
        request: web.Request,
        body: dict[str, Any],
        chat: bool,
        tokens: int,
        prompt_tokens: int,
        *,
        cut: bool = False,
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        created = int(time.time())
        if self.behaviour.ttft:
            await asyncio.sleep(self.behaviour.ttft)
        for index in range(tokens):
            if cut and index == tokens // 2:
                # As a server that dies mid-answer: the chunked body never gets its last chunk.
                assert request.transport is not None
                request.transport.close()
                return response
            if index and self.behaviour.per_token:
                await asyncio.sleep(self.behaviour.per_token)
            last = index == tokens - 1
            choice: dict[str, Any] = {"index": 0, "finish_reason": "length" if last else None}
            if chat:
                choice["delta"] = {"content": f" t{index}", **({"role": "assistant"} if index == 0 else {})}
            else:
                choice["text"] = f" t{index}"
            await response.write(_event(_chunk(chat, created, [choice])))
        options = body.get("stream_options")
        if isinstance(options, dict) and options.get("include_usage"):
            usage = _chunk(chat, created, [])
            usage["usage"] = _usage(tokens, prompt_tokens)
            await response.write(_event(usage))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        if self.behaviour.close_after_stream and request.transport is not None:
            request.transport.close()
        return response


def _prompt_tokens(body: dict[str, Any], chat: bool) -> int:
    if chat:
        return sum(len(str(m.get("content") or "").split()) for m in body["messages"] if isinstance(m, dict))
    return len(str(body.get("prompt") or "").split())


def _usage(tokens: int, prompt_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": tokens,
        "total_tokens": prompt_tokens + tokens,
    }


def _chunk(chat: bool, created: int, choices: list[dict[str, Any]]) -> dict[str, Any]:
    kind = "chat.completion.chunk" if chat else "text_completion"
    return {"id": "cmpl-stand-in", "object": kind, "created": created, "model": MODEL_ID, "choices": choices}


def _whole(chat: bool, tokens: int, prompt_tokens: int) -> dict[str, Any]:
    text = "".join(f" t{index}" for index in range(tokens))
    choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
    if chat:
        choice["message"] = {"role": "assistant", "content": text}
    else:
        choice["text"] = text
    return {
        "id": "cmpl-stand-in",
        "object": "chat.completion" if chat else "text_completion",
        "created": int(time.time()),
        "model": MODEL_ID,
        "choices": [choice],
        "usage": _usage(tokens, prompt_tokens),
    }


def _event(chunk: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def _error(status: int, message: str, kind: str = "invalid_request_error") -> web.Response:
    return web.json_response({"error": {"code": status, "message": message, "type": kind}}, status=status)


async def serve(behaviour: Behaviour, host: str, port: int) -> None:
    runner = web.AppRunner(StandIn(behaviour).app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1]  # the port chosen for port 0
    print(f"listening on http://{host}:{bound}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


@dataclass(frozen=True)
class StandInProcess:
    url: str
    process: "subprocess.Popen[str]"


@contextlib.contextmanager
def standin_process(
    *,
    ttft: float = 0.0,
    per_token: float = 0.0,
    slots: int = 4,
    fail_every: int = 0,
    cut_every: int = 0,
    close_after_stream: bool = False,
    cpu: int | None = None,
) -> Iterator[StandInProcess]:
    """The stand-in in a process of its own (so it does not share a CPU's time with the client in
    the same event loop), on a free loopback port; stopped on exit. `cpu` pins it to one core."""
    command = [
        sys.executable,
        "-m",
        "llmkube_testing.openai_standin",
        f"--ttft-ms={ttft * 1000}",
        f"--token-ms={per_token * 1000}",
        f"--slots={slots}",
        f"--fail-every={fail_every}",
        f"--cut-every={cut_every}",
        *(["--close-after-stream"] if close_after_stream else []),
    ]
    if cpu is not None:
        command = ["taskset", "--cpu-list", str(cpu), *command]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("listening on "):
            raise RuntimeError(f"the stand-in did not start: {line!r}")
        yield StandInProcess(line.removeprefix("listening on ").strip(), process)
    finally:
        process.terminate()
        process.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ttft-ms", type=float, default=0.0, help="delay before the first token")
    parser.add_argument("--token-ms", type=float, default=0.0, help="delay between tokens")
    parser.add_argument("--slots", type=int, default=4, help="requests generated at once")
    parser.add_argument("--fail-every", type=int, default=0, help="answer every Nth request 503")
    parser.add_argument("--cut-every", type=int, default=0, help="cut every Nth streamed answer halfway")
    parser.add_argument(
        "--close-after-stream", action="store_true", help="close the connection after each streamed answer"
    )
    args = parser.parse_args()
    behaviour = Behaviour(
        ttft=args.ttft_ms / 1000,
        per_token=args.token_ms / 1000,
        slots=args.slots,
        fail_every=args.fail_every,
        cut_every=args.cut_every,
        close_after_stream=args.close_after_stream,
    )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(behaviour, args.host, args.port))


if __name__ == "__main__":
    main()
