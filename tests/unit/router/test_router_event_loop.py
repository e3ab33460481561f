"""The router's event loop (`--loop`), and the proxy on uvloop: what the image runs. The other
router tests run on asyncio's loop (pytest-asyncio's); here the same proxy, with real sockets,
relays answers and streams, and retries a kept-alive connection a pod ended, on uvloop, whose
transports raise their own errors where asyncio's raise theirs; and the tests of the HTTP layer that
lean on the transports most."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from llmkube_testing.openai_upstream import Upstream

from llmkube.router.event_loop import LoopUnavailable, loop_factory, loop_name
from tests.unit.router import test_router_http_client as http_client
from tests.unit.router import test_router_http_server as http_server
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


def _on_uvloop(test: Callable[..., Coroutine[Any, Any, None]], *args: Any) -> None:
    uvloop = pytest.importorskip("uvloop")
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        assert isinstance(runner.get_loop(), uvloop.Loop)
        runner.run(test(*args))


@pytest.mark.parametrize(
    "test",
    [
        http_server.test_keep_alive_answers_each_request_on_one_connection_and_close_ends_it,
        http_server.test_pipelined_requests_are_answered_in_order,
        http_server.test_a_client_that_leaves_cancels_its_request,
        http_server.test_a_client_that_does_not_read_pauses_the_writer_until_it_drains,
        http_server.test_ending_connections_closes_idle_ones_now_and_busy_ones_after_their_answer,
        http_client.test_a_stream_reaches_the_sink_chunk_by_chunk_as_it_arrives,
        http_client.test_a_kept_alive_connection_is_reused_unless_the_answer_ends_it,
        http_client.test_a_new_connection_that_breaks_before_the_answer_is_not_tried_again,
        http_client.test_a_silent_backend_is_cut_off_after_the_read_timeout_but_a_paused_reader_is_not,
    ],
    ids=lambda test: test.__name__,
)
def test_the_http_server_and_client_on_uvloop(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """The HTTP layer's tests that use the transports most (flow control, resets, closes), again on
    uvloop, whose transports are its own."""
    _on_uvloop(test)


@pytest.mark.parametrize("how", ["reset", "close"])
def test_a_kept_alive_connection_the_backend_ended_is_retried_on_uvloop(how: str) -> None:
    _on_uvloop(
        http_client.test_a_kept_alive_connection_the_backend_ended_is_tried_once_more_on_a_new_one, how
    )


def test_a_hostile_head_is_refused_on_uvloop() -> None:
    _on_uvloop(
        http_server.test_a_hostile_head_is_refused_by_the_server_and_the_connection_ends, b"BAD\r\n\r\n", 400
    )


def test_tls_on_uvloop(tmp_path: Path) -> None:
    _on_uvloop(http_client.test_tls_to_a_backend_whose_certificate_is_trusted_and_not_otherwise, tmp_path)
