"""`kubectl port-forward` for one pod port: a local TCP listener whose every connection is carried
over its own WebSocket to the API server's ``pods/<name>/portforward`` subresource.

Why this and not the Service proxy (``services/<name>:<port>/proxy``): the proxy needs the API
server to reach pod IPs itself, which many clusters do not allow (private control planes, network
policies); port-forward goes through the kubelet, the path `kubectl port-forward` takes, so it works
wherever that does. RBAC: ``create`` (and ``get``) on ``pods/portforward``.

The protocol is the kubelet's ``v4.channel.k8s.io``: binary messages whose first byte is the
channel (0 = data, 1 = error for the first requested port); the first message on each channel is
the port number (uint16, little endian). The API server passes such a WebSocket through to the
kubelet unchanged. There is no half-close: a forwarded connection ends when either side closes, so
HTTP clients must use Content-Length or chunked bodies (they do).

Each frame is written to the local connection as it arrives, and the WebSocket is closed as soon
as the local side closes. That matters: containerd's forwarder, once the pod's server closed its
end, waits up to one second for the client's direction to end too (socat's grace) before it closes
the stream, so a stream left open by the client held every answer's end for a second. A pod's
server that closes after each answer (llama-server after a streamed one) cannot be seen closing
through this protocol until that second has passed, so an HTTP client through a forward uses a
fresh connection for each request (`llmkube benchmark` does). Since opening a stream takes a few
TLS handshakes (this machine to the API server, the API server to the kubelet), a forward for many
connections (`ahead`) keeps one opened ahead of the next (`_Streams`), so a request's first byte
does not wait for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import quote

import aiohttp

from llmkube.kube.rest.config import ClientConfig

__all__ = ["PORT_FORWARD_PROTOCOL", "PortForward", "port_forward"]

PORT_FORWARD_PROTOCOL = "v4.channel.k8s.io"
_DATA, _ERROR = 0, 1
_PORT_PREFIX = 2  # bytes of the port number that open each channel
_READ_SIZE = 64 * 1024
#: how long a stream opened ahead is kept for a connection to come (_Streams)
SPARE_SECONDS = 2.0


@dataclass
class PortForward:
    """A running forward: connect to ``127.0.0.1:local_port``. ``errors`` collects what the kubelet
    reported on the error channel (e.g. nothing listens on the port in the pod)."""

    namespace: str
    pod: str
    port: int
    local_port: int = 0
    errors: list[str] = field(default_factory=list)
    connections: int = 0


def _ws_url(config: ClientConfig, namespace: str, pod: str, port: int) -> str:
    path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(pod, safe='')}/portforward"
    return f"{config.host}{path}?ports={port}"


class _Channels:
    """Splits the server's messages by channel and drops each channel's leading port number."""

    def __init__(self) -> None:
        self._prefix_left = {_DATA: _PORT_PREFIX, _ERROR: _PORT_PREFIX}

    def payload(self, message: bytes) -> tuple[int, bytes]:
        if not message:
            return _DATA, b""
        channel, data = message[0], message[1:]
        left = self._prefix_left.get(channel, 0)
        if left:
            skipped = min(left, len(data))
            self._prefix_left[channel] = left - skipped
            data = data[skipped:]
        return channel, data


async def _open(session: aiohttp.ClientSession, config: ClientConfig, forward: PortForward) -> _Opened:
    headers = await config.auth.headers()
    ssl_option: ssl.SSLContext | bool = config.ssl_context if config.ssl_context is not None else True
    ws = await session.ws_connect(
        _ws_url(config, forward.namespace, forward.pod, forward.port),
        protocols=(PORT_FORWARD_PROTOCOL,),
        headers=headers,
        ssl=ssl_option,
        server_hostname=config.tls_server_name,
        proxy=config.proxy.proxy_for(config.host),
        max_msg_size=0,
        autoping=True,
    )
    return _Opened(ws, time.monotonic())


@dataclass
class _Opened:
    ws: aiohttp.ClientWebSocketResponse
    at: float  # time.monotonic() when it was opened


async def _pipe(
    ws: aiohttp.ClientWebSocketResponse,
    forward: PortForward,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
) -> None:
    channels = _Channels()

    async def upstream() -> None:
        while chunk := await reader.read(_READ_SIZE):
            await ws.send_bytes(bytes([_DATA]) + chunk)
        # The local side closed: so does the stream, at once (the module's docstring).
        await ws.close()

    sender = asyncio.create_task(upstream())
    try:
        async for message in ws:
            if message.type is not aiohttp.WSMsgType.BINARY:
                continue
            channel, data = channels.payload(message.data)
            if channel == _DATA and data:
                writer.write(data)
                await writer.drain()
            elif channel == _ERROR and data:
                forward.errors.append(data.decode(errors="replace"))
    finally:
        sender.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):
            await sender
        await ws.close()


class _Streams:
    """Opens the forward's streams, one ahead of need: a new local connection takes the stream
    opened before it came (a WebSocket through the API server and the kubelet takes a few TLS
    handshakes to open, which would otherwise be added to every request's first byte), and the
    next one is opened at once. A stream kept longer than SPARE_SECONDS is closed unused: the pod's
    server may have closed the idle connection behind it (keep-alive timeouts are 5 s and more),
    which this protocol shows only a second later."""

    def __init__(
        self, session: aiohttp.ClientSession, config: ClientConfig, forward: PortForward, *, ahead: bool
    ) -> None:
        self.session, self.config, self.forward = session, config, forward
        self.spare: asyncio.Task[_Opened] | None = None
        self.closed = False
        self.ahead = ahead

    def _ahead(self) -> None:
        if self.ahead and not self.closed:
            self.spare = asyncio.create_task(_open(self.session, self.config, self.forward))

    async def take(self) -> _Opened:
        spare, self.spare = self.spare, None
        self._ahead()
        if spare is not None:
            try:
                opened = await spare
            except (aiohttp.ClientError, OSError):
                opened = None  # opening it again says why, for this connection
            if opened is not None and not opened.ws.closed and time.monotonic() - opened.at < SPARE_SECONDS:
                return opened
            if opened is not None:
                await opened.ws.close()
        return await _open(self.session, self.config, self.forward)

    async def close(self) -> None:
        self.closed = True
        spare, self.spare = self.spare, None
        if spare is None:
            return
        spare.cancel()
        with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError, OSError):
            await (await spare).ws.close()


async def _relay(
    streams: _Streams, forward: PortForward, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    try:
        opened = await streams.take()
        await _pipe(opened.ws, forward, reader, writer)
    except aiohttp.WSServerHandshakeError as refused:
        forward.errors.append(f"the API server refused the port-forward: {refused.status} {refused.message}")
    except (aiohttp.ClientError, OSError) as failed:
        forward.errors.append(f"port-forward connection failed: {failed}")
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


@asynccontextmanager
async def port_forward(
    config: ClientConfig,
    namespace: str,
    pod: str,
    port: int,
    *,
    local_host: str = "127.0.0.1",
    ahead: bool = False,
) -> AsyncIterator[PortForward]:
    """Listen on ``local_host`` (an ephemeral port, in ``PortForward.local_port``) until the block
    ends; each accepted connection is forwarded to ``port`` of the pod. ``ahead``: keep a stream
    opened ahead of the next connection (for many connections one after another, `_Streams`)."""
    forward = PortForward(namespace, pod, port)
    relays: set[asyncio.Task[None]] = set()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, connect=15)) as session:
        streams = _Streams(session, config, forward, ahead=ahead)

        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            forward.connections += 1
            task = asyncio.current_task()
            if task is not None:
                relays.add(task)
            try:
                await _relay(streams, forward, reader, writer)
            except asyncio.CancelledError:
                pass  # the forward is closing; the connection goes with it
            finally:
                if task is not None:
                    relays.discard(task)

        server = await asyncio.start_server(accept, local_host, 0)
        forward.local_port = server.sockets[0].getsockname()[1]
        streams._ahead()
        try:
            yield forward
        finally:
            server.close()
            await streams.close()
            for relay in list(relays):
                relay.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*relays, return_exceptions=True)
            await server.wait_closed()
