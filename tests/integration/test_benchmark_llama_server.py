"""`llmkube benchmark` against a real llama-server (the node tier's build, as a process on loopback,
serving the tiny random GGUF): streamed and whole answers, a sweep, counts that agree with what the
server itself counted on its /metrics page."""

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from llama_host import LlamaServer, llama_server
from llmkube_testing.tiny_gguf import write_tiny_gguf

from llmkube.cli import main

pytestmark = pytest.mark.node_prereqs  # llama-server, from the node tier's image (make node-prereqs)

SLOTS = 4


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    directory = tmp_path_factory.mktemp("llama")
    model = write_tiny_gguf(directory / "tiny.gguf")
    with llama_server(model, directory / "llama-server.log", slots=SLOTS) as running:
        yield running


def counter(metrics: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)} ([0-9.e+]+)$", metrics, re.MULTILINE)
    assert match, f"{name} is not on the metrics page:\n{metrics}"
    return float(match.group(1))


def benchmark(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    capsys.readouterr()
    code = main(["benchmark", *args, "-o", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    parsed: dict[str, Any] = json.loads(out)
    return parsed


def test_a_streamed_sweep_counts_what_the_server_generated(
    server: LlamaServer, capsys: pytest.CaptureFixture[str]
) -> None:
    before = counter(server.metrics(), "llamacpp:tokens_predicted_total")
    run = benchmark(
        capsys,
        *("--url", server.url, "-c", f"1,{SLOTS}", "--requests", "12"),
        *("--max-tokens", "24", "--prompt-tokens", "32", "--warmup", "0"),
    )
    after = counter(server.metrics(), "llamacpp:tokens_predicted_total")
    levels = run["levels"]
    assert [level["concurrency"] for level in levels] == [1, SLOTS]
    for level in levels:
        # Every request answered in full (ignore_eos: max_tokens each), none counted as an error
        # (llama-server closes the connection after each stream: the next request goes out again).
        assert level["errors"] == {} and level["requests"] == 12
        assert level["output_tokens_mean"] == 24
        assert level["prompt_tokens_mean"] is not None and level["prompt_tokens_mean"] >= 32
        assert level["ttft"]["p50"] > 0 and level["tpot"]["p50"] > 0
        assert level["ttft"]["p50"] <= level["ttft"]["p90"] <= level["ttft"]["p99"]
        assert level["latency"]["p50"] > level["ttft"]["p50"]
        assert level["output_tokens_per_second"] == pytest.approx(12 * 24 / level["seconds"], rel=1e-6)
    # The server generated exactly the tokens the benchmark counted: 2 levels x 12 requests x 24.
    assert after - before == 2 * 12 * 24


def test_whole_answers_and_the_completions_endpoint(
    server: LlamaServer, capsys: pytest.CaptureFixture[str]
) -> None:
    run = benchmark(
        capsys,
        *("--url", f"{server.url}/v1", "--endpoint", "completions", "--no-stream"),
        *("-c", "2", "--requests", "6", "--max-tokens", "16"),
    )
    (level,) = run["levels"]
    assert run["settings"]["url"] == f"{server.url}/v1/completions"
    assert level["errors"] == {} and level["requests"] == 6 and level["output_tokens_mean"] == 16
    assert level["ttft"]["p50"] is None and level["latency"]["p50"] > 0


def test_a_duration_level_and_the_table(server: LlamaServer, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    code = main(["benchmark", "--url", server.url, "-c", "2", "--duration", "2", "--max-tokens", "8"])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"Target: {server.url}/v1/chat/completions"
    assert "2 s per level" in lines[1]
    row = lines[3].split()
    assert row[0] == "2" and int(row[1]) >= 2 and row[-1] == "0"  # concurrency, requests, no error
    assert re.search(r"concurrency 2 \[1/1\]: [0-9]+ ok, 0 failed", err)
