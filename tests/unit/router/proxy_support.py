"""A router's proxy on a loopback port with real OpenAI-compatible upstreams behind it, its spec
loaded as the watch would load it and its endpoints set as the EndpointSlices would set them (the
watches themselves are tested against the API server:
tests/integration/test_router_process_on_server.py)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from llmkube.plan.allowed_hosts import parse_allowed_hosts
from llmkube.router.audit import AuditSink
from llmkube.router.http.budget import ByteBudget
from llmkube.router.http.limits import Limits
from llmkube.router.http.server import HttpServer
from llmkube.router.metrics import RouterMetrics
from llmkube.router.process import http_server, metrics_page
from llmkube.router.proxy import Proxy
from llmkube.router.secrets import SecretFiles
from llmkube.router.state import RouterState
from llmkube.router.upstream import Upstreams
from llmkube.router.waking import Waker


@dataclass
class RunningProxy:
    state: RouterState
    proxy: Proxy
    url: str
    audit_lines: list[bytes]
    server: HttpServer

    def load(self, spec: dict[str, Any], generation: int = 1) -> None:
        loaded = self.state.load(
            {"metadata": {"name": self.state.name, "generation": generation}, "spec": spec}
        )
        assert not loaded.refused, [i.text() for i in loaded.issues]

    def endpoints(self, service: str, *addresses: str) -> None:
        self.state.set_endpoints(service, tuple(sorted(addresses)))


class _CapturedAudit(AuditSink):
    def __init__(self, lines: list[bytes]) -> None:
        super().__init__()
        self.lines = lines

    def write(self, line: bytes) -> None:
        self.lines.append(line)


@contextlib.asynccontextmanager
async def running_proxy(
    name: str,
    secrets: Path,
    *,
    api_servers: tuple[Any, ...] = (),
    endpoint_wait: float = 0.0,
    external_hosts: str = "",
    limits: Limits | None = None,
    waker: Callable[[RouterState], Waker] | None = None,
    wake_timeout: float = 0.0,
    wake_queue: int = 100,
) -> AsyncIterator[RunningProxy]:
    """`external_hosts`: the router's --external-hosts (where a backend with credentials may lead)."""
    limits = limits or Limits()
    state = RouterState(name, "ns", external_hosts=parse_allowed_hosts(external_hosts))
    state.wakes.bound = wake_queue
    metrics = RouterMetrics(name)
    unregister = metrics.register_state(state)
    lines: list[bytes] = []
    upstreams = Upstreams(stream_idle_timeout=30.0, api_servers=api_servers)
    proxy = Proxy(
        state,
        upstreams,
        metrics,
        _CapturedAudit(lines),
        credentials=SecretFiles(secrets / "credentials"),
        api_keys_root=secrets / "api-keys",
        ready=list,
        metrics_page=metrics_page,
        endpoint_wait=endpoint_wait,
        bodies=ByteBudget(limits.body_budget),
        waker=waker(state) if waker is not None else None,
        wake_timeout=wake_timeout,
    )
    server = http_server(proxy, limits)
    unregister_server = metrics.register_server(server)
    _, port = await server.start("127.0.0.1", 0)
    try:
        yield RunningProxy(state, proxy, f"http://127.0.0.1:{port}", lines, server)
    finally:
        await proxy.stop_shadows()
        await server.close()
        await upstreams.close()
        unregister()
        unregister_server()


async def post(
    session: aiohttp.ClientSession, url: str, body: Any, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    async with session.post(url, json=body, headers=headers or {}) as answer:
        return answer.status, dict(answer.headers), await answer.read()
