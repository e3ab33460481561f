"""A request nothing can serve waits for an InferenceService backend's first ready endpoint (a
Recreate rollout between its pods) instead of a 503: on loopback with a real client and a real
OpenAI-compatible upstream. It is served once the endpoint appears, answered 503 when the wait runs
out, and a client that leaves ends its wait; the gauge and the audit line say it waited."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from llmkube_testing.openai_upstream import Upstream
from prometheus_client import REGISTRY

from tests.unit.router.proxy_support import RunningProxy, post, running_proxy

CHAT = "/v1/chat/completions"
SPEC = {"backends": [{"name": "llama", "inferenceServiceRef": {"name": "llama"}}], "defaultRoute": "llama"}
BODY = {"model": "llama", "messages": [{"role": "user", "content": "hello"}]}


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    started = await Upstream(name="new-pod").start()
    yield started
    await started.stop()


def _waiting(router: str) -> float:
    return REGISTRY.get_sample_value("llmkube_router_waiting_requests", {"router": router}) or 0.0


async def _until_waiting(router: str, count: float) -> None:
    deadline = time.monotonic() + 5
    while _waiting(router) != count:
        assert time.monotonic() < deadline, f"waiting requests stayed {_waiting(router)}, not {count}"
        await asyncio.sleep(0.01)


def _audit(running: RunningProxy) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in running.audit_lines]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_a_request_waits_for_the_first_ready_endpoint_and_is_served_by_it(
    tmp_path: Path, upstream: Upstream, session: aiohttp.ClientSession, stream: bool
) -> None:
    router = f"wait-served-{stream}"
    async with running_proxy(router, tmp_path, endpoint_wait=20) as running:
        running.load(SPEC)
        running.endpoints("llama")  # the old pod is gone, the new one not ready yet
        answer = asyncio.create_task(post(session, running.url + CHAT, {**BODY, "stream": stream}))
        await _until_waiting(router, 1)
        await asyncio.sleep(0.3)
        assert not answer.done()
        running.endpoints("llama", f"127.0.0.1:{upstream.port}")  # the new pod turns ready
        status, headers, body = await asyncio.wait_for(answer, 10)
        assert status == 200 and headers["X-Upstream"] == "new-pod"
        assert (b"data: [DONE]" in body) if stream else (orjson.loads(body)["object"] == "chat.completion")
        await _until_waiting(router, 0)
        line = _audit(running)[-1]
        assert line["status"] == 200 and line["backend"] == "llama"
        assert 300 <= line["waited_ms"] < 10_000


async def test_the_wait_runs_out_with_a_503_that_says_why(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    router = "wait-runs-out"
    async with running_proxy(router, tmp_path, endpoint_wait=0.5) as running:
        running.load(SPEC)
        started = time.monotonic()
        status, _, body = await post(session, running.url + CHAT, BODY)
        waited = time.monotonic() - started
        assert status == 503 and orjson.loads(body)["error"]["code"] == "no_backend"
        assert 0.5 <= waited < 3
        assert _audit(running)[-1]["waited_ms"] >= 500
        assert _waiting(router) == 0


async def test_a_change_of_another_service_does_not_end_the_wait(
    tmp_path: Path, upstream: Upstream, session: aiohttp.ClientSession
) -> None:
    router = "wait-other-service"
    async with running_proxy(router, tmp_path, endpoint_wait=20) as running:
        running.load(SPEC)
        answer = asyncio.create_task(post(session, running.url + CHAT, BODY))
        await _until_waiting(router, 1)
        running.endpoints("somebody-else", f"127.0.0.1:{upstream.port}")
        await asyncio.sleep(0.3)
        assert not answer.done() and _waiting(router) == 1
        running.endpoints("llama", f"127.0.0.1:{upstream.port}")
        status, _, _ = await asyncio.wait_for(answer, 10)
        assert status == 200


async def test_a_client_that_leaves_ends_its_wait(tmp_path: Path, session: aiohttp.ClientSession) -> None:
    router = "wait-client-leaves"
    async with running_proxy(router, tmp_path, endpoint_wait=20) as running:
        running.load(SPEC)
        answer = asyncio.create_task(post(session, running.url + CHAT, BODY))
        await _until_waiting(router, 1)
        answer.cancel()
        await _until_waiting(router, 0)
        deadline = time.monotonic() + 5
        while not running.audit_lines:
            assert time.monotonic() < deadline, "no audit line for the request that left"
            await asyncio.sleep(0.01)
        assert _audit(running)[-1]["outcome"] == "client_gone"


async def test_without_a_wait_nothing_to_serve_is_refused_at_once(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    async with running_proxy("wait-off", tmp_path, endpoint_wait=0) as running:
        running.load(SPEC)
        started = time.monotonic()
        status, _, _ = await post(session, running.url + CHAT, BODY)
        assert status == 503 and time.monotonic() - started < 0.5
        assert _audit(running)[-1]["waited_ms"] is None
