"""Rolling p95 of time to first byte per backend, for `latencySLOMs`: the last samples within a
window, so one slow minute an hour ago does not keep a backend demoted."""

import math
from collections import deque


class RollingP95:
    def __init__(self, *, samples: int = 128, window: float = 300.0) -> None:
        self.window = window
        self._samples: deque[tuple[float, float]] = deque(maxlen=samples)

    def add(self, seconds: float, now: float) -> None:
        self._samples.append((now, seconds))

    def value(self, now: float) -> float | None:
        """The p95 of the samples within the window (nearest rank), or None with fewer than 5."""
        recent = sorted(v for t, v in self._samples if now - t <= self.window)
        if len(recent) < 5:
            return None
        return recent[min(len(recent) - 1, math.ceil(0.95 * len(recent)) - 1)]
