"""Each API key's rate limit (`policy.apiKeys.clients[].requestsPerMinute`): a token bucket per
key, as full as one minute's requests and refilled at the limit's pace, so a key may burst its
minute's worth and then goes at its rate. Keys are the Secret's (the spec names them), so the
buckets are bounded by the spec, never by requests.

Pure state with explicit time: every call says `now` (monotonic seconds)."""

from dataclasses import dataclass


@dataclass
class _Bucket:
    level: float
    at: float


class RateLimits:
    def __init__(self) -> None:
        self._buckets: dict[str, _Bucket] = {}

    def take(self, key: str, per_minute: int, now: float) -> float | None:
        """Count one request of `key`: None when its rate allows it, else the seconds until it does."""
        rate = per_minute / 60.0
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(float(per_minute), now)
        bucket.level = min(float(per_minute), bucket.level + (now - bucket.at) * rate)
        bucket.at = now
        if bucket.level >= 1.0:
            bucket.level -= 1.0
            return None
        return (1.0 - bucket.level) / rate

    def forget_except(self, keys: set[str]) -> None:
        """Drop the buckets of keys the spec no longer names."""
        for key in [k for k in self._buckets if k not in keys]:
            del self._buckets[key]
