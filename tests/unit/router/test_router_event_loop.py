"""The router's event loop (`--loop`), and the proxy on uvloop: what the image runs. The other
router tests run on asyncio's loop (pytest-asyncio's); here the same proxy, with real sockets,
relays answers and streams, and retries a kept-alive connection a pod ended, on uvloop, whose
transports raise their own errors where asyncio's raise theirs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import orjson
import pytest

from llmkube.router.event_loop import LoopUnavailable, loop_factory, loop_name
from llmkube.testing.openai_upstream import Upstream
from tests.unit.router.proxy_support import post, running_proxy
from tests.unit.router.test_router_kept_alive import ClosingServer

CHAT = "/v1/chat/completions"


@pytest.mark.parametrize(
    ("choice", "installed", "expected"),
    [
        ("auto", True, "uvloop"),
        ("auto", False, "asyncio"),
        ("uvloop", True, "uvloop"),
        ("asyncio", True, "asyncio"),
        ("asyncio", False, "asyncio"),
    ],
)
def test_which_loop_a_choice_means(choice: str, installed: bool, expected: str) -> None:
    assert loop_name(choice, uvloop_installed=installed) == expected


def test_uvloop_required_where_it_is_not_installed_is_a_clear_error() -> None:
    with pytest.raises(LoopUnavailable, match="uvloop is not installed"):
        loop_name("uvloop", uvloop_installed=False)


def test_the_default_is_uvloop_where_it_is_installed() -> None:
    uvloop = pytest.importorskip("uvloop")
    name, factory = loop_factory("auto")
    loop = factory()
    try:
        assert name == "uvloop" and isinstance(loop, uvloop.Loop)
    finally:
        loop.close()
    name, factory = loop_factory("asyncio")
    loop = factory()
    try:
        assert name == "asyncio" and not isinstance(loop, uvloop.Loop)
    finally:
        loop.close()


async def _relay_on_this_loop(tmp_path: Path) -> None:
    upstream = await Upstream(name="pod", tokens=20).start()
    ending = ClosingServer("reset")
    ending_port = await ending.start()
    try:
        async with running_proxy("on-uvloop", tmp_path) as running, aiohttp.ClientSession() as session:
            running.load(
                {
                    "backends": [
                        {"name": "pod", "inferenceServiceRef": {"name": "pod"}},
                        {"name": "ending", "inferenceServiceRef": {"name": "ending"}},
                    ],
                    "rules": [{"name": "e", "match": {"models": ["e"]}, "route": {"backends": ["ending"]}}],
                    "defaultRoute": "pod",
                    "proxy": {"quarantineDuration": "1h"},
                }
            )
            running.endpoints("pod", f"127.0.0.1:{upstream.port}")
            running.endpoints("ending", f"127.0.0.1:{ending_port}")
            chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
            status, headers, body = await post(session, running.url + CHAT, chat)
            assert status == 200 and headers["X-Llmkube-Backend"] == "pod", body
            assert orjson.loads(body)["choices"][0]["message"]["content"]
            events = []
            async with session.post(running.url + CHAT, json={**chat, "stream": True}) as answer:
                assert answer.status == 200
                async for line in answer.content:
                    if line.startswith(b"data:"):
                        events.append(line)
            assert len(events) >= 20 and events[-1].strip() == b"data: [DONE]"
            # A pod that ends every reused connection: still answered, never quarantined.
            for i in range(6):
                status, _, body = await post(session, running.url + CHAT, {**chat, "model": "e", "n": i})
                assert status == 200, body
            assert ending.ended >= 3
            assert running.state.quarantine.quarantined(running.state.clock()) == []
    finally:
        await ending.stop()
        await upstream.stop()


def test_the_proxy_relays_and_retries_on_uvloop(tmp_path: Path) -> None:
    uvloop = pytest.importorskip("uvloop")
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        assert isinstance(runner.get_loop(), uvloop.Loop)
        runner.run(_relay_on_this_loop(tmp_path))
