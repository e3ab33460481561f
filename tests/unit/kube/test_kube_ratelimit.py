from __future__ import annotations

import pytest

from llmkube.kube.clock import FakeClock
from llmkube.kube.queue.ratelimit import (
    BucketRateLimiter,
    ItemExponentialRateLimiter,
    MaxOfRateLimiter,
    default_controller_rate_limiter,
)


def test_item_exponential_doubles_from_5ms_and_caps_at_1000s() -> None:
    limiter = ItemExponentialRateLimiter(0.005, 1000.0)
    delays = [limiter.when("k") for _ in range(20)]
    assert delays[:4] == [0.005, 0.01, 0.02, 0.04]
    assert delays[17] == 655.36  # 0.005 * 2**17
    assert delays[18] == 1000.0  # the cap is reached after 18 failures
    assert delays[19] == 1000.0
    assert limiter.num_requeues("k") == 20


def test_item_exponential_is_per_key_and_forget_resets() -> None:
    limiter = ItemExponentialRateLimiter()
    limiter.when("a")
    limiter.when("a")
    assert limiter.when("b") == 0.005
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == 0.005


def test_item_exponential_survives_huge_failure_counts() -> None:
    limiter = ItemExponentialRateLimiter(0.005, 1000.0)
    for _ in range(2000):
        delay = limiter.when("k")
    assert delay == 1000.0


@pytest.mark.parametrize(("base", "cap"), [(0.0, 1.0), (2.0, 1.0), (-1.0, 1.0)])
def test_item_exponential_rejects_nonsense(base: float, cap: float) -> None:
    with pytest.raises(ValueError, match="base"):
        ItemExponentialRateLimiter(base, cap)


def test_bucket_allows_burst_then_spaces_at_qps() -> None:
    clock = FakeClock()
    bucket = BucketRateLimiter(10.0, 100, clock)
    assert [bucket.when(i) for i in range(100)] == [0.0] * 100
    assert bucket.when("x") == pytest.approx(0.1)
    assert bucket.when("y") == pytest.approx(0.2)
    assert bucket.num_requeues("x") == 0


async def test_bucket_refills_with_time() -> None:
    clock = FakeClock()
    bucket = BucketRateLimiter(10.0, 100, clock)
    for i in range(100):
        bucket.when(i)
    await clock.advance(1.0)  # 10 tokens back
    assert [bucket.when(i) for i in range(10)] == [0.0] * 10
    assert bucket.when("more") == pytest.approx(0.1)
    await clock.advance(3600.0)  # refill never exceeds the burst
    assert sum(1 for i in range(150) if bucket.when(i) == 0.0) == 100


def test_max_of_takes_the_slowest_and_forgets_everywhere() -> None:
    clock = FakeClock()
    limiter = MaxOfRateLimiter(ItemExponentialRateLimiter(1.0, 100.0), BucketRateLimiter(1.0, 1, clock))
    assert limiter.when("a") == 1.0  # item says 1 s, bucket has one token
    assert limiter.when("a") == 2.0  # item says 2 s, bucket says 1 s
    assert limiter.num_requeues("a") == 2
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0


def test_default_controller_rate_limiter_matches_client_go() -> None:
    clock = FakeClock()
    limiter = default_controller_rate_limiter(clock)
    # The bucket (10 qps, burst 100) dominates once many different keys fail at once ...
    delays = [limiter.when(f"key-{i}") for i in range(101)]
    assert delays[:100] == [0.005] * 100
    assert delays[100] == pytest.approx(0.1)
    # ... and the per-key exponential dominates for one key failing repeatedly.
    for _ in range(17):
        limiter.when("hot")
    assert limiter.when("hot") == 0.005 * 2**17
