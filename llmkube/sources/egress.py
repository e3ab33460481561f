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
  the first (aiohttp's own redirect following would connect first).

A refusal is a `SourceNotAllowed` (an OSError, which is what aiohttp expects from a resolver and
wraps into a ClientConnectorError); `refused` finds it in whatever aiohttp raised.
"""

import contextlib
import errno
import ipaddress
import socket
from collections.abc import AsyncIterator, Callable, Mapping

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

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
) -> AsyncIterator[aiohttp.ClientResponse]:
    """`session.request(method, url)`, redirects followed one checked hop at a time; yields the
    first answer that is not a redirect. Raises SourceNotAllowed for a refused hop (the message
    names where the source redirected to), TooManyRedirects, or what aiohttp raises."""
    hop = URL(url)
    for _ in range(MAX_REDIRECTS + 1):
        try:
            check_url(hop, policy())
            response = await session.request(
                method, hop, headers=dict(headers), timeout=client_timeout, allow_redirects=False
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
