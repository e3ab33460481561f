"""The match kinds beyond `models`, and active health checks, end to end on loopback: real aiohttp
clients in front of the router's proxy, real OpenAI-compatible servers
(llmkube_testing.openai_upstream) behind it. Which server answered is the `X-Upstream` header it
sets itself, so nothing here takes the router's word for where a request went."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from llmkube_testing.openai_upstream import Upstream

from llmkube.router.health import Prober
from tests.unit.router.proxy_support import RunningProxy, running_proxy

CHAT = "/v1/chat/completions"


def _chat(text: str = "hello") -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": text}]}


def _local(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "inferenceServiceRef": {"name": name}, **extra}


def _rule(name: str, backends: list[str], **match: Any) -> dict[str, Any]:
    return {"name": name, "match": match, "route": {"backends": backends}}


@pytest.fixture
async def upstreams() -> AsyncIterator[Callable[..., Any]]:
    started: list[Upstream] = []

    async def start(name: str, **options: Any) -> Upstream:
        upstream = await Upstream(name=name, **options).start()
        started.append(upstream)
        return upstream

    yield start
    for upstream in started:
        await upstream.stop()


async def _served_by(
    session: aiohttp.ClientSession,
    running: RunningProxy,
    headers: dict[str, str] | None = None,
    *,
    text: str = "hello",
) -> tuple[str, str]:
    """(the server that answered, the rule the router names)"""
    async with session.post(running.url + CHAT, json=_chat(text), headers=headers or {}) as answer:
        await answer.read()
        assert answer.status == 200, answer.status
        return answer.headers["X-Upstream"], answer.headers["X-Llmkube-Rule"]


async def _eventually(condition: Callable[[], bool], within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.02)


def _endpoints(running: RunningProxy, *servers: Upstream) -> None:
    for server in servers:
        running.endpoints(server.name, f"127.0.0.1:{server.port}")


async def test_a_header_rule_matches_its_value_whatever_the_names_case(
    tmp_path: Path, upstreams: Any, session: aiohttp.ClientSession
) -> None:
    blue, other = await upstreams("blue"), await upstreams("other")
    async with running_proxy("headers", tmp_path) as running:
        running.load(
            {
                "backends": [_local("blue"), _local("other")],
                "rules": [_rule("blue-tenant", ["blue"], headers={"X-Tenant": "blue", "X-Tier": "gold"})],
                "defaultRoute": "other",
            }
        )
        _endpoints(running, blue, other)
        both = {"x-tenant": "blue", "X-TIER": "gold"}
        assert await _served_by(session, running, both) == ("blue", "blue-tenant")
        # Every header of the rule must hold, with its exact value.
        assert await _served_by(session, running, {"X-Tenant": "blue"}) == ("other", "default")
        assert await _served_by(session, running, {"X-Tenant": "Blue", "X-Tier": "gold"}) == (
            "other",
            "default",
        )
        assert await _served_by(session, running) == ("other", "default")
        assert blue.requests == 1 and other.requests == 3


async def test_task_complexity_comes_from_its_header(
    tmp_path: Path, upstreams: Any, session: aiohttp.ClientSession
) -> None:
    small, large = await upstreams("small"), await upstreams("large")
    async with running_proxy("complexity", tmp_path) as running:
        running.load(
            {
                "backends": [_local("small"), _local("large")],
                "rules": [
                    _rule("hard", ["large"], taskComplexity="high"),
                    _rule("easy", ["small"], taskComplexity="low"),
                ],
                "defaultRoute": "small",
            }
        )
        _endpoints(running, small, large)
        header = "X-LLMKube-Task-Complexity"
        assert await _served_by(session, running, {header: "high"}) == ("large", "hard")
        assert await _served_by(session, running, {header: " HIGH "}) == ("large", "hard")
        assert await _served_by(session, running, {header: "low"}) == ("small", "easy")
        assert await _served_by(session, running, {header: "medium"}) == ("small", "default")
        assert await _served_by(session, running) == ("small", "default")
        assert large.requests == 2


async def test_required_capabilities_narrow_the_route_and_skip_a_rule_nobody_can_serve(
    tmp_path: Path, upstreams: Any, session: aiohttp.ClientSession
) -> None:
    plain, vision = await upstreams("plain"), await upstreams("vision")
    async with running_proxy("capabilities", tmp_path) as running:
        running.load(
            {
                "backends": [
                    _local("plain", capabilities=["chat"]),
                    _local("vision", capabilities=["chat", "vision"]),
                ],
                "rules": [
                    # Nobody has "audio": the rule cannot match, the next one decides.
                    _rule("audio", ["plain", "vision"], requiredCapabilities=["audio"]),
                    # plain comes first in the route, but only vision has both capabilities.
                    _rule("images", ["plain", "vision"], requiredCapabilities=["vision", "chat"]),
                ],
                "defaultRoute": "plain",
            }
        )
        _endpoints(running, plain, vision)
        for _ in range(5):
            assert await _served_by(session, running) == ("vision", "images")
        assert plain.requests == 0
        # With vision's only pod gone, the rule has nobody left who can serve: 503, not plain.
        running.endpoints("vision")
        async with session.post(running.url + CHAT, json=_chat()) as answer:
            assert answer.status == 503 and (await answer.json())["error"]["code"] == "no_backend"
        assert plain.requests == 0


async def test_a_latency_slo_puts_a_backend_within_it_first_while_the_primary_is_slow(
    tmp_path: Path, upstreams: Any, session: aiohttp.ClientSession
) -> None:
    slow, fast = await upstreams("slow", delay=0.15), await upstreams("fast")
    async with running_proxy("slo", tmp_path) as running:
        running.load(
            {
                "backends": [_local("slow"), _local("fast")],
                "rules": [_rule("interactive", ["slow", "fast"], latencySLOMs=100)],
            }
        )
        _endpoints(running, slow, fast)
        # Unmeasured, the route's order holds: five answers make slow's p95 (150 ms > 100 ms).
        for _ in range(5):
            assert await _served_by(session, running) == ("slow", "interactive")
        for _ in range(5):
            assert await _served_by(session, running) == ("fast", "interactive")
        assert slow.requests == 5
        # Slow is fast again: its window keeps its slow answers, so fast keeps going first (the
        # SLO looks at what was measured, and slow gets no traffic to measure until they age out).
        slow.delay = 0.0
        assert await _served_by(session, running) == ("fast", "interactive")


async def test_active_health_checks_take_a_silent_pod_out_and_bring_it_back(
    tmp_path: Path, upstreams: Any, session: aiohttp.ClientSession
) -> None:
    a, b = await upstreams("a"), await upstreams("b")
    async with running_proxy("probes", tmp_path) as running:
        prober = Prober(running.state, running.proxy.upstreams)
        try:
            running.load(
                {
                    "backends": [
                        _local(
                            "m",
                            healthCheck={"path": "/health", "intervalSeconds": 1, "timeoutSeconds": 1},
                        )
                    ],
                    "defaultRoute": "m",
                    # Only a probe can end this quarantine within the test.
                    "proxy": {"quarantineDuration": "10m"},
                }
            )
            endpoint_a, endpoint_b = f"127.0.0.1:{a.port}", f"127.0.0.1:{b.port}"
            running.endpoints("m", endpoint_a, endpoint_b)
            await _eventually(lambda: a.health_checks >= 1 and b.health_checks >= 1)
            # Prompts that differ: one prompt would stay on its pod (prefix affinity).
            served = {(await _served_by(session, running, text=f"prompt {i}"))[0] for i in range(10)}
            assert served == {"a", "b"}

            # a stops answering its probe (requests would still work: it is the probe that tells).
            a.health = "hang"
            await _eventually(lambda: not running.state.quarantine.usable(endpoint_a, running.state.clock()))
            before = a.requests
            for i in range(10):
                assert (await _served_by(session, running, text=f"prompt {i}"))[0] == "b"
            assert a.requests == before

            # a answers again: the next probe ends its quarantine, and it gets traffic again.
            a.health = "ok"
            await _eventually(lambda: running.state.quarantine.usable(endpoint_a, running.state.clock()))
            # Prompts that differ: one prompt would stay on its pod (prefix affinity).
            served = {(await _served_by(session, running, text=f"prompt {i}"))[0] for i in range(10)}
            assert served == {"a", "b"}

            # A probe answered with an error takes it out as well.
            a.health = "error"
            await _eventually(lambda: not running.state.quarantine.usable(endpoint_a, running.state.clock()))
            for i in range(10):
                assert (await _served_by(session, running, text=f"prompt {i}"))[0] == "b"
        finally:
            await prober.stop()
