"""A pod that leaves its Service's ready endpoints (it is being deleted) while a request waits for
its answer there.

Without the drain annotation llama-server, on SIGTERM, stops generating but holds the connections of
the requests it had until the kubelet kills it (30 s later by default): the node tier saw such a
request answered 31 s late. With the annotation it finishes them. The router cannot tell the two
apart, so it sends the request to another ready pod too and uses the first answer: here a pod
that never answers once it has left, and one that still does (draining), against real HTTP."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import orjson
import pytest

from tests.unit.router.proxy_support import RunningProxy, post, running_proxy

CHAT = "/v1/chat/completions"
REQUEST = {"model": "m", "messages": [{"role": "user", "content": "x"}]}


def _answer(name: str) -> bytes:
    return orjson.dumps(
        {
            "id": name,
            "object": "chat.completion",
            "model": "m",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": name}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    )


@dataclass
class HeldServer:
    """Reads each request and answers it once `release` is set; counts the connections that the
    client dropped while their request was held."""

    name: str
    release: asyncio.Event = field(default_factory=asyncio.Event)
    received: asyncio.Event = field(default_factory=asyncio.Event)
    dropped: int = 0
    answered: int = 0
    server: asyncio.Server | None = None
    writers: list[asyncio.StreamWriter] = field(default_factory=list)

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in self.writers:
            writer.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                await reader.readexactly(length)
                self.received.set()
                released = asyncio.ensure_future(self.release.wait())
                gone = asyncio.ensure_future(reader.read(1))  # b"" once the client drops the connection
                await asyncio.wait((released, gone), return_when=asyncio.FIRST_COMPLETED)
                if not released.done():
                    released.cancel()
                    self.dropped += 1
                    return
                gone.cancel()
                await asyncio.gather(gone, return_exceptions=True)  # the reader is free again
                body = _answer(self.name)
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    + b"Content-Length: %d\r\n\r\n" % len(body)
                    + body
                )
                await writer.drain()
                self.answered += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


SPEC = {
    "backends": [{"name": "pods", "inferenceServiceRef": {"name": "pods"}}],
    "defaultRoute": "pods",
}


async def _which_got_it(servers: dict[str, HeldServer]) -> str:
    waits = {asyncio.ensure_future(s.received.wait()): address for address, s in servers.items()}
    done, pending = await asyncio.wait(waits, timeout=5, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    assert done, "no pod got the request"
    return waits[done.pop()]


@dataclass
class Left:
    """A request held by one of two pods when that pod left the ready endpoints."""

    running: RunningProxy
    request: asyncio.Future[tuple[int, dict[str, str], bytes]]
    leaving: str
    staying: str
    servers: dict[str, HeldServer]


@contextlib.asynccontextmanager
async def a_pod_leaves(name: str, tmp_path: Path, session: aiohttp.ClientSession) -> AsyncIterator[Left]:
    """Two pods; a request reaches one; that one leaves the ready endpoints; the other gets the same
    request too. Both release their requests and stop at the end."""
    servers = {}
    for pod in ("a", "b"):
        server = HeldServer(pod)
        servers[await server.start()] = server
    try:
        async with running_proxy(name, tmp_path) as running:
            running.load(SPEC)
            running.endpoints("pods", *servers)
            request = asyncio.ensure_future(post(session, running.url + CHAT, REQUEST))
            leaving = await _which_got_it(servers)
            (staying,) = [address for address in servers if address != leaving]
            running.endpoints("pods", staying)  # the pod is being deleted: no longer ready
            await asyncio.wait_for(servers[staying].received.wait(), 5)  # the same request there too
            yield Left(running, request, leaving, staying, servers)
    finally:
        for server in servers.values():
            server.release.set()
            await server.stop()


@pytest.mark.parametrize("drains", [False, True], ids=["stops-answering", "drains"])
async def test_a_request_on_a_pod_that_leaves_is_answered_by_whichever_pod_answers_first(
    drains: bool, tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    async with a_pod_leaves(f"leaving-{drains}", tmp_path, session) as left:
        old, new = left.servers[left.leaving], left.servers[left.staying]
        (old if drains else new).release.set()
        status, _, body = await asyncio.wait_for(left.request, 5)
        assert status == 200, body
        winner, loser = (old, new) if drains else (new, old)
        assert orjson.loads(body)["id"] == winner.name
        # The other one is dropped: its connection closed, its pod stops working on it.
        for _ in range(100):
            if loser.dropped:
                break
            await asyncio.sleep(0.01)
        assert (loser.dropped, loser.answered, winner.answered) == (1, 0, 1)
        (audit,) = [orjson.loads(line) for line in left.running.audit_lines]
        assert audit["endpoint"] == (left.leaving if drains else left.staying)
        assert audit["tried"] == ["pods", "pods"] and audit["status"] == 200
        # Nothing counts against either pod, and nothing is left in flight.
        state = left.running.state
        assert state.quarantine.quarantined(state.clock()) == []
        assert state.in_flight == {}


async def test_a_client_that_leaves_while_both_pods_hold_its_request_drops_both(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    async with a_pod_leaves("leaving-client-gone", tmp_path, session) as left:
        left.request.cancel()  # the client goes away
        for _ in range(200):
            if all(s.dropped for s in left.servers.values()):
                break
            await asyncio.sleep(0.01)
        assert [s.dropped for s in left.servers.values()] == [1, 1]
        state = left.running.state
        for _ in range(100):
            if not state.in_flight:
                break
            await asyncio.sleep(0.01)
        assert state.in_flight == {}
        assert state._leaving == {}


async def test_a_request_on_the_only_pod_that_leaves_waits_for_it(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    server = HeldServer("only")
    address = await server.start()
    try:
        async with running_proxy("leaving-alone", tmp_path) as running:
            running.load(SPEC)
            running.endpoints("pods", address)
            request = asyncio.ensure_future(post(session, running.url + CHAT, REQUEST))
            await asyncio.wait_for(server.received.wait(), 5)
            running.endpoints("pods")  # gone, and nothing else to go to: its answer is still taken
            await asyncio.sleep(0.1)
            server.release.set()
            status, _, body = await asyncio.wait_for(request, 5)
            assert status == 200 and orjson.loads(body)["id"] == "only"
    finally:
        server.release.set()
        await server.stop()
