"""Which ports of a Service are not ours (the API keys them by port and protocol)."""

from typing import Any

import pytest

from llmkube.kube.apply import stray_service_ports


def svc_ports(*ports: tuple[int, str | None]) -> dict[str, Any]:
    entries = [{"name": "http", "port": p, **({"protocol": proto} if proto else {})} for p, proto in ports]
    return {"spec": {"ports": entries}}


@pytest.mark.parametrize(
    ("observed", "stray"),
    [
        (svc_ports((8080, "TCP")), []),
        (svc_ports((8080, None)), []),  # protocol defaults to TCP
        (svc_ports((1234, "TCP")), [1234]),  # a hand edit replaced our port
        (svc_ports((8080, "TCP"), (9090, "TCP")), [9090]),
        (svc_ports((8080, "UDP")), [8080]),  # same number, other protocol: another key
        ({"spec": {}}, []),
    ],
)
def test_stray_service_ports(observed: dict[str, Any], stray: list[int]) -> None:
    desired = svc_ports((8080, "TCP"))
    assert [p["port"] for p in stray_service_ports(desired, observed)] == stray
