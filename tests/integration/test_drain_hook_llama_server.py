"""The drain's preStop hook against a real llama-server (the node tier's build, as a process on
loopback, serving the tiny random GGUF) with real streams in flight: it holds the pod while the
server generates, ends once the server is idle, and says how many requests a timeout cut."""

import json
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest
from llama_host import LlamaServer, llama_server
from llmkube_testing.tiny_gguf import write_tiny_gguf

from llmkube.plan.inferenceservice.drain import DrainHook
from llmkube.plan.inferenceservice.runtimes import runtime_defaults

pytestmark = pytest.mark.node_prereqs  # llama-server, from the node tier's image (make node-prereqs)

SLOTS = 2
STREAMS = 12  # two generating, the others waiting for a slot (llamacpp:requests_deferred): seconds of work
TOKENS = 480


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    directory = tmp_path_factory.mktemp("llama")
    model = write_tiny_gguf(directory / "tiny.gguf")
    with llama_server(model, directory / "llama-server.log", slots=SLOTS) as running:
        yield running


@dataclass(frozen=True)
class Finished:
    done: bool  # the closing `data: [DONE]`
    predicted: int | None  # the server's own count of generated tokens
    at: float


def stream(url: str) -> Finished:
    body = {
        "messages": [{"role": "user", "content": "Tell me a long story."}],
        "max_tokens": TOKENS,
        "ignore_eos": True,
        "stream": True,
    }
    request = urllib.request.Request(
        f"{url}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Connection": "close"},
    )
    predicted, done = None, False
    with urllib.request.urlopen(request, timeout=120) as answer:
        for raw in answer:
            line = raw.decode().strip()
            if line == "data: [DONE]":
                done = True
            elif line.startswith("data: "):
                predicted = json.loads(line[6:]).get("timings", {}).get("predicted_n", predicted)
    return Finished(done, predicted, time.monotonic())


def hook(server: LlamaServer, timeout: int) -> subprocess.Popen[str]:
    port = int(server.url.rsplit(":", 1)[1])
    metrics = runtime_defaults("llamacpp").in_flight_metrics
    command = DrainHook(timeout=timeout, settle=0, port=port, metrics=metrics).lifecycle()["preStop"]["exec"]
    return subprocess.Popen(command["command"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def busy(server: LlamaServer) -> bool:
    page = server.metrics()
    return "llamacpp:requests_processing 0" not in page.splitlines()


def test_the_hook_holds_the_pod_until_every_stream_is_answered(server: LlamaServer) -> None:
    with ThreadPoolExecutor(STREAMS) as pool:
        streams = [pool.submit(stream, server.url) for _ in range(STREAMS)]
        deadline = time.monotonic() + 30
        while not busy(server):
            assert time.monotonic() < deadline, "the server never started generating"
            time.sleep(0.05)
        running = hook(server, 120)
        finished = [future.result(timeout=120) for future in streams]
    out, err = running.communicate(timeout=60)
    ended = time.monotonic()
    assert (running.returncode, out, err) == (0, "", "")
    # Every stream got every token, and the hook ended after the last of them.
    assert [(f.done, f.predicted) for f in finished] == [(True, TOKENS)] * STREAMS
    assert ended >= max(f.at for f in finished)


def test_a_timeout_says_how_many_requests_it_cut(server: LlamaServer) -> None:
    # Streams keep arriving until the hook ends, so the server is still generating when its 1 s runs
    # out however fast this machine is (a fixed batch can finish first on an idle machine).
    with ThreadPoolExecutor(STREAMS) as pool:
        streams = [pool.submit(stream, server.url) for _ in range(STREAMS)]
        deadline = time.monotonic() + 30
        while not busy(server):
            assert time.monotonic() < deadline, "the server never started generating"
            time.sleep(0.05)
        running = hook(server, 1)
        while running.poll() is None and len(streams) < 50 * STREAMS:
            if sum(not future.done() for future in streams) < STREAMS:
                streams.append(pool.submit(stream, server.url))
            time.sleep(0.01)
        out, _ = running.communicate(timeout=60)
        for future in streams:
            future.result(timeout=120)
    assert running.returncode == 1, out
    held = int(out.split("reached with ", 1)[1].split(" ", 1)[0])
    assert 1 <= held <= STREAMS, out
    assert (
        out.strip()
        == f"llmkube drain: timeout (1 s) reached with {held} requests in flight: the server stops now"
    )
