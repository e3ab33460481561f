"""Clocks: the real one, and a fake one so queue, backoff and leader-election tests never sleep.

Everything in ``llmkube.kube`` that waits or measures time takes a :class:`Clock`.  Durations
come from ``monotonic()`` (never the wall clock: NTP steps must not expire a lease or a backoff);
``now()`` is only for timestamps written to the API (Lease renewTime, Event eventTime).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from typing import Protocol, TypeVar

__all__ = ["Clock", "FakeClock", "RealClock", "format_micro_time", "parse_time", "run_within"]

T = TypeVar("T")


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards (for durations and deadlines)."""
        ...

    def now(self) -> datetime:
        """Wall-clock time in UTC (only for timestamps sent to the API server)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Suspend the caller for ``seconds`` of this clock's time."""
        ...


class RealClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class FakeClock:
    """A manually advanced clock.

    ``sleep`` parks the caller until a test calls :meth:`advance` past its deadline.  ``advance``
    walks through the due deadlines in order and lets the event loop run after each one, so a task
    woken at t=1 that goes back to sleep until t=3 is woken again within ``advance(5)``.
    """

    def __init__(self, start: float = 1000.0, wall: datetime | None = None) -> None:
        self._now = start
        self._wall_at_start = wall or datetime(2030, 1, 1, tzinfo=UTC)
        self._start = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def monotonic(self) -> float:
        return self._now

    def now(self) -> datetime:
        return self._wall_at_start + timedelta(seconds=self._now - self._start)

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._seq), future))
        await future

    async def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, waking every sleeper whose deadline passes."""
        target = self._now + seconds
        await settle()
        while self._sleepers and self._sleepers[0][0] <= target:
            deadline, _, future = heapq.heappop(self._sleepers)
            if future.done():
                continue
            self._now = max(self._now, deadline)
            future.set_result(None)
            await settle()
        self._now = target
        await settle()


async def run_within(clock: Clock, seconds: float, work: Awaitable[T]) -> T:
    """Await ``work`` for at most ``seconds`` of ``clock``'s time (``asyncio.timeout`` only knows
    the loop's clock); past that it is cancelled and TimeoutError raised."""
    task = asyncio.ensure_future(work)
    timer = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    if task.cancelled():
        raise TimeoutError(f"not done within {seconds:.1f}s")
    return task.result()


async def settle(rounds: int = 20) -> None:
    """Let ready tasks run until they block again (a bounded number of loop iterations)."""
    for _ in range(rounds):
        await asyncio.sleep(0)


def format_micro_time(moment: datetime) -> str:
    """Kubernetes MicroTime: RFC 3339 with exactly six fractional digits, always UTC ('Z')."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime:
    """Parse a Kubernetes Time or MicroTime (RFC 3339, 'Z' or an offset, 0-9 fractional digits)."""
    cleaned = text.strip().replace("Z", "+00:00")
    if "." in cleaned:
        head, _, rest = cleaned.partition(".")
        digits = "".join(itertools.takewhile(str.isdigit, rest))
        cleaned = f"{head}.{digits[:6].ljust(6, '0')}{rest[len(digits) :]}"
    parsed = datetime.fromisoformat(cleaned)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
