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
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
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


async def _relay(
    session: aiohttp.ClientSession,
    config: ClientConfig,
    forward: PortForward,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
) -> None:
    headers = await config.auth.headers()
    ssl_option: ssl.SSLContext | bool = config.ssl_context if config.ssl_context is not None else True
    try:
        async with session.ws_connect(
            _ws_url(config, forward.namespace, forward.pod, forward.port),
            protocols=(PORT_FORWARD_PROTOCOL,),
            headers=headers,
            ssl=ssl_option,
            server_hostname=config.tls_server_name,
            proxy=config.proxy.proxy_for(config.host),
            max_msg_size=0,
            autoping=True,
        ) as ws:
            channels = _Channels()

            async def upstream() -> None:
                while chunk := await reader.read(_READ_SIZE):
                    await ws.send_bytes(bytes([_DATA]) + chunk)

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
    config: ClientConfig, namespace: str, pod: str, port: int, *, local_host: str = "127.0.0.1"
) -> AsyncIterator[PortForward]:
    """Listen on ``local_host`` (an ephemeral port, in ``PortForward.local_port``) until the block
    ends; each accepted connection is forwarded to ``port`` of the pod."""
    forward = PortForward(namespace, pod, port)
    relays: set[asyncio.Task[None]] = set()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, connect=15)) as session:

        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            forward.connections += 1
            task = asyncio.current_task()
            if task is not None:
                relays.add(task)
            try:
                await _relay(session, config, forward, reader, writer)
            except asyncio.CancelledError:
                pass  # the forward is closing; the connection goes with it
            finally:
                if task is not None:
                    relays.discard(task)

        server = await asyncio.start_server(accept, local_host, 0)
        forward.local_port = server.sockets[0].getsockname()[1]
        try:
            yield forward
        finally:
            server.close()
            for relay in list(relays):
                relay.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*relays, return_exceptions=True)
            await server.wait_closed()
