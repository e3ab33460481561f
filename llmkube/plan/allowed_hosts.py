"""Hosts an administrator lists as exceptions to a rule: `--model-source-allowed-hosts` (where Models
may be fetched from, plan/model/egress.py) and `--router-external-hosts` (where a ModelRouter may
send a provider's key, plan/router/credential_hosts.py). Pure, and light: the router process reads
these entries too and must not load the controller's planning modules.

An entry is a host name, `*.domain` (any name below it), either with `:port`, an IP address,
`[IPv6]:port` or a CIDR."""

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: What an entry may be, for the flags' help and their error messages.
ALLOWED_HOST_FORMS = "host, *.domain, host:port, an IP address, [IPv6]:port or a CIDR"


def normalized(address: IPAddress) -> IPAddress:
    """`::ffff:127.0.0.1` is 127.0.0.1: a socket connected to it reaches the IPv4 address."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _parse_port(text: str, entry: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"{entry!r}: {text!r} is not a port")
    return int(text)


def _host_name(text: str, entry: str) -> str:
    name = text.strip().lower().rstrip(".")
    labels = name.split(".")
    if not name or any(not label or len(label) > 63 for label in labels) or len(name) > 253:
        raise ValueError(f"{entry!r} is not a host name ({ALLOWED_HOST_FORMS})")
    if not all(part.replace("-", "").replace("_", "").isalnum() for part in labels):
        raise ValueError(f"{entry!r} is not a host name ({ALLOWED_HOST_FORMS})")
    return name


def _literal(host: str) -> IPAddress | None:
    try:
        return normalized(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return None


@dataclass(frozen=True)
class AllowedHost:
    """One entry: a host name (`suffix` for `*.domain`), or addresses (`network`: one address is a
    /32 or /128), on one `port` or any. `entry` is the text it was parsed from."""

    name: str | None = None
    suffix: str | None = None
    network: IPNetwork | None = None
    port: int | None = None
    entry: str = field(default="", compare=False)

    def matches(self, host: str, address: IPAddress, port: int) -> bool:
        """Whether a connection to `address` (what `host` resolved to) on `port` is allowed."""
        if self.port is not None and self.port != port:
            return False
        if self.network is not None:
            return address.version == self.network.version and address in self.network
        name = host.lower().rstrip(".")
        if self.suffix is not None:
            return name.endswith(self.suffix)
        return name == self.name

    def names(self, host: str, port: int) -> bool:
        """Whether the host of a URL, as written (nothing resolved), is this entry: an address entry
        only matches a URL that names an address, a host name entry only one that names a host."""
        if self.port is not None and self.port != port:
            return False
        address = _literal(host)
        if address is not None or self.network is not None:
            return (
                address is not None
                and self.network is not None
                and address.version == self.network.version
                and address in self.network
            )
        name = host.lower().rstrip(".")
        return name.endswith(self.suffix) if self.suffix is not None else name == self.name


def parse_allowed_host(entry: str) -> AllowedHost:
    """`models.internal`, `*.models.internal`, `models.internal:8080`, `10.1.2.3`, `10.1.2.3:8080`,
    `[fd12::3]:8080`, `10.1.0.0/16` or `fd12::/64`. Raises ValueError naming what is wrong."""
    text = entry.strip()
    if not text:
        raise ValueError("an empty host")
    given = text
    port: int | None = None
    if text.startswith("["):  # [IPv6] or [IPv6]:port
        inside, _, rest = text[1:].partition("]")
        if rest:
            if not rest.startswith(":"):
                raise ValueError(f"{entry!r} is not {ALLOWED_HOST_FORMS}")
            port = _parse_port(rest[1:], entry)
        text = inside
    elif text.count(":") == 1:  # host:port or IPv4:port (a bare IPv6 address has several colons)
        text, _, port_text = text.partition(":")
        port = _parse_port(port_text, entry)
    try:
        network = ipaddress.ip_network(text, strict=False) if "/" in text else None
        if network is None:
            network = ipaddress.ip_network(normalized(ipaddress.ip_address(text)))
    except ValueError:
        network = None
        if "/" in text or text.replace(".", "").isdigit() or ":" in text:
            raise ValueError(f"{entry!r} is not an IP address or CIDR ({ALLOWED_HOST_FORMS})") from None
    if network is not None:
        return AllowedHost(network=network, port=port, entry=given)
    if text.startswith("*."):
        return AllowedHost(suffix="." + _host_name(text[2:], entry), port=port, entry=given)
    return AllowedHost(name=_host_name(text, entry), port=port, entry=given)


def split_entries(values: str | Iterable[str]) -> list[str]:
    """The entries of comma-separated lists (one string, or several), blanks dropped."""
    items = [values] if isinstance(values, str) else list(values)
    return [part.strip() for item in items for part in item.split(",") if part.strip()]


def parse_allowed_hosts(values: str | Iterable[str]) -> tuple[AllowedHost, ...]:
    """Comma-separated entries (or several strings of them), each as `parse_allowed_host`."""
    return tuple(parse_allowed_host(entry) for entry in split_entries(values))
