"""`llmkube benchmark`'s figures from request records (pure)."""

import pytest

from llmkube.usercli.benchmark.stats import (
    CONNECT,
    INCOMPLETE,
    Percentiles,
    RequestRecord,
    http_error,
    percentile,
    percentiles,
    summarize,
)


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([], 50, None),
        ([3.0], 50, 3.0),
        ([3.0], 99, 3.0),
        ([1.0, 2.0], 50, 1.5),  # the mean of the middle two
        ([4.0, 1.0, 3.0, 2.0], 50, 2.5),  # order does not matter
        ([1.0, 2.0, 3.0, 4.0, 5.0], 90, 4.6),  # linear between ranks 3 and 4
        (list(map(float, range(1, 101))), 99, 99.01),
        (list(map(float, range(1, 101))), 0, 1.0),
        (list(map(float, range(1, 101))), 100, 100.0),
    ],
)
def test_percentiles_interpolate_linearly_between_ranks(
    values: list[float], q: float, expected: float | None
) -> None:
    result = percentile(values, q)
    assert result == pytest.approx(expected) if expected is not None else result is None


@pytest.mark.parametrize(
    ("record", "tpot"),
    [
        (RequestRecord(0, 1, first_token=0.2, last_token=1.0, output_tokens=5), 0.2),
        (RequestRecord(0, 1, first_token=0.2, last_token=0.2, output_tokens=1), None),  # one token: no gap
        (RequestRecord(0, 1, output_tokens=5), None),  # not streamed
        (RequestRecord(0, 1, first_token=0.1, last_token=0.1, output_tokens=0), None),
    ],
)
def test_time_per_output_token_is_the_gap_after_the_first(record: RequestRecord, tpot: float | None) -> None:
    assert record.time_per_output_token == (pytest.approx(tpot) if tpot is not None else None)


def test_a_level_counts_good_requests_over_its_wall_time_and_groups_errors_by_kind() -> None:
    records = [
        RequestRecord(0.0, 2.0, first_token=0.5, last_token=1.5, output_tokens=11, prompt_tokens=100),
        RequestRecord(0.5, 3.0, first_token=0.7, last_token=2.2, output_tokens=16, prompt_tokens=120),
        RequestRecord(1.0, 1.2, error=http_error(503)),
        RequestRecord(1.0, 1.1, error=CONNECT),
        RequestRecord(2.0, 4.0, error=INCOMPLETE, output_tokens=3),  # partial tokens are not counted
        RequestRecord(3.0, 3.1, error=http_error(503)),
    ]
    level = summarize(4, records, client_cpu_seconds=0.25)
    assert level.concurrency == 4
    assert level.seconds == 4.0  # first start to last end, the failed stragglers included
    assert level.requests == 2
    assert level.errors == {"connect": 1, "http-503": 2, "incomplete": 1}
    assert level.failed == 4
    assert level.requests_per_second == 0.5
    assert level.output_tokens_per_second == 27 / 4
    assert level.output_tokens_mean == 13.5
    assert level.prompt_tokens_mean == 110
    assert level.ttft == Percentiles(0.6, pytest.approx(0.68), pytest.approx(0.698))
    assert level.tpot.p50 == pytest.approx((0.1 + 0.1) / 2)
    assert level.latency.p50 == 2.25
    assert level.client_cpu_seconds == 0.25


def test_a_level_where_everything_failed_has_no_latencies_and_no_throughput() -> None:
    level = summarize(1, [RequestRecord(0.0, 1.0, error=CONNECT)])
    assert (level.requests, level.requests_per_second, level.output_tokens_per_second) == (0, 0.0, 0.0)
    assert level.ttft == level.tpot == level.latency == Percentiles()
    assert level.output_tokens_mean is None and level.prompt_tokens_mean is None


def test_an_empty_level_is_all_zero() -> None:
    level = summarize(2, [])
    assert (level.seconds, level.requests, level.errors) == (0.0, 0, {})
    assert percentiles([]) == Percentiles()
