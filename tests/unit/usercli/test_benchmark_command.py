"""`llmkube benchmark` end to end against the OpenAI stand-in (a real HTTP server on loopback, in a
process of its own): the command line as a user runs it, its JSON, table, PNG and comparison."""

import json
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from llmkube_testing.openai_standin import standin_process

from llmkube.cli import main


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture(autouse=True)
def _capture(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    global _capsys
    _capsys = capsys
    monkeypatch.delenv("COLUMNS", raising=False)  # a pipe: kubectl-wide lines


_capsys: pytest.CaptureFixture[str]


def benchmark(*args: str, check: bool = True) -> Ran:
    _capsys.readouterr()
    code = main(["benchmark", *args])
    out, err = _capsys.readouterr()
    result = Ran(code, out, err)
    if check:
        assert result.returncode == 0, result.stderr
    return result


def document(*args: str) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(benchmark(*args, "-o", "json").stdout)
    return parsed


def test_a_sweep_counts_every_request_and_token_per_level() -> None:
    with standin_process() as server:
        run = document("--url", server.url, "-c", "1,4", "--requests", "8", "--max-tokens", "16")
    assert run["settings"]["url"] == f"{server.url}/v1/chat/completions"
    assert run["settings"]["stream"] is True
    levels = run["levels"]
    assert [level["concurrency"] for level in levels] == [1, 4]
    for level in levels:
        assert level["requests"] == 8 and level["errors"] == {}
        assert level["output_tokens_mean"] == 16  # the usage chunk's count: every answer is max_tokens long
        assert level["prompt_tokens_mean"] == 128  # the stand-in counts words: one per synthetic token
        assert level["ttft"]["p50"] is not None and level["tpot"]["p50"] is not None
        assert level["requests_per_second"] > 0 and level["output_tokens_per_second"] > 0
        assert level["client_cpu_seconds"] is not None


def test_latencies_follow_the_servers_delays() -> None:
    # 60 ms to the first token, then 20 ms per token: TTFT and TPOT are measured, not made up.
    with standin_process(ttft=0.06, per_token=0.02) as server:
        run = document("--url", server.url, "-c", "2", "--requests", "6", "--max-tokens", "11")
    (level,) = run["levels"]
    assert 0.06 <= level["ttft"]["p50"] < 0.5
    assert 0.02 <= level["tpot"]["p50"] < 0.1
    assert 0.06 + 10 * 0.02 <= level["latency"]["p50"] < 1.5
    # Two at a time, each answer at least 0.26 s: at most 2 / 0.26 requests per second.
    assert level["requests_per_second"] <= 2 / 0.26


def test_whole_answers_have_a_latency_but_no_token_times() -> None:
    with standin_process() as server:
        run = document(
            "--url", server.url + "/v1", "--no-stream", "--endpoint", "completions", "--requests", "3"
        )
    (level,) = run["levels"]
    assert run["settings"]["url"] == f"{server.url}/v1/completions"
    assert level["requests"] == 3 and level["output_tokens_mean"] == 128
    assert level["ttft"] == {"p50": None, "p90": None, "p99": None}
    assert level["latency"]["p50"] is not None


def test_errors_are_counted_by_kind() -> None:
    # Every 3rd request is refused with 503; every 5th answer is cut halfway (the 15th is a 503).
    with standin_process(fail_every=3, cut_every=5) as server:
        run = document("--url", server.url, "--requests", "15", "--warmup", "0", "--max-tokens", "8")
    (level,) = run["levels"]
    assert level["errors"] == {"disconnected": 2, "http-503": 5}
    assert level["requests"] == 8


@pytest.mark.parametrize("concurrency", ["1", "4"])
def test_a_server_that_closes_each_connection_after_a_stream_fails_no_request(concurrency: str) -> None:
    # As llama-server does: the next request on that pooled connection never reaches the server and
    # is sent again on a fresh one; it is not the server's error.
    with standin_process(close_after_stream=True) as server:
        run = document("--url", server.url, "-c", concurrency, "--requests", "20", "--max-tokens", "4")
    (level,) = run["levels"]
    assert level["errors"] == {} and level["requests"] == 20


def test_a_server_that_is_not_there_is_one_clear_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = benchmark("--url", f"http://127.0.0.1:{port}", "--requests", "2", check=False)
    assert result.returncode == 1
    assert result.stderr.strip().endswith(
        f"http://127.0.0.1:{port}/v1/chat/completions did not answer the warm-up request (connect)"
    )
    # Without a warm-up the run goes ahead and says what failed.
    result = benchmark(
        "--url", f"http://127.0.0.1:{port}", "--requests", "2", "--warmup", "0", "-o", "json", check=False
    )
    assert result.returncode == 1
    assert json.loads(result.stdout)["levels"][0]["errors"] == {"connect": 2}


def test_the_table_the_progress_lines_the_comparison_and_the_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    with standin_process(per_token=0.005) as server:
        table = benchmark("--url", server.url, "-c", "1,2", "--requests", "4", "--max-tokens", "8")
        old = tmp_path / "old.json"
        old.write_text(benchmark("--url", server.url, "-c", "1,2", "--requests", "4", "-o", "json").stdout)
        new = tmp_path / "new.json"
        new.write_text(benchmark("--url", server.url, "-c", "2,4", "--requests", "4", "-o", "json").stdout)
    lines = table.stdout.splitlines()
    assert lines[0] == f"Target: {server.url}/v1/chat/completions"
    assert (
        lines[1]
        == "Requests: synthetic prompts of ~128 tokens, up to 8 output tokens, streamed, 4 requests per level"
    )
    assert lines[2].split() == [
        "CONCURRENCY",
        "REQUESTS",
        "REQ/S",
        "OUTPUT",
        "TOK/S",
        "TTFT",
        "P50/P90/P99",
        "(ms)",
        "TPOT",
        "P50/P90/P99",
        "(ms)",
        "LATENCY",
        "P50",
        "ERRORS",
    ]
    assert [line.split()[:2] for line in lines[3:]] == [["1", "4"], ["2", "4"]]
    # In a pipe, one progress line per finished level (a terminal gets one line rewritten in place).
    done = [line for line in table.stderr.splitlines() if line.startswith("concurrency ")]
    assert [line.split(":")[0] for line in done] == ["concurrency 1 [1/2]", "concurrency 2 [2/2]"]
    assert all(": 4 ok, 0 failed, " in line for line in done)

    plot = tmp_path / "compare.png"
    compared = benchmark("--compare", str(old), str(new), "--plot", str(plot))
    rows = compared.stdout.splitlines()
    assert rows[0].startswith(f"{old}: {server.url}/v1/chat/completions, ")
    assert rows[2].split()[:2] == ["CONCURRENCY", "REQ/S"]
    assert len(rows) == 4 and rows[3].split()[0] == "2"  # the one level both runs measured
    assert " -> " in rows[3] and "x)" in rows[3]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and plot.stat().st_size > 10_000


def test_compare_refuses_files_that_are_not_runs(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('{"version": "nope"}')
    (tmp_path / "b.json").write_text("not json")
    result = benchmark("--compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), check=False)
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: {tmp_path / 'a.json'}: not an llmkube benchmark document")


def test_without_a_target_it_says_what_to_give() -> None:
    result = benchmark(check=False)
    assert result.returncode == 1
    assert "name an InferenceService, or give --url" in result.stderr


def test_the_servers_own_words_are_shown() -> None:
    with standin_process(fail_every=3) as server:
        run = benchmark(
            "--url", server.url, "--requests", "6", "--warmup", "0", "--max-tokens", "4", "-o", "json"
        )
    (level,) = json.loads(run.stdout)["levels"]
    assert level["errors"] == {"http-503": 2}
    assert level["error_messages"] == {"http-503": "the stand-in fails this request on purpose"}
    assert "http-503 (2x): the server said: the stand-in fails this request on purpose" in run.stderr
    # A warm-up that fails says what the server said, not only its status.
    with standin_process(fail_every=1) as server:
        failed = benchmark("--url", server.url, "--requests", "1", check=False)
    assert failed.returncode == 1
    assert failed.stderr.strip().endswith(
        "did not answer the warm-up request (http-503: the stand-in fails this request on purpose)"
    )
