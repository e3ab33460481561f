"""Fetches of model sources (the Model controller's, the host agent's) reach only addresses the
egress policy allows.

The rule itself is pure (`llmkube.plan.model.egress.refusal`); this module makes every connection
obey it without resolving a name twice (a name that resolves to a public address for a check and
to 127.0.0.1 for the connection is the classic way around a check, DNS rebinding):

* `GuardedResolver` is the session's resolver: aiohttp connects only to the addresses it returns,
  and it refuses a name when any address the name resolves to is refused;
* aiohttp does not resolve an address literal (`http://127.0.0.1/`, `http://[::ffff:7f00:1]/`),
  so `open_checked` checks a literal host itself before each request;
* `open_checked` follows redirects itself, one hop at a time, so each hop's host is checked like
  the first (aiohttp's own redirect following would connect first);
* behind a proxy (the policy's `proxy`: HTTPS_PROXY / NO_PROXY) aiohttp connects to the proxy
  only, so `open_checked` resolves the hop's host itself and checks every address before the
  proxy is asked for it; the resolver lets the proxy's own address through (the admin's), and
  nothing else.

A refusal is a `SourceNotAllowed` (an OSError, which is what aiohttp expects from a resolver and
wraps into a ClientConnectorError); `refused` finds it in whatever aiohttp raised.
"""

import contextlib
import errno
import ipaddress
import socket
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import replace

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from llmkube.apimachinery.proxy import DIRECT
from llmkube.plan.model.egress import EgressPolicy, refusal

__all__ = [
    "MAX_REDIRECTS",
    "GuardedResolver",
    "PolicySource",
    "SourceNotAllowed",
    "TooManyRedirects",
    "open_checked",
    "refused",
]

#: As aiohttp's own default.
MAX_REDIRECTS = 10
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_SCHEMES = frozenset({"http", "https"})

PolicySource = Callable[[], EgressPolicy]


class SourceNotAllowed(OSError):
    """The policy refused `host`; `detail` says why (`127.0.0.1 is a loopback address`)."""

    def __init__(self, host: str, detail: str) -> None:
        super().__init__(errno.EACCES, detail, host)
        self.host = host
        self.detail = detail


class TooManyRedirects(aiohttp.ClientError):
    pass


def refused(error: BaseException) -> SourceNotAllowed | None:
    """The policy's refusal behind `error` (raised by us, or wrapped by aiohttp), if it is one."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, SourceNotAllowed):
            return current
        seen.add(id(current))
        inner = getattr(current, "os_error", None)  # aiohttp.ClientConnectorError
        current = inner if isinstance(inner, BaseException) else current.__cause__
    return None


def _literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _proxy_endpoints(policy: EgressPolicy) -> frozenset[tuple[str, int]]:
    endpoints = set()
    for proxy in policy.proxy.proxies:
        url = URL(proxy)
        if url.raw_host:
            endpoints.add((url.raw_host.lower(), url.port or (443 if url.scheme == "https" else 80)))
    return frozenset(endpoints)


async def check_resolved(url: URL, policy: EgressPolicy, inner: AbstractResolver | None = None) -> None:
    """Resolve the URL's host and refuse it when the policy refuses any of its addresses (what the
    guarded resolver does for a direct connection, for a request the proxy will connect)."""
    host = url.raw_host or ""
    if _literal(host) is not None:
        return  # check_url has checked it
    resolver = GuardedResolver(lambda: replace(policy, proxy=DIRECT), inner)
    try:
        await resolver.resolve(host, url.port or 0, socket.AF_UNSPEC)
    except SourceNotAllowed:
        raise
    except OSError as error:
        port = url.port or (443 if url.scheme == "https" else 80)
        if any(entry.names(host, port) for entry in policy.allowed):
            return  # the admin named it (whatever it resolves to): the proxy resolves it
        raise SourceNotAllowed(
            host,
            f"{host} does not resolve here ({error.strerror or error}), so the egress rules cannot check it",
        ) from None
    finally:
        if inner is None:
            await resolver.close()


def check_url(url: URL, policy: EgressPolicy) -> None:
    """Refuse a URL the controller must not fetch before anything is sent: a scheme other than
    http(s), or an address literal the policy refuses. A host name is checked by the resolver."""
    if url.scheme not in _SCHEMES:
        raise SourceNotAllowed(str(url), f"only http and https are fetched, not {url.scheme or 'no'} URLs")
    host = url.raw_host or ""
    if not host:
        raise SourceNotAllowed(str(url), "the URL names no host")
    address = _literal(host)
    if address is not None:
        reason = refusal(policy, host, address, url.port or 0)
        if reason is not None:
            raise SourceNotAllowed(host, reason)


class GuardedResolver(AbstractResolver):
    """Resolves with `inner` (aiohttp's threaded resolver by default) and refuses a name when the
    policy refuses any address it resolves to; aiohttp then connects only to what it returned."""

    def __init__(self, policy: PolicySource, inner: AbstractResolver | None = None) -> None:
        self._policy = policy
        self._inner = inner

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        if self._inner is None:
            self._inner = aiohttp.ThreadedResolver()
        results = await self._inner.resolve(host, port, family)
        policy = self._policy()
        if (host.lower(), port) in _proxy_endpoints(policy):
            return results  # the admin's proxy: the rules are asked about what it is asked for
        for result in results:
            address = _literal(result["host"])
            reason = (
                f"{result['host']} is not an IP address"
                if address is None
                else refusal(policy, host, address, result["port"] or port)
            )
            if reason is not None:
                raise SourceNotAllowed(host, f"{host} resolves to {result['host']}; {reason}")
        return results

    async def close(self) -> None:
        if self._inner is not None:
            await self._inner.close()


def _at_hop(error: SourceNotAllowed, hop: URL, first: str) -> SourceNotAllowed:
    if str(hop) == first:
        return error
    return SourceNotAllowed(error.host, f"it redirected to {hop}: {error.detail}")


@contextlib.asynccontextmanager
async def open_checked(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    policy: PolicySource,
    *,
    headers: Mapping[str, str],
    client_timeout: aiohttp.ClientTimeout,
    resolver: AbstractResolver | None = None,
) -> AsyncIterator[aiohttp.ClientResponse]:
    """`session.request(method, url)`, redirects followed one checked hop at a time; yields the
    first answer that is not a redirect. Raises SourceNotAllowed for a refused hop (the message
    names where the source redirected to), TooManyRedirects, or what aiohttp raises. `resolver`
    resolves the hosts asked of a proxy (the system's by default), to check them first."""
    hop = URL(url)
    for _ in range(MAX_REDIRECTS + 1):
        try:
            current = policy()
            check_url(hop, current)
            proxy = current.proxy.proxy_for(str(hop))
            if current.proxy.enabled:
                # The proxy's own host may be named too: checked like any, however it is reached.
                await check_resolved(hop, current, resolver)
            response = await session.request(
                method,
                hop,
                headers=dict(headers),
                timeout=client_timeout,
                allow_redirects=False,
                proxy=proxy,
            )
        except (SourceNotAllowed, aiohttp.ClientError) as error:
            denied = refused(error)
            if denied is None:
                raise
            raise _at_hop(denied, hop, url) from None
        try:
            location = response.headers.get("Location")
            if response.status not in _REDIRECTS or not location:
                yield response
                return
            hop = hop.join(URL(location))
        finally:
            response.release()
    raise TooManyRedirects(f"more than {MAX_REDIRECTS} redirects")
