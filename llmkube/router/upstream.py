"""The router's connections to backends: one pool for the pods of InferenceServices (addresses from
EndpointSlices) and one for external providers, whose URLs come from a spec anyone who may write a
ModelRouter controls: that pool connects only where `plan/router/egress.py` allows (a literal is
checked before the request, every address a name resolves to before the router connects to it).

Answers are passed through as the backend sent them: no decompression (the router asks for
`identity`, so the usage in an answer can be read), no redirects followed, no cookies kept (the
pools are shared by every client: a cookie one answer sets must not go out with the next client's
request).

Behind a company proxy (the router's HTTPS_PROXY / HTTP_PROXY / NO_PROXY, read as kubectl reads
them; the controller gives its own to the router pods) external providers are reached through it
in CONNECT tunnels, the provider's host still resolved and checked here first; the cluster's own
addresses (`.svc`, the cluster domain, the API server's Service address) never go to the proxy, and
the pods of InferenceServices are always reached directly."""

from __future__ import annotations

import asyncio
import base64
import functools
import ipaddress
import os
import socket
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit

from llmkube.apimachinery.proxy import DIRECT, ProxyConfig, in_cluster_bypass
from llmkube.plan.router import egress
from llmkube.router.http import Answer, Origin, Pool, Resolve, Route, Tunnel

__all__ = [
    "EXTERNAL_KEEPALIVE_SECONDS",
    "LOCAL_KEEPALIVE_SECONDS",
    "EgressRefused",
    "Upstreams",
    "api_server_endpoints",
    "check_literal",
    "guarded_resolve",
    "origin_of",
    "proxy_route",
]

Endpoint = tuple[egress.IPAddress, int]


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


@functools.lru_cache(maxsize=4096)
def origin_of(url: str) -> tuple[Origin, str]:
    """The origin of an http(s) URL and the request target (path and query) on it (remembered:
    the URLs are a pod's address or a provider's, and one of a few paths)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise EgressRefused(f"{url} is not an http(s) URL")
    port = parts.port or (443 if scheme == "https" else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Origin(scheme, parts.hostname, port), target


def check_literal(origin: Origin, api_servers: Iterable[Endpoint]) -> None:
    address = _literal(origin.host)
    if address is not None:
        reason = egress.refusal(address, origin.port, api_servers)
        if reason is not None:
            raise EgressRefused(f"{origin.host} may not be a backend: {reason}")


def guarded_resolve(api_servers: tuple[Endpoint, ...]) -> Resolve:
    """Resolve a name and check every address it has: one that may not be a backend refuses the
    name (a name that resolves to a mix is refused whole, so no retry reaches the bad one)."""

    async def resolve(host: str, port: int) -> list[tuple[str, int]]:
        if _literal(host) is not None:
            check_literal(Origin("http", host, port), api_servers)
            return [(host.strip("[]"), port)]
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        found: list[tuple[str, int]] = []
        for _family, _type, _proto, _name, sockaddr in infos:
            resolved = str(sockaddr[0])
            literal = _literal(resolved)
            reason = "not an IP address" if literal is None else egress.refusal(literal, port, api_servers)
            if reason is not None:
                raise EgressRefused(f"{host} resolves to {resolved}, which may not be a backend: {reason}")
            if (resolved, port) not in found:
                found.append((resolved, port))
        return found

    return resolve


def _tunnel(proxy_url: str) -> Tunnel:
    parts = urlsplit(proxy_url)
    scheme = parts.scheme.lower()
    port = parts.port or (443 if scheme == "https" else 80)
    authorization = ""
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        authorization = "Basic " + base64.b64encode(pair.encode()).decode()
    return Tunnel(Origin(scheme, parts.hostname or "", port), authorization)


def proxy_route(proxy: ProxyConfig, api_servers: Iterable[Endpoint] = ()) -> Route | None:
    """Which external origins go through the proxy (None when there is none): NO_PROXY's, and the
    cluster's own addresses, which a proxy outside the cluster cannot reach."""
    if not proxy.enabled:
        return None
    hosts = [str(address) for address, _ in api_servers]
    config = proxy.bypassing(in_cluster_bypass(hosts=hosts))
    tunnels = {url: _tunnel(url) for url in config.proxies}

    def route(origin: Origin) -> Tunnel | None:
        proxy_url = config.proxy_for(f"{origin.scheme}://{origin.host_header}/")
        return tunnels[proxy_url] if proxy_url is not None else None

    return route


#: How long the router keeps an idle connection to a pod. Below the idle timeout of the servers an
#: InferenceService runs (llama.cpp's cpp-httplib and vLLM's uvicorn close after 5 s): a connection
#: the backend closes just as the router reuses it fails a request the backend never read.
LOCAL_KEEPALIVE_SECONDS = 4.0
#: External providers keep idle connections for a minute or more.
EXTERNAL_KEEPALIVE_SECONDS = 15.0


class Upstreams:
    def __init__(
        self,
        *,
        stream_idle_timeout: float,
        api_servers: tuple[Endpoint, ...] | None = None,
        proxy: ProxyConfig = DIRECT,
    ) -> None:
        self.api_servers = api_server_endpoints() if api_servers is None else api_servers
        self.local = Pool(keepalive=LOCAL_KEEPALIVE_SECONDS, read_timeout=stream_idle_timeout)
        self.external = Pool(
            keepalive=EXTERNAL_KEEPALIVE_SECONDS,
            read_timeout=stream_idle_timeout,
            resolve=guarded_resolve(self.api_servers),
            route=proxy_route(proxy, self.api_servers),
        )

    async def send(
        self,
        url: str,
        method: str,
        headers: Iterable[tuple[str, str]],
        body: bytes = b"",
        *,
        external: bool,
    ) -> Answer:
        """`method url` through the pool of its kind (Pool.send: a kept-alive connection that broke
        before the answer is tried once more on a new one). An external URL's literal address is
        checked first, a name's addresses when it is resolved."""
        origin, target = origin_of(url)
        if external:
            check_literal(origin, self.api_servers)
            return await self.external.send(origin, method, target, headers, body)
        return await self.local.send(origin, method, target, headers, body)

    async def close(self) -> None:
        await self.local.close()
        await self.external.close()
