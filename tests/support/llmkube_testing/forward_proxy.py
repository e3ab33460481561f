"""A real forward proxy, as a company network has one: `CONNECT host:port` tunnels (what https
requests use) and plain-HTTP requests in absolute form (`GET http://host/path`), relayed to where
they ask, with a log of every target, so a test can say that its traffic went through the proxy
and that what NO_PROXY names did not.

    async with ForwardProxy.running(hosts={"models.corp.test": "127.0.0.1"}) as proxy:
        env = {"HTTPS_PROXY": proxy.url, "NO_PROXY": "..."}
        ...
        assert proxy.targets == ["models.corp.test:8443"]

`hosts` are names only the proxy resolves (the network behind it): a request for such a name can
only succeed through the proxy. `credentials="user:password"` makes it ask for Basic
Proxy-Authorization (407 without it). Standard library only.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

__all__ = ["ForwardProxy", "ProxyRecord"]

_HEAD_LIMIT = 64 * 1024


@dataclass(frozen=True)
class ProxyRecord:
    method: str  # CONNECT, GET, ...
    target: str  # host:port
    status: int  # what the proxy answered (200 for a tunnel made, 407, 502)


@dataclass
class ForwardProxy:
    hosts: Mapping[str, str] = field(default_factory=dict)
    credentials: str = ""
    records: list[ProxyRecord] = field(default_factory=list)
    host: str = "127.0.0.1"
    port: int = 0
    _server: asyncio.base_events.Server | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def url(self) -> str:
        auth = f"{self.credentials}@" if self.credentials else ""
        return f"http://{auth}{self.host}:{self.port}"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def targets(self) -> list[str]:
        """Every host:port a client asked for, in order (tunnels and plain requests)."""
        return [record.target for record in self.records]

    @property
    def tunnels(self) -> list[str]:
        return [record.target for record in self.records if record.method == "CONNECT"]

    @classmethod
    @contextlib.asynccontextmanager
    async def running(
        cls, *, hosts: Mapping[str, str] | None = None, credentials: str = "", host: str = "127.0.0.1"
    ) -> AsyncIterator[ForwardProxy]:
        proxy = cls(hosts=dict(hosts or {}), credentials=credentials, host=host)
        proxy._server = await asyncio.start_server(proxy._serve, host, 0)
        proxy.port = proxy._server.sockets[0].getsockname()[1]
        try:
            yield proxy
        finally:
            proxy._server.close()
            for task in list(proxy._tasks):
                task.cancel()
            await asyncio.gather(*proxy._tasks, return_exceptions=True)
            with contextlib.suppress(Exception):
                await proxy._server.wait_closed()

    def _authorized(self, headers: Mapping[str, str]) -> bool:
        if not self.credentials:
            return True
        expected = "Basic " + base64.b64encode(self.credentials.encode()).decode()
        return headers.get("proxy-authorization", "") == expected

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._one(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass
        except asyncio.CancelledError:
            pass  # the proxy stops: the relay ends here (asyncio's stream callback must not see it)
        finally:
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        if len(head) > _HEAD_LIMIT:
            return
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ", 2)
        headers = {}
        kept: list[str] = []
        for line in lines[1:]:
            if not line:
                continue
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
            if not name.lower().startswith("proxy-"):
                kept.append(line)
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            request_target = ""
        else:
            parts = urlsplit(target)
            host = parts.hostname or ""
            port = str(parts.port or 80)
            request_target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        where = f"{host.strip('[]')}:{port}"
        if not self._authorized(headers):
            self.records.append(ProxyRecord(method, where, 407))
            writer.write(
                b'HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="test"\r\n'
                b"Content-Length: 0\r\nConnection: close\r\n\r\n"
            )
            await writer.drain()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(
                self.hosts.get(host.strip("[]"), host.strip("[]")), int(port)
            )
        except (OSError, ValueError):
            self.records.append(ProxyRecord(method, where, 502))
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            await writer.drain()
            return
        self.records.append(ProxyRecord(method, where, 200))
        if method == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
        else:
            # One request per connection: the client is told so, and the rest is relayed as is.
            rest = [line for line in kept if not line.lower().startswith("connection:")]
            up_writer.write(
                "\r\n".join(
                    [f"{method} {request_target} {version}", *rest, "Connection: close", "", ""]
                ).encode("latin-1")
            )
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer), return_exceptions=True)
        up_writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            if writer.can_write_eof():
                writer.write_eof()
