"""Which proxy a request goes through: `HTTPS_PROXY` / `HTTP_PROXY` / `NO_PROXY` read the way Go's
`golang.org/x/net/http/httpproxy` reads them (kubectl, client-go, Helm and most of the cluster's
tools), so one environment means the same thing to all of them (pure).

* `https://` requests use HTTPS_PROXY (or https_proxy), `http://` ones HTTP_PROXY (or
  http_proxy); there is no fallback from one to the other;
* a proxy value without a scheme is an `http://` proxy (`proxy.corp:3128`); `http` and `https`
  proxies are spoken (an `https` proxy is reached over TLS), SOCKS is refused with a clear error;
* `localhost` and loopback addresses are never proxied;
* NO_PROXY is a comma-separated list: `*` (nothing is proxied), an IP address (`10.0.0.1`,
  optionally with a port), a CIDR (`10.96.0.0/12`), a domain (`corp.example` matches that name
  and every name below it), `.corp.example` or `*.corp.example` (only the names below it), each
  domain optionally with a port (`corp.example:8443`).

A kubeconfig's `proxy-url` replaces all of this for that cluster (client-go's rule): every request
to its API server goes through that proxy, loopback included.
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

__all__ = [
    "DIRECT",
    "ProxyConfig",
    "ProxyURLError",
    "in_cluster_bypass",
    "no_proxy_matches",
    "parse_proxy_url",
]

#: The proxy schemes spoken (client-go also speaks socks5; ours do not).
PROXY_SCHEMES = frozenset({"http", "https"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


class ProxyURLError(ValueError):
    """A proxy setting that cannot be used (its scheme, no host)."""


def parse_proxy_url(value: str) -> str:
    """The proxy URL of an environment value or a `proxy-url`; "" for an empty value. Like Go, a
    value with no scheme (`proxy.corp:3128`) is an http proxy. Raises ProxyURLError."""
    value = value.strip()
    if not value:
        return ""
    parts = urlsplit(value)
    if not parts.scheme or not parts.netloc:
        parts = urlsplit(f"http://{value}")
    scheme = parts.scheme.lower()
    if scheme not in PROXY_SCHEMES:
        raise ProxyURLError(
            f"proxy {_shown(parts)}: only http:// and https:// proxies are supported, not {scheme}://"
        )
    if not parts.hostname:
        raise ProxyURLError(f"proxy {value!r} names no host")
    try:
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError:
        raise ProxyURLError(f"proxy {_shown(parts)} has an invalid port") from None
    return parts._replace(scheme=scheme).geturl()


def _shown(parts: SplitResult) -> str:
    """A proxy URL without its password (it may carry `user:password@`)."""
    host = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{host}"


@dataclass(frozen=True)
class _Entry:
    """One NO_PROXY entry."""

    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None  # an address or a CIDR
    domain: str = ""  # ".corp.example": matches the names below it
    match_host: bool = False  # the domain matches itself too (`corp.example`, not `.corp.example`)
    port: str = ""  # "" for every port
    everything: bool = False  # `*`

    def matches(
        self, host: str, port: str, address: ipaddress.IPv4Address | ipaddress.IPv6Address | None
    ) -> bool:
        if self.everything:
            return True
        if self.network is not None:
            return address is not None and address in self.network and (not self.port or self.port == port)
        if not self.domain:
            return False
        named = host.endswith(self.domain) or (self.match_host and host == self.domain[1:])
        return named and (not self.port or self.port == port)


def _split_host_port(entry: str) -> tuple[str, str] | None:
    """Go's net.SplitHostPort, for an entry: `host:port` or `[v6]:port`; None when there is no port."""
    if entry.startswith("["):
        end = entry.find("]")
        if end < 0 or entry[end + 1 : end + 2] != ":":
            return None
        return entry[1:end], entry[end + 2 :]
    if entry.count(":") != 1:
        return None
    host, _, port = entry.partition(":")
    return host, port


def _parse_entries(no_proxy: str) -> tuple[_Entry, ...]:
    entries: list[_Entry] = []
    for raw in no_proxy.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return (_Entry(everything=True),)
        if "/" in entry:
            with contextlib.suppress(ValueError):  # a malformed entry is ignored, as Go does
                entries.append(_Entry(network=ipaddress.ip_network(entry, strict=False)))
            continue
        host, port = _split_host_port(entry) or (entry, "")
        if not host:
            continue
        try:
            address = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            address = None
        if address is not None:
            entries.append(_Entry(network=ipaddress.ip_network(address), port=port))
            continue
        if host.startswith("*."):
            host = host[1:]
        match_host = not host.startswith(".")
        entries.append(
            _Entry(domain=host if not match_host else f".{host}", match_host=match_host, port=port)
        )
    return tuple(entries)


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def no_proxy_matches(no_proxy: str, host: str, port: int) -> bool:
    """Whether a request to `host:port` goes direct: loopback and `localhost` always, else when a
    NO_PROXY entry names it."""
    host = host.strip().lower().rstrip(".")
    if host == "localhost":
        return True
    address = _address(host)
    if address is not None and address.is_loopback:
        return True
    return any(entry.matches(host, str(port), address) for entry in _parse_entries(no_proxy))


@dataclass(frozen=True)
class ProxyConfig:
    """The proxies of a process (its environment, or flags that stand for it), each already a
    proxy URL (`parse_proxy_url`); "" for none."""

    http_proxy: str = ""
    https_proxy: str = ""
    no_proxy: str = ""
    #: the kubeconfig's `proxy-url`: every request, loopback included, NO_PROXY ignored
    always: str = ""

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> ProxyConfig:
        """Go's reading: the upper-case name first, then the lower-case one. Raises ProxyURLError."""

        def first(*names: str) -> str:
            return next((environ[name] for name in names if environ.get(name)), "")

        return cls(
            http_proxy=parse_proxy_url(first("HTTP_PROXY", "http_proxy")),
            https_proxy=parse_proxy_url(first("HTTPS_PROXY", "https_proxy")),
            no_proxy=first("NO_PROXY", "no_proxy"),
        )

    @classmethod
    def through(cls, proxy_url: str) -> ProxyConfig:
        """Every request through `proxy_url` (a kubeconfig's `proxy-url`). Raises ProxyURLError."""
        return cls(always=parse_proxy_url(proxy_url))

    @property
    def enabled(self) -> bool:
        return bool(self.always or self.http_proxy or self.https_proxy)

    @property
    def proxies(self) -> tuple[str, ...]:
        """Every proxy URL in use (the egress rules let these through)."""
        return tuple(dict.fromkeys(p for p in (self.always, self.http_proxy, self.https_proxy) if p))

    def proxy_for(self, url: str) -> str | None:
        """The proxy URL for a request to `url`, or None to connect directly."""
        if self.always:
            return self.always
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        proxy = self.https_proxy if scheme == "https" else self.http_proxy if scheme == "http" else ""
        if not proxy or not parts.hostname:
            return None
        try:
            port = parts.port or _DEFAULT_PORTS[scheme]
        except ValueError:
            return None
        return None if no_proxy_matches(self.no_proxy, parts.hostname, port) else proxy

    def bypassing(self, entries: Iterable[str]) -> ProxyConfig:
        """The same proxies, NO_PROXY extended by `entries` (the cluster's own addresses)."""
        present = [e.strip() for e in self.no_proxy.split(",") if e.strip()]
        added = [e for e in entries if e and e not in present]
        return ProxyConfig(
            http_proxy=self.http_proxy,
            https_proxy=self.https_proxy,
            no_proxy=",".join([*present, *added]),
            always=self.always,
        )

    def environment(self) -> dict[str, str]:
        """The variables a container needs to see the same proxies: both spellings, since curl reads
        only the lower-case `http_proxy` and Go and Python read either."""
        env: dict[str, str] = {}
        for value, names in (
            (self.http_proxy, ("HTTP_PROXY", "http_proxy")),
            (self.https_proxy, ("HTTPS_PROXY", "https_proxy")),
            (self.no_proxy, ("NO_PROXY", "no_proxy")),
        ):
            if value:
                env.update(dict.fromkeys(names, value))
        return env


def in_cluster_bypass(
    *, cluster_domain: str = "cluster.local", networks: Iterable[str] = (), hosts: Iterable[str] = ()
) -> tuple[str, ...]:
    """NO_PROXY entries for the cluster's own addresses, which a proxy outside it cannot reach:
    Service names (`.svc`, the cluster domain), the Service and Pod networks, the API server."""
    domain = cluster_domain.strip(".")
    return tuple(dict.fromkeys([".svc", *([f".{domain}"] if domain else []), *networks, *hosts]))


#: No proxy at all: every request goes direct.
DIRECT = ProxyConfig()
