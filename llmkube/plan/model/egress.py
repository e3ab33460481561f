"""Which addresses the controller may fetch a Model's http(s) source from (pure).

The controller sends a HEAD and Range GETs to the host a Model names, from inside the cluster and
with the controller's network position; whoever may create a Model may name any host. So the
addresses only the cluster or the controller's own host can reach are refused by default: the
loopback and unspecified addresses (the controller's own listeners), link-local and cloud metadata
addresses (instance credentials), the Kubernetes API server, and the cluster's Service and Pod
networks. `--model-source-allowed-hosts` names exceptions (an in-cluster model mirror, say); no
exception ever opens the API server's own endpoint.

The I/O side (llmkube/sources/egress.py) asks `refusal` about every address a host name
resolves to and connects only to addresses it allowed, and asks again on every redirect.

Behind a company proxy (HTTPS_PROXY / HTTP_PROXY / NO_PROXY in the process's environment, read
as kubectl reads them: llmkube/apimachinery/proxy.py) the rule is the same: it is asked about the
host the source names (resolved here, every address checked), never about the proxy, which is the
admin's; the cluster's own addresses (`.svc`, the cluster domain, the Service and Pod networks)
never go through the proxy, which cannot reach them.
"""

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llmkube.apimachinery.proxy import DIRECT, ProxyConfig, in_cluster_bypass
from llmkube.plan.allowed_hosts import (
    ALLOWED_HOST_FORMS,
    AllowedHost,
    IPAddress,
    IPNetwork,
    normalized,
    parse_allowed_host,
    parse_allowed_hosts,
    split_entries,
)

# The host entries moved to plan/allowed_hosts.py (the router reads them too); still importable here.
__all__ = [
    "ALLOWED_HOST_FORMS",
    "DEFAULT_DENIED",
    "AllowedHost",
    "DeniedNetwork",
    "EgressConfig",
    "EgressPolicy",
    "Endpoint",
    "IPAddress",
    "IPNetwork",
    "api_endpoints_of",
    "cluster_networks",
    "endpoints_at",
    "normalized",
    "parse_allowed_host",
    "parse_allowed_hosts",
    "parse_cidrs",
    "pod_cidrs_of",
    "policy_for",
    "proxy_bypassing_cluster",
    "refusal",
    "service_cidrs_of",
]


@dataclass(frozen=True)
class DeniedNetwork:
    network: IPNetwork
    #: what the addresses are, for the message ("a loopback address")
    what: str


def _denied(cidr: str, what: str) -> DeniedNetwork:
    return DeniedNetwork(ipaddress.ip_network(cidr), what)


#: Refused whatever the cluster (first match names the reason).
DEFAULT_DENIED: tuple[DeniedNetwork, ...] = (
    _denied("127.0.0.0/8", "a loopback address"),
    _denied("::1/128", "a loopback address"),
    # Connecting to 0.0.0.0 (or ::) reaches the connecting host itself on Linux.
    _denied("0.0.0.0/8", "an unspecified address (it reaches the controller's own host)"),
    _denied("::/128", "an unspecified address (it reaches the controller's own host)"),
    _denied("169.254.0.0/16", "a link-local address (cloud metadata services answer on 169.254.169.254)"),
    _denied("fe80::/10", "a link-local address"),
    _denied("fd00::/8", "a unique-local address (AWS's metadata service answers on fd00:ec2::254)"),
    _denied("100.100.100.200/32", "a cloud metadata service's address"),
    _denied("224.0.0.0/4", "a multicast address"),
    _denied("ff00::/8", "a multicast address"),
    _denied("240.0.0.0/4", "a reserved address"),
)

# IPv6 addresses that carry an IPv4 address a packet may end up at: NAT64 (RFC 6052) and the
# deprecated IPv4-compatible form. (IPv4-mapped addresses are IPv4 addresses: normalized first.)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


def _embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64 or (address in _IPV4_COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def parse_cidrs(values: str | Iterable[str]) -> tuple[IPNetwork, ...]:
    """Comma-separated CIDRs (`10.96.0.0/12,fd00:10:96::/112`); raises ValueError on a bad one."""
    networks = []
    for entry in split_entries(values):
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise ValueError(f"{entry!r} is not a CIDR (e.g. 10.96.0.0/12)") from None
    return tuple(networks)


@dataclass(frozen=True)
class Endpoint:
    address: IPAddress
    port: int


@dataclass(frozen=True)
class EgressPolicy:
    """Where model sources may be fetched from. `api_servers`: the API server's endpoints as the
    controller knows them (never allowed); `cluster_networks`: the Service and Pod networks."""

    allowed: tuple[AllowedHost, ...] = ()
    api_servers: frozenset[Endpoint] = frozenset()
    cluster_networks: tuple[DeniedNetwork, ...] = ()
    denied: tuple[DeniedNetwork, ...] = DEFAULT_DENIED
    #: the proxies requests go through (none by default); the rule is still the target's
    proxy: ProxyConfig = DIRECT


def cluster_networks(
    service_cidrs: Sequence[IPNetwork], pod_cidrs: Sequence[IPNetwork]
) -> tuple[DeniedNetwork, ...]:
    return tuple(DeniedNetwork(cidr, "in the cluster's Service network") for cidr in service_cidrs) + tuple(
        DeniedNetwork(cidr, "in the cluster's Pod network") for cidr in pod_cidrs
    )


def _first_denied(address: IPAddress, networks: Iterable[DeniedNetwork]) -> DeniedNetwork | None:
    return next(
        (
            denied
            for denied in networks
            if denied.network.version == address.version and address in denied.network
        ),
        None,
    )


def refusal(policy: EgressPolicy, host: str, address: IPAddress, port: int) -> str | None:
    """Why the controller may not fetch from `address` (what `host` resolved to, or `host` itself
    when it is an address) on `port`, or None when it may."""
    address = normalized(address)
    shown = str(address)
    if Endpoint(address, port) in policy.api_servers:
        return f"{shown}:{port} is the Kubernetes API server"
    if any(entry.matches(host, address, port) for entry in policy.allowed):
        return None
    if any(endpoint.address == address for endpoint in policy.api_servers):
        return f"{shown} is the Kubernetes API server's address"
    networks = (*policy.denied, *policy.cluster_networks)
    denied = _first_denied(address, networks)
    if denied is not None:
        return f"{shown} is {denied.what}"
    embedded = _embedded_ipv4(address)
    if embedded is not None:
        inner = _first_denied(embedded, networks)
        if inner is not None or any(endpoint.address == embedded for endpoint in policy.api_servers):
            what = inner.what if inner is not None else "the Kubernetes API server's address"
            return f"{shown} carries {embedded}, which is {what}"
    return None


# --- what the cluster says about its own addresses ----------------------------------------------


def _networks(values: object) -> list[IPNetwork]:
    found = []
    for value in values if isinstance(values, list) else []:
        try:
            found.append(ipaddress.ip_network(str(value), strict=False))
        except ValueError:
            continue
    return found


def service_cidrs_of(service_cidrs: Iterable[Mapping[str, Any]]) -> tuple[IPNetwork, ...]:
    """The Service networks of `networking.k8s.io/v1` ServiceCIDR objects (`spec.cidrs`)."""
    return tuple(
        network for obj in service_cidrs for network in _networks((obj.get("spec") or {}).get("cidrs"))
    )


def pod_cidrs_of(nodes: Iterable[Mapping[str, Any]]) -> tuple[IPNetwork, ...]:
    """The Pod networks nodes were given (`spec.podCIDRs`); none where the network plugin allocates
    addresses itself (then only `--pod-cidr` knows them)."""
    found: dict[IPNetwork, None] = {}
    for node in nodes:
        for network in _networks((node.get("spec") or {}).get("podCIDRs")):
            found[network] = None
    return tuple(found)


def api_endpoints_of(slices: Iterable[Mapping[str, Any]]) -> frozenset[Endpoint]:
    """The API server's endpoints from the EndpointSlices of the `default/kubernetes` Service."""
    endpoints: set[Endpoint] = set()
    for slice_ in slices:
        ports = [p.get("port") for p in slice_.get("ports") or [] if isinstance(p, Mapping)]
        for endpoint in slice_.get("endpoints") or []:
            if not isinstance(endpoint, Mapping):
                continue
            for text in endpoint.get("addresses") or []:
                try:
                    address = normalized(ipaddress.ip_address(str(text)))
                except ValueError:
                    continue
                endpoints.update(Endpoint(address, port) for port in ports if isinstance(port, int))
    return frozenset(endpoints)


def endpoints_at(addresses: Iterable[str], port: int) -> frozenset[Endpoint]:
    """`port` on each of `addresses` (the API server's URL resolved, KUBERNETES_SERVICE_HOST)."""
    endpoints: set[Endpoint] = set()
    for text in addresses:
        try:
            endpoints.add(Endpoint(normalized(ipaddress.ip_address(text.strip("[]"))), port))
        except ValueError:
            continue
    return frozenset(endpoints)


@dataclass(frozen=True)
class EgressConfig:
    """The flags: `--model-source-allowed-hosts`, and `--service-cidr` / `--pod-cidr` (empty:
    discovered from the cluster's ServiceCIDR objects and its Nodes' `spec.podCIDRs`)."""

    allowed_hosts: tuple[AllowedHost, ...] = ()
    service_cidrs: tuple[IPNetwork, ...] = ()
    pod_cidrs: tuple[IPNetwork, ...] = ()
    #: the process's HTTPS_PROXY / HTTP_PROXY / NO_PROXY
    proxy: ProxyConfig = DIRECT


def policy_for(
    config: EgressConfig,
    *,
    api_servers: frozenset[Endpoint] = frozenset(),
    discovered_service_cidrs: Sequence[IPNetwork] = (),
    discovered_pod_cidrs: Sequence[IPNetwork] = (),
) -> EgressPolicy:
    """The policy: the flags, and what the cluster says where a flag says nothing."""
    networks = cluster_networks(
        config.service_cidrs or discovered_service_cidrs, config.pod_cidrs or discovered_pod_cidrs
    )
    return EgressPolicy(
        allowed=config.allowed_hosts,
        api_servers=api_servers,
        cluster_networks=networks,
        proxy=proxy_bypassing_cluster(config.proxy, networks, api_servers),
    )


def proxy_bypassing_cluster(
    proxy: ProxyConfig, networks: Sequence[DeniedNetwork], api_servers: Iterable[Endpoint] = ()
) -> ProxyConfig:
    """`proxy` with the cluster's own addresses in its NO_PROXY (a proxy outside the cluster cannot
    reach them): what the controller's fetches use, and what the downloader containers get."""
    if not proxy.enabled:
        return proxy
    hosts = sorted({str(endpoint.address) for endpoint in api_servers})
    return proxy.bypassing(in_cluster_bypass(networks=[str(n.network) for n in networks], hosts=hosts))
