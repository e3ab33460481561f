"""A request for a backend scaled to zero is held, not refused: on loopback with a real client and
a real OpenAI-compatible upstream. The wake's scale write is the API's (tests/e2e/test_scale_to_zero.py
makes it against a real control plane); here the waker's write is replaced by what it leads to, the
backend's pod turning ready, so what the router does around it is seen: one wake for many requests,
each served (streams too), the bound, a client that leaves, the wait running out, and the requests
counted on the idle clock."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import orjson
import pytest
from llmkube_testing.openai_upstream import Upstream

from llmkube.plan.router import Sleeper
from llmkube.router.state import RouterState
from llmkube.router.waking import Waker
from tests.unit.router.proxy_support import post, running_proxy

CHAT = "/v1/chat/completions"
SPEC = {"backends": [{"name": "llama", "inferenceServiceRef": {"name": "llama"}}], "defaultRoute": "llama"}
BODY = {"model": "llama", "messages": [{"role": "user", "content": "hello"}]}
ASLEEP = Sleeper(marked=True, asleep=True)


class _PodComesUp(Waker):
    """The scale write's consequence, after `delay`: the pod ready (None: it never comes)."""

    def __init__(self, state: RouterState, address: str | None, delay: float = 0.3) -> None:
        super().__init__(None, state)
        self.address, self.delay = address, delay
        self.wakes = 0

    async def _wake(self, isvc: str) -> None:
        self.wakes += 1
        if self.address is None:
            return
        await asyncio.sleep(self.delay)
        self.state.set_endpoints("llama", (self.address,))
        self.state.set_sleeper(isvc, Sleeper(marked=True, asleep=False))


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    started = await Upstream(name="woken").start()
    yield started
    await started.stop()


async def _until(check: object, what: str) -> None:
    deadline = time.monotonic() + 5
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.01)


async def test_twenty_requests_at_once_wake_it_once_and_are_all_served_streams_included(
    tmp_path: Path, upstream: Upstream, session: aiohttp.ClientSession
) -> None:
    wakers: list[_PodComesUp] = []

    def waker(state: RouterState) -> Waker:
        wakers.append(_PodComesUp(state, f"127.0.0.1:{upstream.port}"))
        return wakers[-1]

    async with running_proxy("wake-twenty", tmp_path, waker=waker, wake_timeout=20) as running:
        running.load(SPEC)
        running.state.set_sleeper("llama", ASLEEP)
        answers = [
            asyncio.create_task(post(session, running.url + CHAT, {**BODY, "stream": n % 2 == 0}))
            for n in range(20)
        ]
        results = await asyncio.wait_for(asyncio.gather(*answers), 15)
        assert [status for status, _, _ in results] == [200] * 20
        streams = [body for n, (_, _, body) in enumerate(results) if n % 2 == 0]
        assert all(b"data: [DONE]" in body for body in streams)
        assert all(
            orjson.loads(body)["object"] == "chat.completion"
            for n, (_, _, body) in enumerate(results)
            if n % 2
        )
        assert wakers[0].wakes == 1
        assert running.state.wakes.held("llama") == 0
        waited = [orjson.loads(line)["waited_ms"] for line in running.audit_lines]
        assert len(waited) == 20 and all(w is not None and w >= 250 for w in waited)
        # Each request is activity on the idle clock the routers share: one write is due, not twenty.
        assert [service for service, _ in running.state.activity.due(time.time())] == ["llama"]


async def test_beyond_the_bound_a_request_is_answered_503_with_retry_after(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    async with running_proxy(
        "wake-bound", tmp_path, waker=lambda s: _PodComesUp(s, None), wake_timeout=20, wake_queue=3
    ) as running:
        running.load(SPEC)
        running.state.set_sleeper("llama", ASLEEP)
        held = [asyncio.create_task(post(session, running.url + CHAT, BODY)) for _ in range(3)]
        await _until(lambda: running.state.wakes.held("llama") == 3, "three requests held")
        status, headers, body = await post(session, running.url + CHAT, BODY)
        assert status == 503 and headers["Retry-After"] == "5"
        assert orjson.loads(body)["error"]["code"] == "waking"
        assert all(not task.done() for task in held)
        for task in held:
            task.cancel()
        await _until(lambda: running.state.wakes.held("llama") == 0, "the queue emptied")


async def test_a_client_that_leaves_while_it_waits_is_dropped_from_the_queue(
    tmp_path: Path, upstream: Upstream, session: aiohttp.ClientSession
) -> None:
    wakers: list[_PodComesUp] = []

    def waker(state: RouterState) -> Waker:
        wakers.append(_PodComesUp(state, f"127.0.0.1:{upstream.port}", delay=1.0))
        return wakers[-1]

    async with running_proxy("wake-leaves", tmp_path, waker=waker, wake_timeout=20, wake_queue=2) as running:
        running.load(SPEC)
        running.state.set_sleeper("llama", ASLEEP)
        leaving = asyncio.create_task(post(session, running.url + CHAT, BODY))
        staying = asyncio.create_task(post(session, running.url + CHAT, BODY))
        await _until(lambda: running.state.wakes.held("llama") == 2, "two requests held")
        leaving.cancel()
        await _until(lambda: running.state.wakes.held("llama") == 1, "the one that left dropped")
        # Its place is free again: one more fits in the queue of two.
        third = asyncio.create_task(post(session, running.url + CHAT, BODY))
        await _until(lambda: running.state.wakes.held("llama") == 2, "the third held")
        assert [(await staying)[0], (await third)[0]] == [200, 200]
        assert wakers[0].wakes == 1  # the first client left; its wake went on
        outcomes = [orjson.loads(line)["outcome"] for line in running.audit_lines]
        assert sorted(outcomes) == ["client_gone", "ok", "ok"]


async def test_the_wait_is_bounded_by_the_wake_timeout(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    async with running_proxy(
        "wake-timeout", tmp_path, waker=lambda s: _PodComesUp(s, None), wake_timeout=0.5
    ) as running:
        running.load(SPEC)
        running.state.set_sleeper("llama", ASLEEP)
        started = time.monotonic()
        status, _, body = await post(session, running.url + CHAT, BODY)
        assert status == 503 and orjson.loads(body)["error"]["code"] == "no_backend"
        assert 0.5 <= time.monotonic() - started < 3
        assert running.state.wakes.held("llama") == 0


async def test_a_backend_that_is_not_asleep_waits_the_endpoint_wait_only(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    wakers: list[_PodComesUp] = []

    def waker(state: RouterState) -> Waker:
        wakers.append(_PodComesUp(state, None))
        return wakers[-1]

    async with running_proxy(
        "wake-not-asleep", tmp_path, waker=waker, wake_timeout=20, endpoint_wait=0.3
    ) as running:
        running.load(SPEC)
        running.state.set_sleeper("llama", Sleeper(marked=True, asleep=False))  # between pods
        started = time.monotonic()
        status, _, _ = await post(session, running.url + CHAT, BODY)
        assert status == 503 and time.monotonic() - started < 3
        assert wakers[0].wakes == 0
