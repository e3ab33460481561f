"""The router's front door held to numbers, against a router in its own process (its RSS, the bytes
it read, its loop's latency measured from outside) or the real server on loopback: a header that
never ends, heads dribbled a byte at a time (slowloris), bodies built to amplify (`[[],[],...]`,
deep nesting), clients that stop reading, too many connections; and what a client learns of the
pods behind the router (their names, never their addresses)."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from llmkube.router.http.limits import Limits
from llmkube.testing.openai_upstream import Upstream
from tests.unit.router.front_door_support import (
    LoopProbe,
    MiB,
    bytes_read,
    edge_router,
    nested_lists,
    peak_rss,
    reset_peak,
    rss,
    send_until_answered,
)
from tests.unit.router.proxy_support import post, running_proxy

CHAT = "/v1/chat/completions"
SPEC: dict[str, Any] = {
    "backends": [{"name": "alpha", "inferenceServiceRef": {"name": "alpha"}}],
    "defaultRoute": "alpha",
}


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    started = await Upstream(name="alpha").start()
    yield started
    await started.stop()


async def test_a_header_that_never_ends_is_answered_431_at_the_head_limit_and_read_no_further(
    upstream: Upstream,
) -> None:
    """A 16 MiB header value: before, read whole (no 431, the connection kept, RSS +32 MiB)."""
    async with edge_router(SPEC, endpoints={"alpha": [f"127.0.0.1:{upstream.port}"]}) as router:
        await asyncio.sleep(0.3)
        reset_peak(router.pid)
        before_rss, before_read = rss(router.pid), bytes_read(router.pid)
        answer, sent = await asyncio.to_thread(
            send_until_answered,
            router.port,
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nX-Long: ",
            b"v" * 65536,
            16 * MiB,
        )
        read = bytes_read(router.pid) - before_read
        grown = peak_rss(router.pid) - before_rss
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert b"Connection: close" in answer
    # The head limit is 32 KiB: what the router read before it answered is that, and what one read
    # of a socket brings (256 KiB at most), not the 16 MiB.
    limit = Limits().max_head_bytes
    assert read < 8 * limit + (256 << 10), (read, sent)
    assert grown < 4 * MiB, grown


async def test_slowloris_heads_cost_little_memory_never_stall_the_loop_and_end_at_the_head_timeout(
    upstream: Upstream,
) -> None:
    """300 connections each dribbling a head a few bytes at a time: the loop keeps answering at
    once, memory grows by little, and each connection is cut at the head timeout."""
    connections = 300
    limits = {"head_timeout": 1.5, "max_connections_per_client": 0}
    async with edge_router(
        SPEC, endpoints={"alpha": [f"127.0.0.1:{upstream.port}"]}, limits=limits
    ) as router:
        await asyncio.sleep(0.3)
        probe = LoopProbe(router.port).start()
        before = rss(router.pid)
        reset_peak(router.pid)
        streams = [await asyncio.open_connection("127.0.0.1", router.port) for _ in range(connections)]
        started = time.monotonic()
        head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\n" + b"X-Pad: " + b"p" * 20_000
        position, closed_at = 0, None
        while position < len(head):
            for _, writer in streams:
                if not writer.is_closing():
                    writer.write(head[position : position + 50])
            position += 50
            await asyncio.sleep(0.02)
            if all(reader.at_eof() for reader, _ in streams):
                closed_at = time.monotonic() - started
                break
        # Each connection sent under the head limit: the head timeout, not the limit, ends them.
        for reader, _ in streams:
            await asyncio.wait_for(reader.read(), 5)
        closed_at = closed_at or time.monotonic() - started
        grown = peak_rss(router.pid) - before
        await probe.stop()
        for _, writer in streams:
            writer.close()
        async with aiohttp.ClientSession() as session, session.get(router.url + "/metrics") as answer:
            metrics = await answer.text()
    assert closed_at < 1.5 + 2.0, closed_at
    assert probe.worst < 0.1, (probe.worst, len(probe.latencies))
    # 300 heads of up to ~3 KiB each, with the connections' own state: well under 32 MiB.
    assert grown < 32 * MiB, grown
    assert (
        f'llmkube_router_closed_connections_total{{reason="head_timeout",router="edge"}} {connections}.0'
        in metrics
    )


async def test_a_body_built_to_amplify_is_refused_before_parsing_without_memory_or_a_stalled_loop(
    upstream: Upstream,
) -> None:
    """8 MiB of `[[],[],...]` under a 16 MiB body limit: before, +200 MiB and the loop blocked 1.1 s
    (orjson made 2.8 million lists); now a 413 that costs the body and its count of brackets."""
    spec = {**SPEC, "proxy": {"maxRequestBodyBytes": 16 * MiB}}
    body = nested_lists(8 * MiB)
    async with edge_router(spec, endpoints={"alpha": [f"127.0.0.1:{upstream.port}"]}) as router:
        await asyncio.sleep(0.3)
        async with aiohttp.ClientSession() as session:
            # Warm: the first request imports and allocates what every later one reuses.
            await post(
                session, router.url + CHAT, {"model": "m", "messages": [{"role": "user", "content": "x"}]}
            )
            probe = LoopProbe(router.port).start()
            await asyncio.sleep(0.1)
            before = rss(router.pid)
            reset_peak(router.pid)
            started = time.perf_counter()
            async with session.post(
                router.url + CHAT, data=body, headers={"Content-Type": "application/json"}
            ) as answer:
                status, error = answer.status, orjson.loads(await answer.read())["error"]
            took = time.perf_counter() - started
            grown = peak_rss(router.pid) - before
            await asyncio.sleep(0.1)
            await probe.stop()
    assert status == 413 and error["code"] == "request_too_large", error
    assert "too many JSON values" in error["message"]
    assert took < 1.0, took
    # The body itself (8 MiB), read in pieces and joined once: about twice its size, not 25 times.
    assert grown < 3 * 8 * MiB, grown / MiB
    assert probe.worst < 0.25, probe.worst


@pytest.mark.parametrize("depth", [200, 1000])
async def test_deep_nesting_anywhere_in_a_body_is_a_400_not_a_crash(
    tmp_path: Path, upstream: Upstream, depth: int
) -> None:
    """Before: 1,000-deep nesting in a message's role raised RecursionError in prompt_text (a 500);
    200 deep passed parsing and broke orjson's writing of the body (audit, the model's rewrite)."""
    nested: Any = "user"
    for _ in range(depth):
        nested = [nested]
    async with running_proxy("deep", tmp_path) as running:
        running.load({**SPEC, "policy": {"auditLog": {"includeRequestBody": True}}})
        running.endpoints("alpha", f"127.0.0.1:{upstream.port}")
        async with aiohttp.ClientSession() as session:
            for body in (
                {"model": "m", "messages": [{"role": nested, "content": "hi"}]},
                {"model": "m", "messages": [{"role": "user", "content": nested}]},
                {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": nested},
            ):
                raw = orjson.dumps(body) if depth < 250 else _dumps_deep(body)
                async with session.post(
                    running.url + CHAT, data=raw, headers={"Content-Type": "application/json"}
                ) as answer:
                    status, error = answer.status, orjson.loads(await answer.read())["error"]
                assert status == 400, (status, error)
                assert "deeper than 128 levels" in error["message"] or "recursion" in error["message"], error
        assert upstream.requests == 0


def _dumps_deep(value: Any) -> bytes:
    """orjson writes at most 254 levels: deeper test bodies are written here."""
    if isinstance(value, dict):
        return b"{" + b",".join(orjson.dumps(k) + b":" + _dumps_deep(v) for k, v in value.items()) + b"}"
    if isinstance(value, list):
        depth, inner = 0, value
        while isinstance(inner, list) and len(inner) == 1:
            depth, inner = depth + 1, inner[0]
        if depth:
            return b"[" * depth + _dumps_deep(inner) + b"]" * depth
        return b"[" + b",".join(_dumps_deep(v) for v in value) + b"]"
    return orjson.dumps(value)


async def test_bodies_in_flight_share_one_budget_and_one_more_is_told_to_retry(
    tmp_path: Path, upstream: Upstream
) -> None:
    """Bodies being read on every connection together hold at most the body budget: the body that
    does not fit gets a 503 with Retry-After without being read, the others go on."""
    limits = Limits(body_budget=3 * MiB)
    async with running_proxy("budget", tmp_path, limits=limits) as running:
        running.load({**SPEC, "proxy": {"maxRequestBodyBytes": 2 * MiB}})
        running.endpoints("alpha", f"127.0.0.1:{upstream.port}")
        port = int(running.url.rsplit(":", 1)[1])
        head = (
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (1536 << 10)
        )
        # Two bodies of 1.5 MiB whose last bytes never come: they hold 3 MiB of the budget.
        holders = []
        for _ in range(2):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(head + b'{"model":"m","messages":[')
            holders.append((reader, writer))
        await asyncio.sleep(0.2)
        assert running.server.body_budget.held == 3 << 20
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(head)
        answer = await asyncio.wait_for(reader.read(), 5)
        assert answer.startswith(b"HTTP/1.1 503 ") and b"Retry-After: 1\r\n" in answer, answer[:300]
        assert b'"code":"server_busy"' in answer
        for _, holder in holders:
            holder.close()
        await asyncio.sleep(0.2)
        assert running.server.body_budget.held == 0  # given back when the clients left
        async with aiohttp.ClientSession() as session:
            status, _, _ = await post(session, running.url + CHAT, {"model": "m", "messages": []})
            assert status == 200
        assert running.server.stats.refused == {"body_budget": 1}


async def test_connections_over_the_caps_are_answered_503_before_a_byte_is_read(tmp_path: Path) -> None:
    async with running_proxy(
        "caps", tmp_path, limits=Limits(max_connections=6, max_connections_per_client=4)
    ) as running:
        running.load(SPEC)
        port = int(running.url.rsplit(":", 1)[1])
        held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(4)]
        await asyncio.sleep(0.1)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        answer = await asyncio.wait_for(reader.read(), 5)
        assert answer.startswith(b"HTTP/1.1 503 ") and b"Retry-After: 1" in answer
        writer.close()
        # Another address of the loopback is another client, until the total cap.
        others = [
            await asyncio.open_connection("127.0.0.1", port, local_addr=("127.0.0.2", 0)) for _ in range(2)
        ]
        await asyncio.sleep(0.1)
        reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=("127.0.0.3", 0))
        assert (await asyncio.wait_for(reader.read(), 5)).startswith(b"HTTP/1.1 503 ")
        writer.close()
        assert len(running.server.connections) == 6
        assert running.server.stats.refused == {"client_connections": 1, "connections": 1}
        for _, w in held + others:
            w.close()
        await asyncio.sleep(0.1)
        assert not running.server.connections and not running.server.clients
        async with aiohttp.ClientSession() as session, session.get(running.url + "/metrics") as page:
            metrics = await page.text()
        assert (
            'llmkube_router_refused_connections_total{reason="client_connections",router="caps"} 1.0'
            in metrics
        )
        assert 'llmkube_router_open_connections{router="caps"}' in metrics


def _never_reading_client(port: int, request: bytes, stop: Callable[[], bool]) -> None:
    """A client that asks for a stream and reads nothing of it (a tiny receive window)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(request)
    try:
        while not stop():
            time.sleep(0.05)
    finally:
        sock.close()


async def test_a_client_that_stops_reading_is_cut_at_the_write_timeout_and_frees_the_backend(
    tmp_path: Path,
) -> None:
    """Before: the stream held its backend's slot (llama-server's) for as long as the client stayed,
    up to the stream's own timeout (600 s)."""
    upstream = await Upstream(name="alpha", tokens=400_000).start()
    done = False
    try:
        async with running_proxy("slow", tmp_path, limits=Limits(write_timeout=1.0)) as running:
            running.load(SPEC)
            running.endpoints("alpha", f"127.0.0.1:{upstream.port}")
            port = int(running.url.rsplit(":", 1)[1])
            body = orjson.dumps(
                {"model": "m", "stream": True, "messages": [{"role": "user", "content": "go"}]}
            )
            request = (
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%b" % (len(body), body)
            )
            client = asyncio.get_running_loop().run_in_executor(
                None, _never_reading_client, port, request, lambda: done
            )
            started = time.monotonic()
            for _ in range(300):  # 30 s at most
                if upstream.cancelled:
                    break
                await asyncio.sleep(0.1)
            freed_after = time.monotonic() - started
            assert upstream.cancelled == 1 and upstream.in_flight == 0, (upstream.cancelled, freed_after)
            assert running.server.stats.closed.get("write_timeout") == 1
            assert freed_after < 20, freed_after
            line = orjson.loads(running.audit_lines[-1])
            assert line["status"] == 499 and line["outcome"] == "client_gone"
            assert line["completion_tokens"] > 0  # what it was sent is charged
            done = True
            await client
    finally:
        done = True
        await upstream.stop()


async def test_clients_see_backend_names_never_pod_addresses(tmp_path: Path) -> None:
    """A 502 used to say `alpha at 10.88.0.20:8080: ...`, and /metrics named endpoints by address."""
    async with running_proxy("names", tmp_path) as running:
        running.load(SPEC)
        # Nothing listens on these: every attempt fails to connect.
        running.state.set_endpoints(
            "alpha", ("127.0.0.1:9", "127.0.0.1:19"), names={"127.0.0.1:9": "alpha-7f9c-x2"}
        )
        async with aiohttp.ClientSession() as session:
            status, _, body = await post(session, running.url + CHAT, {"model": "m", "messages": []})
            async with session.get(running.url + "/metrics") as page:
                metrics = await page.text()
        message = orjson.loads(body)["error"]["message"]
        assert status == 502 and "alpha: could not connect" in message, message
        assert "127.0.0.1" not in message
        # (the process's API client metrics name the API server's host: the router's own addresses
        # are the endpoints', which must not appear)
        for address in ("127.0.0.1:9", "127.0.0.1:19"):
            assert f'"{address}"' not in metrics, address
        assert 'endpoint="alpha-7f9c-x2"' in metrics and 'endpoint="alpha-1"' in metrics
        # The log and the audit line keep the address (the operator's to read).
        assert orjson.loads(running.audit_lines[-1])["tried"] == ["alpha", "alpha"]
