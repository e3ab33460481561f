"""The TCP relay's throttle (what the node tier slows a model download with, so a pod can be killed
in the middle of it): the server's answers arrive no faster than the rate, the relayed bytes are
counted (by client address too), and lifting the throttle lets them flow at once."""

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest
from llmkube_testing.tcpproxy import TcpProxy

ANSWER = bytes(range(256)) * 240  # 61,440 bytes


async def answer_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """The server: reads one line, answers with ANSWER, closes."""
    await reader.readline()
    writer.write(ANSWER)
    await writer.drain()
    writer.close()


async def fetch(proxy: TcpProxy) -> tuple[bytes, float]:
    start = time.monotonic()
    reader, writer = await asyncio.open_connection(proxy.host, proxy.port)
    writer.write(b"give\n")
    await writer.drain()
    body = await reader.read()
    writer.close()
    return body, time.monotonic() - start


@pytest.fixture
async def proxy() -> AsyncIterator[TcpProxy]:
    server = await asyncio.start_server(answer_once, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    relay = await TcpProxy.start("127.0.0.1", port)
    yield relay
    await relay.close()
    server.close()
    await server.wait_closed()


async def test_a_throttled_answer_takes_its_size_over_the_rate(proxy: TcpProxy) -> None:
    proxy.throttle(40_000)
    body, seconds = await fetch(proxy)
    assert body == ANSWER
    assert seconds >= len(ANSWER) / 40_000 * 0.9, seconds  # 1.54 s at 40,000 bytes a second
    assert proxy.relayed == proxy.relayed_to("127.0.0.1") == len(ANSWER)
    assert proxy.relayed_to("127.0.0.2") == 0


async def test_without_a_throttle_the_answer_is_not_held_back(proxy: TcpProxy) -> None:
    proxy.throttle(40_000)
    proxy.throttle(None)
    body, seconds = await fetch(proxy)
    assert body == ANSWER
    assert seconds < 1.0, seconds
    assert proxy.relayed == len(ANSWER)


def test_a_throttle_needs_a_positive_rate() -> None:
    relay = TcpProxy("127.0.0.1", 1)
    with pytest.raises(ValueError, match="positive rate"):
        relay.throttle(0)


async def test_closing_resets_the_connections_still_open() -> None:
    """A client that reads no more (a killed pod's, whose address is gone) does not keep the relay
    from closing: what is still to be sent to it is dropped and its connection reset."""

    async def flood(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while True:
                writer.write(bytes(1024 * 1024))
                await writer.drain()

    server = await asyncio.start_server(flood, "127.0.0.1", 0)
    relay = await TcpProxy.start("127.0.0.1", server.sockets[0].getsockname()[1])
    _, writer = await asyncio.open_connection(relay.host, relay.port)
    writer.write(b"hello\n")
    for _ in range(10):  # until the client's buffers are full and the relay holds the rest
        await asyncio.sleep(0.1)
    assert relay.relayed > 0
    await asyncio.wait_for(relay.close(), 5)
    writer.transport.abort()
    server.close()
    await server.wait_closed()
