"""Where an external backend may not be: addresses no model provider is, but that a URL in a
ModelRouter could aim the router at from inside the cluster (its own listeners, the node's, the
cloud metadata service with its instance credentials, the API server).

The networks are plan/model/egress.py's `DEFAULT_DENIED` without the IPv6 unique-local range
(clusters give IPv6 Services addresses there, and an in-cluster LiteLLM proxy is a usual backend)
but with the one metadata address in it (AWS's fd00:ec2::254); a test keeps the two lists in step.
The router checks a literal before connecting and every address a name resolves to before aiohttp
connects to it (no second lookup: DNS rebinding)."""

import ipaddress
from collections.abc import Iterable

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

REFUSED: tuple[tuple[str, str], ...] = (
    ("127.0.0.0/8", "a loopback address (the router's own pod)"),
    ("::1/128", "a loopback address (the router's own pod)"),
    ("0.0.0.0/8", "an unspecified address"),
    ("::/128", "an unspecified address"),
    ("169.254.0.0/16", "a link-local address (cloud metadata services answer on 169.254.169.254)"),
    ("fe80::/10", "a link-local address"),
    ("100.100.100.200/32", "a cloud metadata service's address"),
    ("fd00:ec2::254/128", "a cloud metadata service's address"),
    ("224.0.0.0/4", "a multicast address"),
    ("ff00::/8", "a multicast address"),
    ("240.0.0.0/4", "a reserved address"),
)
_NETWORKS = tuple((ipaddress.ip_network(cidr), what) for cidr, what in REFUSED)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def _ipv4_inside(address: IPAddress) -> ipaddress.IPv4Address | None:
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def refusal(address: IPAddress, port: int, api_servers: Iterable[tuple[IPAddress, int]] = ()) -> str | None:
    """Why the router may not connect to `address`:`port` for an external backend, or None."""
    candidates: list[IPAddress] = [address]
    inner = _ipv4_inside(address)
    if inner is not None:
        candidates.append(inner)
    for candidate in candidates:
        if any(candidate == server and port == server_port for server, server_port in api_servers):
            return f"{candidate}:{port} is the Kubernetes API server"
        for network, what in _NETWORKS:
            if candidate.version == network.version and candidate in network:
                return f"{address} is {what}"
    return None
