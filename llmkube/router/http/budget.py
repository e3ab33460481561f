"""A byte budget shared by every connection of a server: what request bodies in flight may hold
together, counted as they are read (and, by the handler, what parsing them costs), so that many
bodies at once cannot take more memory than one process has, however each is sized."""

from __future__ import annotations

__all__ = ["ByteBudget"]


class ByteBudget:
    """`take(n)` reserves `n` bytes if they fit (False: refuse the request), `give(n)` returns them.
    Plain counters on the event loop's thread: no lock."""

    __slots__ = ("held", "peak", "refused", "total")

    def __init__(self, total: int) -> None:
        self.total = total
        self.held = 0
        #: the most ever held at once, and the reservations refused (for the metrics)
        self.peak = 0
        self.refused = 0

    def take(self, size: int) -> bool:
        if size <= 0:
            return True
        if self.held + size > self.total:
            self.refused += 1
            return False
        self.held += size
        self.peak = max(self.peak, self.held)
        return True

    def give(self, size: int) -> None:
        if size > 0:
            self.held = max(0, self.held - size)

    @property
    def free(self) -> int:
        return max(0, self.total - self.held)
