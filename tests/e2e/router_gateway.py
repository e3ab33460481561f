"""The one place the session's controller lets ModelRouters send a provider key to besides the
providers' own hosts (its --router-external-hosts): one port of this machine's outbound address,
where tests/e2e/test_router_tenancy.py runs a stand-in LiteLLM proxy. Any other port of the same
address is a host of the spec author's choosing."""

import socket

from llmkube_testing.openai_upstream import outbound_address

ADDRESS = outbound_address()


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


PORT = _free_port(ADDRESS) if ADDRESS else 0
#: the --router-external-hosts entry ("" on a machine with loopback alone: then nothing is allowed)
ALLOWED = f"{ADDRESS}:{PORT}" if ADDRESS else ""
