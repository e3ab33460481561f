"""A stand-in for the API server's and the kubelet's `pods/<name>/portforward` on loopback: the
`v4.channel.k8s.io` WebSocket protocol (each message's first byte the channel, 0 data and 1 error;
each channel's first message the port, uint16 little endian), each stream forwarded to a real TCP
server as containerd's forwarder does, its one-second grace included: once the server closed its
end, the stream stays open until the client's direction ends too, or a second has passed.

So the CLI's port-forward (llmkube/kube/rest/portforward.py) is tested against the protocol and the
timing a real node has, without one. Every stream is recorded: when it opened, when the server
closed its end, when the stream ended.
"""

import asyncio
import contextlib
import struct
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from aiohttp import WSMsgType, web

PROTOCOL = "v4.channel.k8s.io"
#: containerd's: `const timeout = time.Second` after one direction of a forward ended
CONTAINERD_GRACE = 1.0


@dataclass
class Stream:
    opened: float
    server_closed: float | None = None
    ended: float | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)  # set when it ended


@dataclass
class ForwardStandIn:
    base: str
    streams: list[Stream] = field(default_factory=list)


async def _forward(
    request: web.Request, target: tuple[str, int], record: list[Stream]
) -> web.WebSocketResponse:
    ws = web.WebSocketResponse(protocols=(PROTOCOL,))
    await ws.prepare(request)
    stream = Stream(time.monotonic())
    record.append(stream)
    port = struct.pack("<H", int(request.query.get("ports", "0")))
    await ws.send_bytes(b"\x00" + port)
    await ws.send_bytes(b"\x01" + port)
    try:
        reader, writer = await asyncio.open_connection(*target)
    except OSError as error:
        await ws.send_bytes(b"\x01" + str(error).encode())
        await ws.close()
        return ws

    async def to_server() -> None:
        async for message in ws:
            if message.type is WSMsgType.BINARY and message.data[:1] == b"\x00":
                writer.write(message.data[1:])
                await writer.drain()

    async def to_client() -> None:
        while chunk := await reader.read(32 * 1024):
            await ws.send_bytes(b"\x00" + chunk)
        stream.server_closed = time.monotonic()

    sending, receiving = asyncio.create_task(to_client()), asyncio.create_task(to_server())
    done, _ = await asyncio.wait({sending, receiving}, return_when=asyncio.FIRST_COMPLETED)
    if receiving not in done:
        # The server's end closed first: the client's direction has a second to end (containerd).
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(receiving), CONTAINERD_GRACE)
    for task in (sending, receiving):
        task.cancel()
    writer.close()
    await ws.close()
    stream.ended = time.monotonic()
    stream.done.set()
    return ws


@contextlib.asynccontextmanager
async def running_forward(target: tuple[str, int]) -> AsyncIterator[ForwardStandIn]:
    """The stand-in on a free loopback port, every pod's port forwarded to `target`."""
    record: list[Stream] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        return await _forward(request, target, record)

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/{namespace}/pods/{pod}/portforward", handler)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    standin = ForwardStandIn(f"http://127.0.0.1:{port}")
    standin.streams = record
    try:
        yield standin
    finally:
        await runner.cleanup()
