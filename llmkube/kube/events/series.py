"""Event series aggregation and per-object rate limiting, as pure logic with explicit times.

Like client-go's ``tools/events`` broadcaster: the first occurrence creates an Event; a repeat of
the same (regarding, reason, action, note, type) within ``window`` becomes a series - the second
occurrence patches ``series.count = 2`` at once, later ones only bump the count in memory and are
written at most every ``refresh`` seconds.  New Events (not series updates) are rate-limited per
regarding object by a token bucket (client-go's spam filter: burst 25, one token per 5 minutes), so
a warning repeated with ever-changing notes cannot flood the API.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

__all__ = ["EventKey", "SeriesCache", "SeriesDecision", "SeriesEntry", "Verdict"]


@dataclass(frozen=True, slots=True)
class EventKey:
    regarding: str  # uid, or kind/namespace/name when the object has none yet
    type: str
    reason: str
    action: str
    note: str


@dataclass(slots=True)
class SeriesEntry:
    key: EventKey
    name: str  # the Event object's name
    namespace: str  # where the Event object lives
    first_seen: float
    last_seen: float
    count: int = 1
    written_count: int = 1  # the count the server last received
    last_written: float = 0.0
    series_started: bool = False  # the immediate "count: 2" patch has been requested


class Verdict(enum.Enum):
    CREATE = "create"
    PATCH = "patch"
    COALESCED = "coalesced"  # counted; written with the next refresh
    DROPPED = "dropped"  # rate-limited


@dataclass(frozen=True, slots=True)
class SeriesDecision:
    verdict: Verdict
    entry: SeriesEntry | None = None


@dataclass
class _Bucket:
    tokens: float
    updated: float


@dataclass
class SeriesCache:
    window: float = 360.0  # client-go finishTime: a series ends after 6 minutes of silence
    refresh: float = 30.0  # client-go refreshTime: how often pending counts are written
    burst: int = 25
    refill_per_second: float = 1.0 / 300.0
    entries: dict[EventKey, SeriesEntry] = field(default_factory=dict)
    buckets: dict[str, _Bucket] = field(default_factory=dict)
    dropped: int = 0

    def record(self, key: EventKey, name: str, namespace: str, now: float) -> SeriesDecision:
        """Account one occurrence; ``name``/``namespace`` are used if it starts a new Event."""
        entry = self.entries.get(key)
        if entry is not None and now - entry.last_seen <= self.window:
            entry.count += 1
            entry.last_seen = now
            if not entry.series_started:  # the first repeat turns the Event into a series at once
                entry.series_started = True
                return SeriesDecision(Verdict.PATCH, entry)
            return SeriesDecision(Verdict.COALESCED, entry)
        if not self._take_token(key.regarding, now):
            self.dropped += 1
            return SeriesDecision(Verdict.DROPPED)
        entry = SeriesEntry(key, name, namespace, first_seen=now, last_seen=now, last_written=now)
        self.entries[key] = entry
        return SeriesDecision(Verdict.CREATE, entry)

    def written(self, entry: SeriesEntry, count: int, now: float) -> None:
        entry.written_count = count
        entry.last_written = now

    def forget(self, entry: SeriesEntry) -> None:
        """The Event could not be written or vanished from the server: start afresh next time."""
        if self.entries.get(entry.key) is entry:
            del self.entries[entry.key]

    def due(self, now: float) -> list[SeriesEntry]:
        """Series whose count moved since the last write, at most once per ``refresh``."""
        return [
            entry
            for entry in self.entries.values()
            if entry.count > entry.written_count and now - entry.last_written >= self.refresh
        ]

    def expire(self, now: float) -> list[SeriesEntry]:
        """Drop series that ended (silent for ``window``); returns those that still had unwritten
        counts, so the caller can write them one last time."""
        finished = [entry for entry in self.entries.values() if now - entry.last_seen > self.window]
        for entry in finished:
            del self.entries[entry.key]
        for regarding in [r for r, b in self.buckets.items() if self._refilled(b, now) >= self.burst]:
            del self.buckets[regarding]  # a full bucket carries no information
        return [entry for entry in finished if entry.count > entry.written_count]

    def _refilled(self, bucket: _Bucket, now: float) -> float:
        return min(float(self.burst), bucket.tokens + (now - bucket.updated) * self.refill_per_second)

    def _take_token(self, regarding: str, now: float) -> bool:
        bucket = self.buckets.get(regarding)
        if bucket is None:
            bucket = self.buckets[regarding] = _Bucket(float(self.burst), now)
        bucket.tokens = self._refilled(bucket, now)
        bucket.updated = now
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True
