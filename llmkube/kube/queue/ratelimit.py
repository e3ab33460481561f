"""Rate limiters for requeues, with client-go's numbers (``util/workqueue/default_rate_limiters.go``).

``when(key)`` returns how long to wait before the key may be retried and records the failure;
``forget(key)`` clears a key's history after a success; ``num_requeues(key)`` is the failure count.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Protocol

from llmkube.kube.clock import Clock, RealClock

__all__ = [
    "BucketRateLimiter",
    "ItemExponentialRateLimiter",
    "MaxOfRateLimiter",
    "RateLimiter",
    "default_controller_rate_limiter",
]


class RateLimiter(Protocol):
    def when(self, key: Hashable) -> float: ...

    def forget(self, key: Hashable) -> None: ...

    def num_requeues(self, key: Hashable) -> int: ...


class ItemExponentialRateLimiter:
    """Per-key backoff: ``base * 2**failures`` capped at ``cap`` (5 ms doubling to 1000 s by default)."""

    def __init__(self, base: float = 0.005, cap: float = 1000.0) -> None:
        if base <= 0 or cap < base:
            raise ValueError("need 0 < base <= cap")
        self.base = base
        self.cap = cap
        self._failures: dict[Hashable, int] = {}

    def when(self, key: Hashable) -> float:
        exponent = self._failures.get(key, 0)
        self._failures[key] = exponent + 1
        # Stop doubling long past the cap: ldexp would overflow to inf near exponent 1024.
        if exponent > 62:
            return self.cap
        return min(self.cap, math.ldexp(self.base, exponent))

    def forget(self, key: Hashable) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: Hashable) -> int:
        return self._failures.get(key, 0)


class BucketRateLimiter:
    """An overall token bucket (golang ``rate.Limiter.Reserve`` semantics): it throttles the total
    retry rate, never one key.  Every ``when`` takes a token; tokens may go negative, which turns
    into a delay of ``deficit / qps``."""

    def __init__(self, qps: float = 10.0, burst: int = 100, clock: Clock | None = None) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("need qps > 0 and burst >= 1")
        self.qps = qps
        self.burst = burst
        self._clock = clock or RealClock()
        self._tokens = float(burst)
        self._last = self._clock.monotonic()

    def when(self, key: Hashable) -> float:
        now = self._clock.monotonic()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def forget(self, key: Hashable) -> None:
        return None

    def num_requeues(self, key: Hashable) -> int:
        return 0


class MaxOfRateLimiter:
    """Ask every limiter (each records the failure) and wait for the slowest."""

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("need at least one limiter")
        self.limiters = limiters

    def when(self, key: Hashable) -> float:
        return max(limiter.when(key) for limiter in self.limiters)

    def forget(self, key: Hashable) -> None:
        for limiter in self.limiters:
            limiter.forget(key)

    def num_requeues(self, key: Hashable) -> int:
        return max(limiter.num_requeues(key) for limiter in self.limiters)


def default_controller_rate_limiter(clock: Clock | None = None) -> MaxOfRateLimiter:
    """client-go's ``DefaultTypedControllerRateLimiter``: max-of(5 ms..1000 s per key, 10 qps / burst 100)."""
    return MaxOfRateLimiter(ItemExponentialRateLimiter(0.005, 1000.0), BucketRateLimiter(10.0, 100, clock))
