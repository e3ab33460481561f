"""A TCP relay in front of the API server, for tests that need the network to fail for one client
only (the server stays real and shared): TLS passes through untouched.

    proxy = await TcpProxy.start("127.0.0.1", 6443)
    kubeconfig = kubeconfig_through(proxy, cluster.kubeconfig, tmp_path / "via-proxy")
    proxy.stall()     # a black hole: bytes in flight and new connections wait, requests time out
    proxy.resume()    # everything held flows on
    await proxy.refuse()   # the server is gone: connections reset, new ones refused
    await proxy.accept()   # it is back (same port)
    await proxy.close()
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import yaml

__all__ = ["TcpProxy", "kubeconfig_through"]

_CHUNK = 64 * 1024


class TcpProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.host = "127.0.0.1"
        self.port = 0
        self._server: asyncio.Server | None = None
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._connections: set[asyncio.Task[None]] = set()

    @classmethod
    async def start(cls, upstream_host: str, upstream_port: int) -> TcpProxy:
        proxy = cls(upstream_host, upstream_port)
        await proxy.accept()
        return proxy

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    # -- switches -------------------------------------------------------------------------------

    def stall(self) -> None:
        """Stop relaying in both directions (connections stay open, new ones are held)."""
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    async def refuse(self) -> None:
        """Close every connection and stop listening: the server looks stopped."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    async def accept(self) -> None:
        """Listen (again, on the same port once one was chosen)."""
        if self._server is None:
            self._server = await asyncio.start_server(self._relay, self.host, self.port, reuse_address=True)
            self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        self.resume()
        await self.refuse()

    # -- relaying -------------------------------------------------------------------------------

    async def _relay(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        upstream_writer: asyncio.StreamWriter | None = None
        try:
            await self._flowing.wait()
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.upstream)
            await asyncio.gather(
                self._pump(client_reader, upstream_writer), self._pump(upstream_reader, client_writer)
            )
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self._connections.discard(task)
            for writer in (client_writer, upstream_writer):
                if writer is not None:
                    writer.close()
                    with contextlib.suppress(Exception):
                        await writer.wait_closed()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while chunk := await reader.read(_CHUNK):
                await self._flowing.wait()
                writer.write(chunk)
                await writer.drain()
        finally:
            if writer.can_write_eof():
                with contextlib.suppress(OSError):
                    writer.write_eof()


def kubeconfig_through(proxy: TcpProxy, kubeconfig: Path, target: Path) -> Path:
    """A copy of ``kubeconfig`` whose clusters point at ``proxy`` (the server certificate is valid
    for 127.0.0.1, so TLS verification still holds)."""
    config = yaml.safe_load(kubeconfig.read_text())
    for cluster in config.get("clusters") or []:
        cluster["cluster"]["server"] = proxy.url
    target.write_text(yaml.safe_dump(config))
    return target
