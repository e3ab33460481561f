"""The CLI's port-forward (kube/rest/portforward.py) against a stand-in for the API server's and the
kubelet's pods/portforward that forwards as containerd does, its one-second grace included
(llmkube_testing/kubelet_forward.py), to the OpenAI stand-in in a process of its own, which closes
each connection after a streamed answer as llama-server does:

* each streamed token comes through as it is sent: the time to the first token and between
  tokens through the forward are within a few milliseconds of the direct path's;
* the stream ends as soon as the local side closes, not a second later;
* `llmkube benchmark`'s load generator through the forward (a fresh connection per request) has a
  time to first token within a few milliseconds of the direct path's, where a reused connection
  waited out containerd's second.
"""

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlsplit

import aiohttp
import pytest
from llmkube_testing.kubelet_forward import CONTAINERD_GRACE, ForwardStandIn, running_forward
from llmkube_testing.openai_standin import StandInProcess, standin_process

from llmkube.kube.rest.config import ClientConfig, StaticAuth
from llmkube.kube.rest.portforward import PortForward, port_forward
from llmkube.usercli.benchmark.loadgen import Level, LiveCounts, connector, run_level
from llmkube.usercli.benchmark.stats import summarize

TOKEN_GAP = 0.03
TOKENS = 8
#: what the forward may add at best (loopback, no TLS; this 2-core machine is shared with builds)
BUDGET = 0.015
REQUESTS = 10
BODY = (
    b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "stream": true, '
    b'"stream_options": {"include_usage": true}}'
)


@pytest.fixture(scope="module")
def server() -> Iterator[StandInProcess]:
    with standin_process(ttft=0.02, per_token=TOKEN_GAP, close_after_stream=True) as running:
        yield running


@pytest.fixture
async def kubelet(server: StandInProcess) -> AsyncIterator[ForwardStandIn]:
    address = urlsplit(server.url)
    assert address.hostname is not None and address.port is not None
    async with running_forward((address.hostname, address.port)) as standin:
        yield standin


@pytest.fixture
async def forward(kubelet: ForwardStandIn) -> AsyncIterator[PortForward]:
    config = ClientConfig(host=kubelet.base, auth=StaticAuth())
    async with port_forward(config, "ml", "tiny-0", 8080, ahead=True) as running:
        yield running


async def token_times(url: str) -> list[float]:
    """Seconds from sending a streamed request to each of its tokens."""
    times: list[float] = []
    started = time.perf_counter()
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http,
        http.post(
            f"{url}/v1/chat/completions", data=BODY, headers={"Content-Type": "application/json"}
        ) as answer,
    ):
        assert answer.status == 200
        async for line in answer.content:
            if line.startswith(b"data: {") and b'"content"' in line:
                times.append(time.perf_counter() - started)
    return times


async def test_each_token_comes_through_as_it_is_sent(server: StandInProcess, forward: PortForward) -> None:
    direct = [await token_times(server.url) for _ in range(5)]
    forwarded = [await token_times(f"http://127.0.0.1:{forward.local_port}") for _ in range(5)]
    for times in (*direct, *forwarded):
        assert len(times) == TOKENS
    best_direct = min(times[0] for times in direct)  # the best case: what the path adds to each
    best_forwarded = min(times[0] for times in forwarded)
    assert best_forwarded - best_direct < BUDGET, (direct, forwarded)
    for times in forwarded:
        gaps = sorted(later - earlier for earlier, later in itertools.pairwise(times))
        assert gaps[len(gaps) // 2] > TOKEN_GAP / 2, times  # they came one by one, as sent
        assert times[-1] - times[0] > (TOKENS - 2) * TOKEN_GAP, times  # not all at the end
    assert forward.errors == []


async def test_the_stream_ends_when_the_local_side_closes(
    forward: PortForward, kubelet: ForwardStandIn
) -> None:
    await token_times(f"http://127.0.0.1:{forward.local_port}")
    # The client read its answer and closed; the stream ends with it, not after containerd's grace.
    stream = kubelet.streams[0]  # the next is opened ahead, for the next connection
    await asyncio.wait_for(stream.done.wait(), 5)
    assert stream.ended is not None and stream.server_closed is not None
    assert stream.ended - stream.server_closed < CONTAINERD_GRACE / 4, stream


async def test_the_benchmark_through_the_forward_is_not_held_back(
    server: StandInProcess, forward: PortForward
) -> None:
    def body(_: int) -> bytes:
        return BODY

    results, firsts = {}, {}
    for name, url in (("direct", server.url), ("forward", f"http://127.0.0.1:{forward.local_port}")):
        async with aiohttp.ClientSession(connector=connector(fresh=True)) as http:
            records = await run_level(
                http,
                f"{url}/v1/chat/completions",
                body,
                stream=True,
                level=Level(1, None, REQUESTS, 30.0),
                live=LiveCounts(),
            )
        results[name] = summarize(1, records)
        firsts[name] = min(r.first_token for r in records if r.first_token is not None)
    for name, level in results.items():
        assert level.requests == REQUESTS and level.errors == {}, (name, level)
    direct, forwarded = results["direct"].ttft.p50, results["forward"].ttft.p50
    assert direct is not None and forwarded is not None
    # The best case is what the forward adds to every request; the median has this machine's noise.
    assert firsts["forward"] - firsts["direct"] < BUDGET, firsts
    assert forwarded - direct < 2 * BUDGET, results
    assert results["forward"].tpot.p50 == pytest.approx(TOKEN_GAP, abs=BUDGET)
