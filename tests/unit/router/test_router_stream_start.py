"""How a stream starts through the router, and a client that leaves before the router is told.

A backend (a real server over loopback, writing exact bytes) that sends its headers and first event
together has both reach the client before its next event; one that sends its headers alone (a
server that answers before its first token) has the router's headers reach the client at once, not
held back until that first event. And a client whose connection closes mid-stream (the server
cancels its request; a chunk relayed in between finds the client gone) is a client that left (499,
`client_gone`), not a failure of the router (it once was a 500 `internal_error` with a traceback)
nor of the backend: the backend's connection is closed, it stays out of quarantine."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import orjson
import structlog

from tests.unit.router.proxy_support import RunningProxy, running_proxy

CHAT = "/v1/chat/completions"
BODY = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True})
HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
    b"Cache-Control: no-cache\r\n\r\n"
)


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _event(index: int) -> bytes:
    delta = {"choices": [{"index": 0, "delta": {"content": f"t{index} "}, "finish_reason": None}]}
    return b"data: " + orjson.dumps(delta) + b"\n\n"


@dataclass
class ScriptedBackend:
    """Answers each request with a stream of `events` events: the first in the same write as the
    headers (`with_head`) or after `go` is set; the rest `interval` apart, then [DONE]."""

    events: int
    with_head: bool
    interval: float = 0.0
    go: asyncio.Event = field(default_factory=asyncio.Event)
    sent: int = 0
    closed_early: int = 0
    server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            await reader.readexactly(length)
            if self.with_head:
                writer.write(HEAD + _chunk(_event(0)))
            else:
                writer.write(HEAD)
                await writer.drain()
                await self.go.wait()
                writer.write(_chunk(_event(0)))
            self.sent = 1
            for index in range(1, self.events):
                await asyncio.sleep(self.interval)
                writer.write(_chunk(_event(index)))
                await writer.drain()
                self.sent += 1
            writer.write(_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
            await writer.drain()
            await reader.read()  # until the router closes its connection
        except (ConnectionError, asyncio.IncompleteReadError):
            self.closed_early += 1
        finally:
            writer.close()


async def _routed(running: RunningProxy, backend: ScriptedBackend) -> str:
    endpoint = await backend.start()
    running.load({"backends": [{"name": "b", "inferenceServiceRef": {"name": "b"}}], "defaultRoute": "b"})
    running.endpoints("b", endpoint)
    return endpoint


async def _eventually(condition: Callable[[], bool], within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.01)


def _request(port: int) -> bytes:
    return (
        f"POST {CHAT} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(BODY)}\r\n\r\n"
    ).encode() + BODY


async def test_headers_and_a_first_event_sent_together_reach_the_client_before_the_next(
    tmp_path: Path,
) -> None:
    backend = ScriptedBackend(events=3, with_head=True, interval=0.5)
    async with running_proxy("together", tmp_path) as running:
        await _routed(running, backend)
        port = int(running.url.rsplit(":", 1)[1])
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(_request(port))
            first = await asyncio.wait_for(reader.read(65536), 5)
            # The backend holds its second event for half a second: the client's first read came
            # before it, and holds the headers and the first event.
            assert backend.sent == 1
            assert first.startswith(b"HTTP/1.1 200 OK\r\n")
            assert b"text/event-stream" in first and b"t0 " in first
        finally:
            writer.close()
        await backend.stop()


async def test_headers_sent_alone_reach_the_client_before_the_first_event(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    backend = ScriptedBackend(events=3, with_head=False)
    async with running_proxy("alone", tmp_path) as running:
        await _routed(running, backend)
        async with session.post(running.url + CHAT, data=BODY) as answer:
            # The client has the status and headers while the backend still holds every event.
            assert answer.status == 200 and answer.content_type == "text/event-stream"
            assert backend.sent == 0
            backend.go.set()
            body = await answer.read()
        assert body == _event(0) + _event(1) + _event(2) + b"data: [DONE]\n\n"
        await backend.stop()


async def test_a_client_whose_connection_closes_mid_stream_is_gone_not_a_failure(tmp_path: Path) -> None:
    backend = ScriptedBackend(events=400, with_head=True, interval=0.02)
    async with running_proxy("leaver", tmp_path) as running:
        endpoint = await _routed(running, backend)
        port = int(running.url.rsplit(":", 1)[1])
        with structlog.testing.capture_logs() as logs:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(_request(port))
            assert b"t0 " in await asyncio.wait_for(reader.read(65536), 5)
            writer.transport.abort()  # gone, mid-stream
            await _eventually(lambda: bool(running.audit_lines))
            # The backend's connection is closed: it stops generating long before its 400 events.
            await _eventually(lambda: backend.closed_early > 0)
        [line] = [orjson.loads(raw) for raw in running.audit_lines]
        assert (line["status"], line["outcome"], line["backend"]) == (499, "client_gone", "b")
        assert backend.closed_early == 1 and backend.sent < 400
        assert not [entry for entry in logs if entry.get("log_level") in ("error", "critical")], logs
        assert running.state.quarantine.usable(endpoint, running.state.clock())
        await backend.stop()
