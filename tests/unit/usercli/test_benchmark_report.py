"""`llmkube benchmark`'s table, JSON document and comparison (pure)."""

import json

import pytest

from llmkube.usercli.benchmark.command import endpoint_url
from llmkube.usercli.benchmark.report import (
    BenchmarkRun,
    ReportError,
    RunSettings,
    compare_rows,
    errors_text,
    from_document,
    level_rows,
    seconds_text,
    summary_lines,
    to_document,
)
from llmkube.usercli.benchmark.stats import LevelResult, Percentiles

SETTINGS = RunSettings(
    target="http://127.0.0.1:8080/v1/chat/completions",
    url="http://127.0.0.1:8080/v1/chat/completions",
    stream=True,
    prompt="synthetic prompts of ~128 tokens",
    max_tokens=64,
    duration=30.0,
    requests=None,
)


def level(
    concurrency: int, rps: float, tps: float, ttft: float, errors: dict[str, int] | None = None
) -> LevelResult:
    return LevelResult(
        concurrency=concurrency,
        seconds=30.0,
        requests=int(rps * 30),
        errors=errors or {},
        requests_per_second=rps,
        output_tokens_per_second=tps,
        output_tokens_mean=64.0,
        prompt_tokens_mean=130.0,
        ttft=Percentiles(ttft, ttft * 2, ttft * 3),
        tpot=Percentiles(0.05, 0.06, 0.2),
        latency=Percentiles(3.4, 4.0, 5.5),
        client_cpu_seconds=0.4,
    )


RUN = BenchmarkRun(
    SETTINGS, (level(1, 0.3, 19.2, 0.212), level(4, 0.9, 57.6, 0.5, {"http-503": 2})), "2026-01-01T00:00:00Z"
)


def test_the_table_has_one_row_per_level() -> None:
    assert level_rows(RUN.levels) == [
        ("1", "9", "0.30", "19.2", "212 / 424 / 636", "50 / 60 / 200", "3.40 s", "0"),
        ("4", "27", "0.90", "57.6", "500 / 1000 / 1500", "50 / 60 / 200", "3.40 s", "2 (http-503: 2)"),
    ]
    assert summary_lines(RUN) == [
        "Target: http://127.0.0.1:8080/v1/chat/completions",
        "Requests: synthetic prompts of ~128 tokens, up to 64 output tokens, streamed, 30 s per level",
    ]


def test_the_json_document_reads_back_as_the_same_run() -> None:
    document = json.loads(json.dumps(to_document(RUN)))
    assert document["version"] == "llmkube.dev/benchmark/v1"
    assert document["levels"][1]["ttft"] == {"p50": 0.5, "p90": 1.0, "p99": 1.5}
    assert from_document(document) == RUN


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"version": "something/else"}, "not an llmkube benchmark document"),
        ([], "not an llmkube benchmark document"),
        ({"version": "llmkube.dev/benchmark/v1", "settings": {}}, "incomplete"),
        (
            {
                "version": "llmkube.dev/benchmark/v1",
                "settings": to_document(RUN)["settings"],
                "levels": [{"concurrency": 1}],
            },
            "incomplete",
        ),
    ],
)
def test_other_files_are_refused_with_a_reason(document: object, message: str) -> None:
    with pytest.raises(ReportError, match=message):
        from_document(document)


def test_two_runs_compare_level_by_level_with_ratios() -> None:
    newer = BenchmarkRun(
        SETTINGS, (level(4, 1.8, 115.2, 0.25), level(16, 2.0, 128.0, 1.0)), "2026-01-02T00:00:00Z"
    )
    assert compare_rows(RUN, newer) == [
        (
            "4",
            "0.90 -> 1.80 (2.00x)",
            "57.6 -> 115.2 (2.00x)",
            "500 ms -> 250 ms (0.50x)",
            "50 ms -> 50 ms (1.00x)",
            "2 -> 0",
        )
    ]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "-"),
        (0.0004, "0 ms"),
        (0.2124, "212 ms"),
        (0.9994, "999 ms"),
        (1.0, "1.00 s"),
        (61.5, "61.50 s"),
    ],
)
def test_seconds_read_at_a_glance(value: float | None, text: str) -> None:
    assert seconds_text(value) == text


def test_errors_by_kind() -> None:
    assert errors_text({}) == "0"
    assert errors_text({"connect": 1, "timeout": 3}) == "4 (connect: 1, timeout: 3)"


@pytest.mark.parametrize(
    ("url", "endpoint", "full"),
    [
        ("http://h:8080", "chat", "http://h:8080/v1/chat/completions"),
        ("http://h:8080/", "completions", "http://h:8080/v1/completions"),
        ("http://h:8080/v1", "chat", "http://h:8080/v1/chat/completions"),
        ("http://h:8080/v1/", "completions", "http://h:8080/v1/completions"),
        ("http://h/openai/v1/chat/completions", "completions", "http://h/openai/v1/chat/completions"),
    ],
)
def test_base_urls_get_the_endpoint_path(url: str, endpoint: str, full: str) -> None:
    assert endpoint_url(url, endpoint) == full
