"""A TCP relay in front of a server (the API server, an S3 server), for tests that need the network
to fail or to be slow for one client only (the server stays real and shared): TLS passes through
untouched.

    proxy = await TcpProxy.start("127.0.0.1", 6443)
    kubeconfig = kubeconfig_through(proxy, cluster.kubeconfig, tmp_path / "via-proxy")
    proxy.stall()     # a black hole: bytes in flight and new connections wait, requests time out
    proxy.resume()    # everything held flows on
    proxy.throttle(32_000)  # the server's answers arrive at 32,000 bytes a second at most
    proxy.throttle(None)    # at full speed again
    proxy.relayed     # bytes relayed from the server to its clients so far
    proxy.relayed_to("10.88.0.7")  # ... to the clients at that address
    await proxy.refuse()   # the server is gone: connections reset, new ones refused
    await proxy.accept()   # it is back (same port)
    await proxy.close()

`host` is where it listens (loopback by default; another address of this network, e.g. a node's,
for clients elsewhere in it).
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import yaml

__all__ = ["TcpProxy", "kubeconfig_through"]

_CHUNK = 64 * 1024
#: While throttled, the answers are relayed in pieces of a tenth of a second's worth (at least 1 KiB).
_SLICES_PER_SECOND = 10


class TcpProxy:
    def __init__(self, upstream_host: str, upstream_port: int, host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self.host = host
        self.port = 0
        #: bytes relayed from upstream to the clients, over every connection so far
        self.relayed = 0
        self._relayed_to: dict[str, int] = {}
        self._rate: float | None = None
        self._server: asyncio.Server | None = None
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._connections: set[asyncio.Task[None]] = set()
        self._transports: set[asyncio.WriteTransport] = set()

    @classmethod
    async def start(cls, upstream_host: str, upstream_port: int, *, host: str = "127.0.0.1") -> TcpProxy:
        proxy = cls(upstream_host, upstream_port, host)
        await proxy.accept()
        return proxy

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    # -- switches -------------------------------------------------------------------------------

    def stall(self) -> None:
        """Stop relaying in both directions (connections stay open, new ones are held)."""
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def throttle(self, bytes_per_second: float | None) -> None:
        """Relay the server's answers at `bytes_per_second` at most on each connection, the open
        ones included (None: as fast as they come). What clients send is never held back."""
        if bytes_per_second is not None and bytes_per_second <= 0:
            raise ValueError(f"a throttle needs a positive rate, not {bytes_per_second}")
        self._rate = bytes_per_second

    async def refuse(self) -> None:
        """Reset every connection and stop listening: the server looks stopped."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        # Reset, not closed: a connection whose client is gone without a word (a killed pod's)
        # would otherwise never finish closing, and the listener waits for all of them to.
        for transport in list(self._transports):
            transport.abort()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if server is not None:
            await server.wait_closed()

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
        self._transports.add(client_writer.transport)
        upstream_writer: asyncio.StreamWriter | None = None
        try:
            await self._flowing.wait()
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.upstream)
            self._transports.add(upstream_writer.transport)
            peer = client_writer.get_extra_info("peername")
            await asyncio.gather(
                self._pump(client_reader, upstream_writer),
                self._pump(upstream_reader, client_writer, answers=str(peer[0]) if peer else "?"),
            )
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self._connections.discard(task)
            for writer in (client_writer, upstream_writer):
                if writer is not None:
                    self._transports.discard(writer.transport)
                    writer.close()
                    with contextlib.suppress(Exception):
                        await writer.wait_closed()

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, answers: str = ""
    ) -> None:
        """Relays `reader` to `writer`; `answers`: the client's address, when these are the server's
        answers (throttled and counted)."""
        try:
            while chunk := await reader.read(self._piece() if answers else _CHUNK):
                await self._flowing.wait()
                writer.write(chunk)
                await writer.drain()
                if answers:
                    self.relayed += len(chunk)
                    self._relayed_to[answers] = self._relayed_to.get(answers, 0) + len(chunk)
                    if self._rate is not None:
                        await asyncio.sleep(len(chunk) / self._rate)
        finally:
            if writer.can_write_eof():
                with contextlib.suppress(OSError):
                    writer.write_eof()

    def relayed_to(self, client_host: str) -> int:
        """Bytes relayed from upstream to the clients connecting from `client_host` so far."""
        return self._relayed_to.get(client_host, 0)

    def _piece(self) -> int:
        if self._rate is None:
            return _CHUNK
        return max(1024, min(_CHUNK, int(self._rate / _SLICES_PER_SECOND)))


def kubeconfig_through(proxy: TcpProxy, kubeconfig: Path, target: Path) -> Path:
    """A copy of ``kubeconfig`` whose clusters point at ``proxy`` (the server certificate is valid
    for 127.0.0.1, so TLS verification still holds)."""
    config = yaml.safe_load(kubeconfig.read_text())
    for cluster in config.get("clusters") or []:
        cluster["cluster"]["server"] = proxy.url
    target.write_text(yaml.safe_dump(config))
    return target
