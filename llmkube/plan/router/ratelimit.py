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

    def due(self, key: str, per_minute: int, now: float) -> float | None:
        """What `take` would answer now, counting nothing: None when the key's rate allows one more
        request, else the seconds until it does."""
        bucket = self._buckets.get(key)
        level = float(per_minute) if bucket is None else self._level(bucket, per_minute, now)
        return None if level >= 1.0 else (1.0 - level) / (per_minute / 60.0)

    def take(self, key: str, per_minute: int, now: float) -> float | None:
        """Count one request of `key`: None when its rate allows it, else the seconds until it does."""
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(float(per_minute), now)
        bucket.level, bucket.at = self._level(bucket, per_minute, now), now
        if bucket.level >= 1.0:
            bucket.level -= 1.0
            return None
        return (1.0 - bucket.level) / (per_minute / 60.0)

    @staticmethod
    def _level(bucket: _Bucket, per_minute: int, now: float) -> float:
        return min(float(per_minute), bucket.level + (now - bucket.at) * (per_minute / 60.0))
