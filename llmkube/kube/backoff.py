"""Retry delays for the reflector: client-go's ``wait.Backoff{800ms, factor 2, jitter 1.0, cap 30s}``
with ``DelayWithReset(2 min)`` (``tools/cache/reflector.go``).  Pure: time and randomness are
passed in, so tests pin every delay."""

from __future__ import annotations

import random

__all__ = ["Backoff"]


class Backoff:
    """Each ``next_delay`` returns the current step jittered into ``[step, step * (1 + jitter))`` and
    doubles the step up to ``cap``.  If the previous call was more than ``reset_after`` ago (the
    connection was healthy that long), the sequence starts again from ``initial``."""

    def __init__(
        self,
        initial: float = 0.8,
        cap: float = 30.0,
        factor: float = 2.0,
        jitter: float = 1.0,
        reset_after: float = 120.0,
        rng: random.Random | None = None,
    ) -> None:
        self.initial = initial
        self.cap = cap
        self.factor = factor
        self.jitter = jitter
        self.reset_after = reset_after
        self._rng = rng or random.Random()
        self._step = initial
        self._last_call: float | None = None

    def next_delay(self, now: float) -> float:
        if self._last_call is not None and now - self._last_call > self.reset_after:
            self._step = self.initial
        self._last_call = now
        step = self._step
        self._step = min(self.cap, self._step * self.factor)
        return step * (1.0 + self._rng.random() * self.jitter) if self.jitter > 0 else step

    def reset(self) -> None:
        self._step = self.initial
        self._last_call = None
