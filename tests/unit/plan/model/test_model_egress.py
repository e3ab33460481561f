"""The egress policy of model sources (pure): which addresses the controller refuses, the
allowlist's forms, and what the cluster's objects say about its own addresses."""

import ipaddress

import pytest

from llmkube.plan.model.egress import (
    AllowedHost,
    EgressConfig,
    EgressPolicy,
    Endpoint,
    api_endpoints_of,
    cluster_networks,
    endpoints_at,
    parse_allowed_host,
    parse_allowed_hosts,
    parse_cidrs,
    pod_cidrs_of,
    policy_for,
    refusal,
    service_cidrs_of,
)

API = Endpoint(ipaddress.ip_address("10.96.0.1"), 443)
API_REAL = Endpoint(ipaddress.ip_address("172.18.0.2"), 6443)
CLUSTER = EgressPolicy(
    api_servers=frozenset({API, API_REAL}),
    cluster_networks=cluster_networks(
        parse_cidrs("10.96.0.0/12"), parse_cidrs("10.244.0.0/16,2001:db8:244::/64")
    ),
)


@pytest.mark.parametrize(
    ("address", "port", "why"),
    [
        ("127.0.0.1", 80, "127.0.0.1 is a loopback address"),
        ("127.5.6.7", 80, "127.5.6.7 is a loopback address"),
        ("::1", 80, "::1 is a loopback address"),
        ("::ffff:127.0.0.1", 80, "127.0.0.1 is a loopback address"),  # IPv4-mapped: the IPv4 address
        ("0.0.0.0", 80, "0.0.0.0 is an unspecified address"),
        ("::", 80, ":: is an unspecified address"),
        ("169.254.169.254", 80, "169.254.169.254 is a link-local address (cloud metadata"),
        ("fe80::1", 80, "fe80::1 is a link-local address"),
        ("fd00:ec2::254", 80, "fd00:ec2::254 is a unique-local address (AWS's metadata"),
        ("100.100.100.200", 80, "100.100.100.200 is a cloud metadata service's address"),
        ("224.0.0.1", 80, "224.0.0.1 is a multicast address"),
        ("255.255.255.255", 80, "255.255.255.255 is a reserved address"),
        ("64:ff9b::7f00:1", 80, "64:ff9b::7f00:1 carries 127.0.0.1, which is a loopback address"),  # NAT64
        ("2002:a9fe:a9fe::1", 80, "2002:a9fe:a9fe::1 carries 169.254.169.254, which is a link-local"),  # 6to4
        ("::7f00:1", 80, "::7f00:1 carries 127.0.0.1"),  # IPv4-compatible
        ("10.96.0.1", 443, "10.96.0.1:443 is the Kubernetes API server"),
        ("172.18.0.2", 6443, "172.18.0.2:6443 is the Kubernetes API server"),
        ("172.18.0.2", 2379, "172.18.0.2 is the Kubernetes API server's address"),  # etcd beside it
        ("10.100.3.4", 80, "10.100.3.4 is in the cluster's Service network"),
        ("10.244.1.5", 8080, "10.244.1.5 is in the cluster's Pod network"),
        ("2001:db8:244::5", 8080, "2001:db8:244::5 is in the cluster's Pod network"),
    ],
)
def test_refused_addresses(address: str, port: int, why: str) -> None:
    reason = refusal(CLUSTER, "h", ipaddress.ip_address(address), port)
    assert reason is not None and reason.startswith(why)


@pytest.mark.parametrize(
    "address", ["8.8.8.8", "192.168.1.10", "10.0.0.5", "2606:4700::1111", "172.18.0.3", "::ffff:8.8.8.8"]
)
def test_other_addresses_are_allowed(address: str) -> None:
    assert refusal(CLUSTER, "models.example.com", ipaddress.ip_address(address), 443) is None


@pytest.mark.parametrize(
    ("allowed", "host", "address", "port", "refused"),
    [
        ("127.0.0.1", "127.0.0.1", "127.0.0.1", 8080, False),
        ("127.0.0.1:8080", "127.0.0.1", "127.0.0.1", 8080, False),
        ("127.0.0.1:8080", "127.0.0.1", "127.0.0.1", 9090, True),  # another port of the same address
        ("127.0.0.0/8", "127.0.0.1", "127.0.0.1", 8080, False),
        (
            "127.0.0.1",
            "127.0.0.1",
            "::ffff:127.0.0.1",
            8080,
            False,
        ),  # the mapped spelling is the same address
        ("mirror.internal", "mirror.internal", "10.100.3.4", 80, False),  # a name: whatever it resolves to
        ("mirror.internal", "MIRROR.internal.", "10.100.3.4", 80, False),
        ("mirror.internal", "evil.internal", "10.100.3.4", 80, True),
        ("*.internal", "models.mirror.internal", "10.100.3.4", 80, False),
        ("*.internal", "internal", "10.100.3.4", 80, True),
        ("mirror.internal:8080", "mirror.internal", "10.100.3.4", 80, True),
        ("10.96.0.0/12", "10.96.0.1", "10.96.0.1", 443, True),  # never the API server's endpoint ...
        ("10.96.0.0/12", "10.96.0.1", "10.96.0.1", 8080, False),  # ... though the rest may be allowed
        ("172.18.0.2:2379", "172.18.0.2", "172.18.0.2", 2379, False),  # named port by port
    ],
)
def test_the_allowlist(allowed: str, host: str, address: str, port: int, refused: bool) -> None:
    policy = EgressPolicy(
        allowed=parse_allowed_hosts(allowed),
        api_servers=CLUSTER.api_servers,
        cluster_networks=CLUSTER.cluster_networks,
    )
    assert (refusal(policy, host, ipaddress.ip_address(address), port) is not None) is refused


@pytest.mark.parametrize(
    ("entry", "parsed"),
    [
        ("models.internal", AllowedHost(name="models.internal")),
        ("Models.Internal.", AllowedHost(name="models.internal")),
        ("*.models.internal", AllowedHost(suffix=".models.internal")),
        ("models.internal:8080", AllowedHost(name="models.internal", port=8080)),
        ("10.1.2.3", AllowedHost(network=ipaddress.ip_network("10.1.2.3/32"))),
        ("10.1.2.3:80", AllowedHost(network=ipaddress.ip_network("10.1.2.3/32"), port=80)),
        ("10.1.0.0/16", AllowedHost(network=ipaddress.ip_network("10.1.0.0/16"))),
        ("10.1.2.3/16", AllowedHost(network=ipaddress.ip_network("10.1.0.0/16"))),
        ("fd12::3", AllowedHost(network=ipaddress.ip_network("fd12::3/128"))),
        ("[fd12::3]:8080", AllowedHost(network=ipaddress.ip_network("fd12::3/128"), port=8080)),
        ("fd12::/64", AllowedHost(network=ipaddress.ip_network("fd12::/64"))),
    ],
)
def test_allowlist_entries(entry: str, parsed: AllowedHost) -> None:
    assert parse_allowed_host(entry) == parsed


@pytest.mark.parametrize(
    ("entry", "error"),
    [
        ("", "an empty host"),
        ("host:0", "is not a port"),
        ("host:99999", "is not a port"),
        ("host:http", "is not a port"),
        ("2130706433", "is not an IP address or CIDR"),  # a decimal spelling is no address here
        ("10.1.2.300", "is not an IP address or CIDR"),
        ("10.0.0.0/33", "is not an IP address or CIDR"),
        ("bad host", "is not a host name"),
        ("a..b", "is not a host name"),
        ("[fd12::3]8080", "is not host"),
    ],
)
def test_bad_allowlist_entries_are_refused_with_the_reason(entry: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_allowed_host(entry)


def test_lists_are_comma_separated_and_may_repeat() -> None:
    assert parse_allowed_hosts(["a.internal, 10.0.0.0/8", "b.internal"]) == (
        AllowedHost(name="a.internal"),
        AllowedHost(network=ipaddress.ip_network("10.0.0.0/8")),
        AllowedHost(name="b.internal"),
    )
    assert parse_allowed_hosts("") == ()
    with pytest.raises(ValueError, match=r"'10\.0\.0\.0/99' is not a CIDR"):
        parse_cidrs("10.96.0.0/12,10.0.0.0/99")


def test_what_the_cluster_says_about_its_addresses() -> None:
    service_cidrs = [
        {"metadata": {"name": "kubernetes"}, "spec": {"cidrs": ["10.96.0.0/12", "fd00:10:96::/112"]}},
        {"spec": {"cidrs": ["not a cidr"]}},
        {"spec": {}},
    ]
    assert service_cidrs_of(service_cidrs) == parse_cidrs("10.96.0.0/12,fd00:10:96::/112")
    nodes = [
        {"spec": {"podCIDRs": ["10.244.0.0/24", "fd10::/64"]}},
        {"spec": {"podCIDRs": ["10.244.0.0/24"]}},  # repeated: kept once
        {"metadata": {"name": "no-pod-cidr"}},  # a CNI that allocates addresses itself
    ]
    assert pod_cidrs_of(nodes) == parse_cidrs("10.244.0.0/24,fd10::/64")
    slices = [
        {
            "endpoints": [{"addresses": ["172.18.0.2"]}, {"addresses": ["::ffff:172.18.0.3"]}],
            "ports": [{"name": "https", "port": 6443}],
        },
        {"endpoints": [{"addresses": ["garbage"]}], "ports": [{"port": 6443}]},
    ]
    assert api_endpoints_of(slices) == frozenset(
        {API_REAL, Endpoint(ipaddress.ip_address("172.18.0.3"), 6443)}
    )
    assert endpoints_at(["10.96.0.1", "[::1]", "nonsense"], 443) == frozenset(
        {API, Endpoint(ipaddress.ip_address("::1"), 443)}
    )


def test_flags_win_over_discovery() -> None:
    flags = EgressConfig(service_cidrs=parse_cidrs("10.0.0.0/24"))
    policy = policy_for(
        flags,
        discovered_service_cidrs=parse_cidrs("10.96.0.0/12"),
        discovered_pod_cidrs=parse_cidrs("10.244.0.0/16"),
    )
    assert [str(denied.network) for denied in policy.cluster_networks] == ["10.0.0.0/24", "10.244.0.0/16"]
