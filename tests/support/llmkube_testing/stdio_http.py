"""A stand-in for an inference server behind kwok's port-forward: one HTTP exchange on stdin/stdout.

kwok pods run nothing, so the local full tier configures kwok to answer every port-forward by
running this module with the forwarded stream as its stdin and stdout. It answers like llama.cpp's
server on the paths the user commands use (`/health`, `/v1/models`, `/v1/chat/completions`), says
plainly that it is a stand-in, and exits; the forwarded connection closes with it. This is what
lets the tests drive `llmkube chat`/`curl` through the real API server's pods/portforward.

A streamed chat request (`"stream": true`) is answered as llama.cpp streams: server-sent events,
one chunk per word of the answer (at most `max_tokens`), STREAM_GAP seconds apart, each written
and flushed on its own and stamped with the wall-clock time it was written (`llmkube_sent_at`), so
a test sees when each chunk reached it against when it left (what a relay holds back).

Run: python -m llmkube_testing.stdio_http
"""

import json
import sys
import time
from collections.abc import Iterator
from typing import Any, BinaryIO

STAND_IN_MODEL = "kwok-stand-in"
MAX_BODY = 1 << 20
STREAM_GAP = 0.05  # seconds between two streamed chunks, as a slow model's tokens come


def _read_request(stream: BinaryIO) -> tuple[str, str, bytes] | None:
    request_line = stream.readline(65536).decode("latin-1").strip()
    if not request_line:
        return None
    method, _, rest = request_line.partition(" ")
    path = rest.split(" ", 1)[0]
    length = 0
    while True:
        line = stream.readline(65536).decode("latin-1")
        if line in ("\r\n", "\n", ""):
            break
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = min(int(value.strip() or 0), MAX_BODY)
    return method, path, stream.read(length) if length else b""


def _content(said: str) -> str:
    return f"This is kwok's stand-in for llama.cpp (no model runs here). You said: {said}"


def answer(method: str, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
    """(status, JSON body) for one request: pure, so it is tested without a stream."""
    path = path.split("?", 1)[0]
    if path == "/health":
        return 200, {"status": "ok"}
    if path == "/v1/models":
        return 200, {"object": "list", "data": [{"id": STAND_IN_MODEL, "object": "model"}]}
    if path == "/v1/chat/completions" and method == "POST":
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            return 400, {"error": {"message": "the body is not JSON", "type": "invalid_request_error"}}
        messages = request.get("messages") or [{}]
        said = str(messages[-1].get("content") or "")
        content = _content(said)
        prompt_tokens = sum(len(str(m.get("content") or "").split()) for m in messages)
        return 200, {
            "id": "chatcmpl-stand-in",
            "object": "chat.completion",
            "model": STAND_IN_MODEL,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": len(content.split()),
                "total_tokens": prompt_tokens + len(content.split()),
            },
        }
    return 404, {"error": {"message": f"{method} {path}: not found", "type": "not_found_error"}}


def streamed(body: bytes) -> Iterator[bytes]:
    """The events of a streamed answer to `body`, or nothing when it does not ask for a stream."""
    try:
        request = json.loads(body or b"{}")
    except ValueError:
        return
    if not isinstance(request, dict) or request.get("stream") is not True:
        return
    said = str(((request.get("messages") or [{}])[-1] or {}).get("content") or "")
    words = _content(said).split()
    limit = request.get("max_tokens")
    words = words[: limit if isinstance(limit, int) and limit > 0 else len(words)]
    for index, word in enumerate(words):
        last = index == len(words) - 1
        chunk: dict[str, Any] = {
            "id": "chatcmpl-stand-in",
            "object": "chat.completion.chunk",
            "model": STAND_IN_MODEL,
            "choices": [
                {"index": 0, "delta": {"content": word + " "}, "finish_reason": "stop" if last else None}
            ],
        }
        if last:
            chunk["usage"] = {"prompt_tokens": len(said.split()), "completion_tokens": len(words)}
        yield json.dumps(chunk).encode()
    yield b"[DONE]"


def _stream(events: Iterator[bytes], out: BinaryIO) -> None:
    """Chunked, as llama-server streams: the client knows where the answer ends (the forwarded
    stream itself ends only when the client closes its side: kwok waits for the end of stdin)."""
    out.write(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
        b"Connection: close\r\n\r\n"
    )
    out.flush()
    for number, event in enumerate(events):
        if number:
            time.sleep(STREAM_GAP)
        if event != b"[DONE]":
            stamped = json.loads(event)
            stamped["llmkube_sent_at"] = time.time()
            event = json.dumps(stamped).encode()
        data = b"data: " + event + b"\n\n"
        out.write(b"%x\r\n%s\r\n" % (len(data), data))
        out.flush()
    out.write(b"0\r\n\r\n")
    out.flush()


def main() -> int:
    request = _read_request(sys.stdin.buffer)
    if request is None:
        return 0
    method, path, body = request
    if method == "POST" and path.split("?", 1)[0] == "/v1/chat/completions":
        events = list(streamed(body))
        if events:
            _stream(iter(events), sys.stdout.buffer)
            return 0
    status, payload = answer(*request)
    data = json.dumps(payload).encode()
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}.get(status, "Error")
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
    )
    sys.stdout.buffer.write(head.encode() + data)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
