"""The CLI's port-forward (kube/rest/portforward.py) relays each frame as it comes: a streamed answer
reaches the client chunk by chunk, not at its end. kwok's kubelet API answers port-forwards with
llmkube_testing.stdio_http, which streams its chunks 50 ms apart, each stamped with when it was
written; through the real API server's pods/portforward each one must arrive within a few
milliseconds of leaving (the delay a relay adds to the time to the first token), and
`llmkube benchmark`'s time to first token must be one gap, not the whole answer.

The same on a real node against llama.cpp: tests/node/test_port_forward_node.py."""

import json
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest
from e2e_support import RunningController, delete_services_and_wait
from llmkube_testing.pytest_plugin import ClusterHandle
from llmkube_testing.stdio_http import STREAM_GAP
from usercli_support import llmkube

from llmkube.kube.rest import load_client_config, port_forward
from llmkube.usercli.pods import ready_pods, service_pods
from llmkube.usercli.session import open_session

SOURCE = "https://models.invalid/tiny-chat-Q4_K_M.gguf"
#: what the relay may add to a chunk on this (shared, 2-core) machine: the API server and kwok
#: included; a relay that waits for more bytes, or for the end, adds a gap or the whole answer
RELAY_BUDGET = 0.025
WORDS = 12


@pytest.fixture(autouse=True)
async def services_gone_before_the_namespace(
    operator: RunningController, full_namespace: str
) -> AsyncIterator[None]:
    yield
    await delete_services_and_wait(operator, full_namespace, pods_too=True)


async def streamed_arrivals(base_url: str) -> list[tuple[float, float]]:
    """(sent, arrived) wall-clock times of each chunk of one streamed chat answer."""
    body = {"messages": [{"role": "user", "content": "one two"}], "max_tokens": WORDS, "stream": True}
    arrivals: list[tuple[float, float]] = []
    async with (
        aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(force_close=True), timeout=aiohttp.ClientTimeout(total=30)
        ) as http,
        http.post(f"{base_url}/v1/chat/completions", json=body) as response,
    ):
        assert response.status == 200
        async for line in response.content:
            arrived = time.time()
            if line.startswith(b"data: {"):
                arrivals.append((json.loads(line[6:])["llmkube_sent_at"], arrived))
    return arrivals


async def test_each_streamed_chunk_comes_through_the_port_forward_as_it_is_sent(
    operator: RunningController, full_cluster: ClusterHandle, full_namespace: str
) -> None:
    kc, ns = full_cluster.kubeconfig, full_namespace
    deployed = await llmkube(kc, "deploy", SOURCE, "-n", ns, "--memory", "1Gi", "--timeout", "90")
    assert deployed.code == 0, deployed.text
    async with open_session(str(kc), None, ns) as session:
        pod = ready_pods(await service_pods(session, "tiny-chat"))[0]
    config = await load_client_config(str(kc))
    async with port_forward(config, ns, pod["metadata"]["name"], 8080) as forward:
        for _ in range(3):  # several connections, each its own stream
            arrivals = await streamed_arrivals(f"http://127.0.0.1:{forward.local_port}")
            assert len(arrivals) == WORDS
            delays = sorted(arrived - sent for sent, arrived in arrivals)
            assert delays[len(delays) // 2] < RELAY_BUDGET, delays  # the median chunk
            assert delays[-1] < STREAM_GAP, delays  # none waited for the next one
            spread = arrivals[-1][1] - arrivals[0][1]
            assert spread > (WORDS - 2) * STREAM_GAP, arrivals  # they came apart, as sent
    assert forward.errors == []

    # `llmkube chat` streams through the same port-forward, and says when its first piece came.
    chat = await llmkube(kc, "chat", "tiny-chat", "-n", ns, "one two", "--max-tokens", str(WORDS))
    assert chat.code == 0, chat.text
    assert chat.out.strip() == "This is kwok's stand-in for llama.cpp (no model runs here). You said:"
    assert "first token after" in chat.err and "12 completion tokens" in chat.err, chat.err

    # The benchmark's own path: its time to the first token is about one request's set-up, not the
    # answer's length (the answer takes (WORDS - 1) gaps).
    run = await llmkube(
        kc,
        *("benchmark", "tiny-chat", "-n", ns, "-c", "1", "--requests", "3", "--warmup", "1"),
        *("--max-tokens", str(WORDS), "-o", "json"),
    )
    assert run.code == 0, run.text
    level = json.loads(run.out)["levels"][0]
    assert level["requests"] == 3 and level["errors"] == {}, level
    assert level["ttft"]["p50"] < level["latency"]["p50"] - (WORDS - 3) * STREAM_GAP, level
