"""One input of the router's HTTP parser, for its fuzzers (hypothesis and atheris): bytes fed to the
server's `data_received` in the given pieces, as a client's socket would bring them, on a
connection with a transport that records what the server wrote. Whatever comes, the server never
raises, never holds more of a head than its limit allows, answers only whole HTTP/1.1 responses
and, once it refused, reads nothing more."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from llmkube.router.http.connection import Connection
from llmkube.router.http.limits import Limits
from llmkube.router.http.messages import Request
from llmkube.router.http.server import HttpServer, Responder

LIMITS = Limits(max_head_bytes=1024, max_headers=16, body_budget=1 << 16)


class _Transport:
    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.closed = False
        self.paused = False

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    def writelines(self, lines: Sequence[bytes]) -> None:
        for line in lines:
            self.write(line)

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default


async def _echo(request: Request, responder: Responder) -> None:
    body = await request.read_body()
    responder.respond(200, [("Content-Type", "text/plain")], body or b"")


async def feed(pieces: Sequence[bytes]) -> None:
    server = HttpServer(_echo, body_limit=lambda: 4096, limits=LIMITS)
    connection = Connection(server)
    transport = _Transport()
    connection.connection_made(transport)  # type: ignore[arg-type]
    for piece in pieces:
        if transport.closed:
            break
        connection.data_received(piece)
        # What the parser holds of a head is never more than the limit (twice, for a head that
        # follows another in the same read).
        assert connection._head_fed <= LIMITS.max_head_bytes, connection._head_fed
        assert connection._stall <= LIMITS.max_head_bytes
        assert len(connection._headers) <= LIMITS.max_headers + 1  # the one that went over
        for _ in range(3):
            await asyncio.sleep(0)
    for _ in range(5):
        await asyncio.sleep(0)
    connection.connection_lost(None)
    for _ in range(3):
        await asyncio.sleep(0)
    assert server.body_budget.held == 0, "a body's reservation outlived its connection"
    answer = b"".join(transport.written)
    for response in answer.split(b"HTTP/1.1 ")[1:]:
        assert response[:3].isdigit(), answer[:200]


def split(data: bytes, cuts: Sequence[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, start = [], 0
    for point in points:
        pieces.append(data[start:point])
        start = point
    pieces.append(data[start:])
    return [p for p in pieces if p]


_loop: asyncio.AbstractEventLoop | None = None


def run(pieces: Sequence[bytes]) -> None:
    global _loop
    if _loop is None:
        _loop = asyncio.new_event_loop()
    _loop.run_until_complete(feed(pieces))
