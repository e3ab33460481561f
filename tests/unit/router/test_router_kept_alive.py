"""A backend that closes a kept-alive connection just as the router sends the next request on it.

llama.cpp's server (cpp-httplib) and uvicorn close a connection idle for 5 s; when that close
crosses the router's next request on it, the request fails on a connection the backend had already
given up, before the backend read it. The node tier saw it: the one pod left of a backend whose
other pod was being deleted got such a failure, was put in quarantine, and its model answered 503
for seconds. Here a real server over loopback does it on every reused connection (reset or plain
close), and every request must still be answered by that one pod, which stays out of quarantine;
a probe meeting such a connection must not take the pod out either. A pod that really fails (a
connection made for the request breaks before the answer) is quarantined at once."""

from __future__ import annotations

import asyncio
import socket
import struct
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import orjson
import pytest

from llmkube.router.health import Prober
from llmkube.router.upstream import LOCAL_KEEPALIVE_SECONDS
from tests.unit.router.proxy_support import post, running_proxy

CHAT = "/v1/chat/completions"
ANSWER = orjson.dumps(
    {
        "id": "c",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
)


@dataclass
class ClosingServer:
    """Answers the first request of each connection (keep-alive) and ends the connection when the
    next one arrives on it: `reset` (RST, as a process that exits) or `close` (FIN, as an idle
    timeout). With `every` it ends every connection at its first request (a pod that is gone)."""

    how: str
    every: bool = False
    connections: int = 0
    answered: list[str] = field(default_factory=list)
    ended: int = 0
    server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        served = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if served or self.every:
                    self._end(writer)
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                length = next(
                    (
                        int(line.split(":", 1)[1])
                        for line in lines
                        if line.lower().startswith("content-length:")
                    ),
                    0,
                )
                await reader.readexactly(length)
                body = ANSWER if method == "POST" else b'{"status":"ok"}'
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: keep-alive\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                await writer.drain()
                self.answered.append(f"{method} {path}")
                served += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    def _end(self, writer: asyncio.StreamWriter) -> None:
        self.ended += 1
        if self.how == "reset":
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.close()


def _spec(**backend: object) -> dict[str, object]:
    return {
        "backends": [{"name": "only", "inferenceServiceRef": {"name": "only"}, **backend}],
        "defaultRoute": "only",
        "proxy": {"quarantineDuration": "1h"},
    }


def test_the_router_lets_go_of_an_idle_pod_connection_before_llama_server_does() -> None:
    assert LOCAL_KEEPALIVE_SECONDS < 5.0  # cpp-httplib's and uvicorn's keep-alive timeout


@pytest.mark.parametrize("how", ["reset", "close"])
async def test_a_kept_alive_connection_the_pod_ends_neither_fails_a_request_nor_quarantines_the_pod(
    how: str, tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    backend = ClosingServer(how)
    port = await backend.start()
    try:
        async with running_proxy(f"kept-alive-{how}", tmp_path) as running:
            running.load(_spec())
            endpoint = f"127.0.0.1:{port}"
            running.endpoints("only", endpoint)
            answers = []
            for i in range(8):
                status, _, body = await post(
                    session,
                    running.url + CHAT,
                    {"model": "m", "messages": [{"role": "user", "content": str(i)}]},
                )
                answers.append((status, body))
            assert [status for status, _ in answers] == [200] * 8, answers
            assert backend.answered == [f"POST {CHAT}"] * 8
            # Every request after the first met a kept-alive connection that the pod ended.
            assert backend.ended >= 4, backend
            assert running.state.quarantine.quarantined(running.state.clock()) == []
            audit = [orjson.loads(line) for line in running.audit_lines]
            assert [(a["tried"], a["endpoint"]) for a in audit] == [(["only"], endpoint)] * 8
    finally:
        await backend.stop()


async def test_a_pod_whose_new_connection_breaks_is_quarantined_at_once(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    backend = ClosingServer("reset", every=True)
    port = await backend.start()
    try:
        async with running_proxy("gone", tmp_path) as running:
            running.load(_spec())
            endpoint = f"127.0.0.1:{port}"
            running.endpoints("only", endpoint)
            status, _, body = await post(session, running.url + CHAT, {"model": "m", "messages": []})
            error = orjson.loads(body)["error"]
            assert status == 502 and error["code"] == "upstream_failed", body
            # A connection made for the request that breaks is the pod's verdict: no second try (that
            # is for a kept-alive one, which the pod may have closed before it read the request).
            assert backend.connections == 1
            assert running.state.quarantine.quarantined(running.state.clock()) == [endpoint]
            status, _, body = await post(session, running.url + CHAT, {"model": "m", "messages": []})
            assert status == 503 and orjson.loads(body)["error"]["code"] == "no_backend"
            assert backend.connections == 1
    finally:
        await backend.stop()


async def test_a_probe_meeting_a_connection_the_pod_ended_does_not_quarantine_it(tmp_path: Path) -> None:
    backend = ClosingServer("reset")
    port = await backend.start()
    try:
        async with running_proxy("probed", tmp_path) as running:
            prober = Prober(running.state, running.proxy.upstreams)
            try:
                running.load(
                    _spec(healthCheck={"path": "/health", "intervalSeconds": 1, "timeoutSeconds": 1})
                )
                endpoint = f"127.0.0.1:{port}"
                running.endpoints("only", endpoint)
                for _ in range(100):
                    if len(backend.answered) >= 3:
                        break
                    await asyncio.sleep(0.05)
                assert backend.answered[:3] == ["GET /health"] * 3
                assert backend.ended >= 1
                assert running.state.quarantine.quarantined(running.state.clock()) == []
            finally:
                await prober.stop()
    finally:
        await backend.stop()
