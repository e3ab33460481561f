"""Give the C heap's free memory back to the system (glibc only; elsewhere nothing happens).

CPython hands every allocation above 512 bytes to malloc: the caches' compact objects (a few KB
each), the API's answers (a LIST page is megabytes), their decoded strings. glibc keeps what is
freed for reuse and returns only the top of the heap, and only past a threshold that grows with
every large block freed (the dynamic mmap threshold: after a 4 MB page is freed, blocks up to 4 MB
are carved from the heap too). Long-lived objects allocated between short-lived pages pin the
heap's high water: at 5,000 services, 183 MiB of a 259 MiB heap were free yet resident
(`bench/memtrace.py`, mallinfo2). Two remedies, both standard glibc interfaces:

- a fixed mmap threshold (`mallopt(M_MMAP_THRESHOLD)`, as `MALLOC_MMAP_THRESHOLD_` would set): a
  block of 128 KiB or more is its own mapping, unmapped when freed, so answers and pages never
  land in the heap;
- `malloc_trim(0)` when a periodic look (`mallinfo2`) finds much of the heap free: it releases
  free pages anywhere in the heap, not only at its top.
"""

from __future__ import annotations

import asyncio
import ctypes
import sys
from dataclasses import dataclass
from typing import Final

import structlog

__all__ = ["GlibcHeap", "HeapUsage", "should_trim"]

log = structlog.get_logger("llmkube.manager.heap")

_M_MMAP_THRESHOLD: Final = -3
MMAP_THRESHOLD: Final = 128 * 1024  # glibc's initial value, kept from growing
TRIM_AT_FREE: Final = 16 * 2**20
TRIM_AT_FREE_SHARE: Final = 0.25
TRIM_CHECK_SECONDS: Final = 10.0


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


@dataclass(frozen=True)
class HeapUsage:
    #: bytes the heap holds from the system (all arenas, mappings of large blocks excluded)
    heap: int
    #: of which free (reusable by malloc, resident until trimmed)
    free: int


def should_trim(usage: HeapUsage, released: int) -> bool:
    """Trim when much has been freed since the last trim, and the free part is a large share of
    the heap (trimming a heap that is mostly in use gains little and costs a walk of it).

    ``released`` is what is known to be back with the system: the free bytes right after the last
    trim, lowered whenever the free bytes were seen lower (malloc reused, and so touched, some of
    it). mallinfo2 still counts trimmed pages as free, so without it every look would trim again."""
    return usage.free - released >= TRIM_AT_FREE and usage.free >= TRIM_AT_FREE_SHARE * usage.heap


class GlibcHeap:
    def __init__(self, libc: ctypes.CDLL) -> None:
        self._mallopt = libc.mallopt
        self._mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        self._mallopt.restype = ctypes.c_int
        self._mallinfo2 = libc.mallinfo2
        self._mallinfo2.restype = _MallInfo2
        self._malloc_trim = libc.malloc_trim
        self._malloc_trim.argtypes = [ctypes.c_size_t]
        self._malloc_trim.restype = ctypes.c_int

    @classmethod
    def load(cls) -> GlibcHeap | None:
        """The process's glibc malloc; None elsewhere (musl, macOS, a glibc older than 2.33)."""
        if not sys.platform.startswith("linux"):
            return None
        try:
            return cls(ctypes.CDLL(None))
        except (OSError, AttributeError):  # no mallinfo2 / malloc_trim in this C library
            return None

    def fix_mmap_threshold(self, threshold: int = MMAP_THRESHOLD) -> bool:
        return bool(self._mallopt(_M_MMAP_THRESHOLD, threshold))

    def usage(self) -> HeapUsage:
        info = self._mallinfo2()
        return HeapUsage(heap=int(info.arena), free=int(info.fordblks))

    def trim(self) -> bool:
        """Release free heap pages; True when memory went back to the system."""
        return bool(self._malloc_trim(0))

    async def trim_when_worth_it(self, interval: float = TRIM_CHECK_SECONDS) -> None:
        """Look every ``interval`` seconds and trim when `should_trim` says so (in a thread: the
        trim walks the heap without the GIL)."""
        released = 0
        while True:
            await asyncio.sleep(interval)
            usage = self.usage()
            released = min(released, usage.free)
            if not should_trim(usage, released):
                continue
            await asyncio.to_thread(self.trim)
            released = self.usage().free
            log.debug("heap trimmed", heap=usage.heap, free=usage.free)
