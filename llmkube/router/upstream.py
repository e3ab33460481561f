"""The router's connections to backends: one pool for the pods of InferenceServices (addresses from
EndpointSlices) and one for external providers, whose URLs come from a spec anyone who may write a
ModelRouter controls: that pool connects only where `plan/router/egress.py` allows (a literal is
checked before the request, every address a name resolves to before aiohttp connects to it).

Answers are passed through as the backend sent them: no decompression (the router asks for
`identity`, so the usage in an answer can be read), no redirects followed."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from llmkube.plan.router import egress

__all__ = [
    "BROKEN_CONNECTION",
    "EgressRefused",
    "GuardedResolver",
    "Upstreams",
    "api_server_endpoints",
    "check_literal",
]

Endpoint = tuple[egress.IPAddress, int]
T = TypeVar("T")

#: How a request fails on a connection that had been made: the backend closed or reset it. Caught
#: after aiohttp.ClientConnectorError (a connection that could not be made), itself a ClientOSError.
BROKEN_CONNECTION = (
    aiohttp.ServerDisconnectedError,
    aiohttp.ClientConnectionResetError,
    aiohttp.ClientOSError,
)


class EgressRefused(OSError):
    """An external backend's URL leads where the router may not connect."""


def api_server_endpoints() -> tuple[Endpoint, ...]:
    """The API server as a pod sees it (its Service's address): never an external backend."""
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    try:
        return ((ipaddress.ip_address(host or ""), int(port or "443")),)
    except ValueError:
        return ()


def _literal(host: str) -> egress.IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def check_literal(url: URL, api_servers: Iterable[Endpoint]) -> None:
    address = _literal(url.raw_host or "")
    if address is not None:
        reason = egress.refusal(address, url.port or 0, api_servers)
        if reason is not None:
            raise EgressRefused(f"{url.host} may not be a backend: {reason}")


class GuardedResolver(AbstractResolver):
    def __init__(self, api_servers: tuple[Endpoint, ...]) -> None:
        self._inner = aiohttp.ThreadedResolver()
        self._api_servers = api_servers

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        for result in results:
            address = _literal(result["host"])
            reason = (
                "not an IP address"
                if address is None
                else egress.refusal(address, result["port"] or port, self._api_servers)
            )
            if reason is not None:
                raise EgressRefused(
                    f"{host} resolves to {result['host']}, which may not be a backend: {reason}"
                )
        return results

    async def close(self) -> None:
        await self._inner.close()


def _session(connector: aiohttp.TCPConnector, read_timeout: float) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(
        connector=connector,
        # The pools are shared by every client: a cookie one answer sets (a provider's load
        # balancer sets them) must not go out with the next client's request. No jar also spares
        # each request a filtering pass over it.
        cookie_jar=aiohttp.DummyCookieJar(),
        auto_decompress=False,
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=10.0, sock_read=read_timeout),
        skip_auto_headers=("User-Agent", "Accept-Encoding"),
        raise_for_status=False,
    )


#: How long the router keeps an idle connection to a pod. Below the idle timeout of the servers an
#: InferenceService runs (llama.cpp's cpp-httplib and vLLM's uvicorn close after 5 s): a connection
#: the backend closes just as the router reuses it fails a request the backend never read.
LOCAL_KEEPALIVE_SECONDS = 4.0
#: External providers keep idle connections for a minute or more.
EXTERNAL_KEEPALIVE_SECONDS = 15.0


class Upstreams:
    def __init__(
        self, *, stream_idle_timeout: float, api_servers: tuple[Endpoint, ...] | None = None
    ) -> None:
        self.api_servers = api_server_endpoints() if api_servers is None else api_servers

        def local(**pool: float | bool) -> aiohttp.ClientSession:
            # No limit on connections: a backend's concurrency is its own (its pods' slots), and a
            # pool limit would queue requests inside the router where no metric shows them.
            return _session(aiohttp.TCPConnector(limit=0, **pool), stream_idle_timeout)  # type: ignore[arg-type]

        def external(**pool: float | bool) -> aiohttp.ClientSession:
            resolver = GuardedResolver(self.api_servers)
            connector = aiohttp.TCPConnector(limit=0, resolver=resolver, **pool)  # type: ignore[arg-type]
            return _session(connector, stream_idle_timeout)

        self.local = local(keepalive_timeout=LOCAL_KEEPALIVE_SECONDS)
        self.external = external(keepalive_timeout=EXTERNAL_KEEPALIVE_SECONDS)
        # A new connection for every request, closed after it: the second try of a request whose
        # kept-alive connection broke before any answer (it must not meet another stale one).
        self.fresh_local = local(force_close=True)
        self.fresh_external = external(force_close=True)

    def session(self, *, external: bool, fresh: bool = False) -> aiohttp.ClientSession:
        if external:
            return self.fresh_external if fresh else self.external
        return self.fresh_local if fresh else self.local

    async def send(self, send: Callable[[aiohttp.ClientSession], Awaitable[T]], *, external: bool) -> T:
        """`send` on a pooled connection; when the connection it got broke before a byte of the
        answer (BROKEN_CONNECTION: most often a kept-alive one the backend closed as the request
        went out, so the backend never read it), once more on a new connection, whose outcome is
        the verdict. A connection that could not be made (ClientConnectorError) is one at once."""
        try:
            return await send(self.session(external=external))
        except aiohttp.ClientConnectorError:
            raise
        except BROKEN_CONNECTION:
            return await send(self.session(external=external, fresh=True))

    async def close(self) -> None:
        for session in (self.local, self.external, self.fresh_local, self.fresh_external):
            await session.close()
