"""Where an external backend may not lead the router: table-driven over addresses, and kept in
step with the model downloads' list (the one deliberate difference: unique-local IPv6)."""

import ipaddress

import pytest

from llmkube.plan.model.egress import DEFAULT_DENIED
from llmkube.plan.router.egress import REFUSED, refusal

API_SERVER = (ipaddress.ip_address("10.0.0.1"), 443)


@pytest.mark.parametrize(
    ("address", "port", "refused"),
    [
        ("127.0.0.1", 80, "loopback"),
        ("::1", 80, "loopback"),
        ("::ffff:127.0.0.1", 80, "loopback"),  # IPv4-mapped
        ("64:ff9b::7f00:1", 80, "loopback"),  # NAT64
        ("0.0.0.0", 80, "unspecified"),
        ("169.254.169.254", 80, "link-local"),
        ("fd00:ec2::254", 80, "metadata"),
        ("100.100.100.200", 80, "metadata"),
        ("239.1.1.1", 80, "multicast"),
        ("10.0.0.1", 443, "API server"),
        ("::ffff:10.0.0.1", 443, "API server"),
        ("10.0.0.1", 8080, None),  # another port of the same address: a Service, allowed
        ("10.96.3.4", 4000, None),  # an in-cluster LiteLLM
        ("fd12:3456::10", 4000, None),  # an IPv6 Service
        ("162.159.140.245", 443, None),  # a provider
    ],
)
def test_refusal(address: str, port: int, refused: str | None) -> None:
    found = refusal(ipaddress.ip_address(address), port, [API_SERVER])
    if refused is None:
        assert found is None
    else:
        assert found is not None and refused in found


def test_the_router_refuses_what_model_downloads_refuse_but_unique_local_ipv6() -> None:
    downloads = {str(network.network) for network in DEFAULT_DENIED}
    router = {cidr for cidr, _ in REFUSED}
    assert downloads - router == {"fd00::/8"}
    assert router - downloads == {"fd00:ec2::254/128"}
