"""Asking a running llama-server how it is: `/health` (200 once the model is loaded, 503 while it
loads) and, while it drains, how many requests it is still processing (its Prometheus metric
`llamacpp:requests_processing`, which it serves because the argument builder always passes
`--metrics`)."""

from __future__ import annotations

import ipaddress

import aiohttp

PROBE_TIMEOUT = aiohttp.ClientTimeout(total=2.0, connect=1.0)
IN_FLIGHT_METRIC = "llamacpp:requests_processing"


def base_url(address: str, port: int) -> str:
    host = f"[{address}]" if ipaddress.ip_address(address).version == 6 else address
    return f"http://{host}:{port}"


async def healthy(session: aiohttp.ClientSession, address: str, port: int) -> bool:
    try:
        async with session.get(f"{base_url(address, port)}/health", timeout=PROBE_TIMEOUT) as answer:
            await answer.read()
            return answer.status == 200
    except (aiohttp.ClientError, TimeoutError, OSError):
        return False


def requests_processing(metrics_text: str) -> int | None:
    for line in metrics_text.splitlines():
        if line.startswith(IN_FLIGHT_METRIC):
            try:
                return int(float(line.split()[-1]))
            except ValueError:
                return None
    return None


async def in_flight(
    session: aiohttp.ClientSession, address: str, port: int, key: str | None = None
) -> int | None:
    """Requests the server is processing; None when it cannot tell (it does not answer). `key`:
    the server's key (its /metrics asks for it, /health does not)."""
    headers = {"Authorization": f"Bearer {key}"} if key else None
    try:
        async with session.get(
            f"{base_url(address, port)}/metrics", timeout=PROBE_TIMEOUT, headers=headers
        ) as answer:
            if answer.status != 200:
                return None
            return requests_processing(await answer.text())
    except (aiohttp.ClientError, TimeoutError, OSError, UnicodeDecodeError):
        return None
