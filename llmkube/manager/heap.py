"""Give the heap that bursts of work freed back to the system (glibc's malloc only).

Python hands what it frees to glibc's malloc, which keeps freed chunks in its arenas for reuse and
returns pages to the kernel only from the top of a heap. After a storm of spec changes the
controller's live objects were back where they had been (tracemalloc after storms 2, 3 and 4: 64.3,
64.1, 63.9 MiB), but glibc's free bytes grew (26.2, 37.1, 41.7 MiB in the arenas' holes) and RSS
with them (bench/bench_write_storms.py). ``malloc_trim(0)`` gives every arena's free pages back.

The decision is pure (`trim_due`); the process reads ``mallinfo2()`` every interval and trims when
the free bytes grew by at least the threshold since the last trim. (Trimmed pages stay on glibc's
free lists, counted as free, only without memory behind them: "free" does not fall after a trim,
so the growth since the last one, not the amount, says whether there is anything new to give
back.) Elsewhere (musl, macOS) the functions do not exist and nothing runs.
"""

from __future__ import annotations

import asyncio
import ctypes
from dataclasses import dataclass
from typing import Protocol

import structlog

log = structlog.get_logger("llmkube.manager.heap")

#: How often the free heap is looked at (0 turns trimming off).
DEFAULT_INTERVAL_SECONDS = 30.0
#: Free bytes worth a trim: less is churn the next burst reuses anyway.
DEFAULT_THRESHOLD_BYTES = 8 << 20


@dataclass(frozen=True)
class HeapInfo:
    """glibc's `struct mallinfo2`, the fields we use (bytes, every arena)."""

    arena: int  # obtained from the system by sbrk/mmap for the arenas
    in_use: int  # uordblks
    free: int  # fordblks: freed and kept


def trim_due(heap: HeapInfo, baseline: int, threshold: int) -> bool:
    """Whether enough was freed since the last trim (`baseline`: the free bytes then) to be worth
    giving back."""
    return threshold > 0 and heap.free - baseline >= threshold


def next_baseline(heap: HeapInfo, baseline: int, trimmed: bool) -> int:
    """The free bytes the next growth is measured from: what is free now after a trim, else the
    lowest seen (free memory that work reused and freed again is new to give back)."""
    return heap.free if trimmed else min(baseline, heap.free)


class Heap(Protocol):
    def info(self) -> HeapInfo: ...

    def trim(self) -> bool: ...


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


class GlibcHeap:
    """`mallinfo2` and `malloc_trim` of the C library this process runs on."""

    def __init__(self, libc: ctypes.CDLL) -> None:
        self._mallinfo2 = libc.mallinfo2
        self._mallinfo2.restype = _MallInfo2
        self._mallinfo2.argtypes = []
        self._malloc_trim = libc.malloc_trim
        self._malloc_trim.restype = ctypes.c_int
        self._malloc_trim.argtypes = [ctypes.c_size_t]

    @classmethod
    def load(cls) -> GlibcHeap | None:
        """The process's glibc, or None where there is none (or it is older than 2.33)."""
        try:
            return cls(ctypes.CDLL(None))
        except (OSError, AttributeError):
            return None

    def info(self) -> HeapInfo:
        raw = self._mallinfo2()
        return HeapInfo(arena=int(raw.arena), in_use=int(raw.uordblks), free=int(raw.fordblks))

    def trim(self) -> bool:
        """True when memory was given back."""
        return bool(self._malloc_trim(0))


async def trim_periodically(
    heap: Heap, *, interval: float = DEFAULT_INTERVAL_SECONDS, threshold: int = DEFAULT_THRESHOLD_BYTES
) -> None:
    """Every `interval` seconds, trim when `trim_due`. Runs until cancelled."""
    baseline = 0
    while True:
        await asyncio.sleep(interval)
        now = heap.info()
        due = trim_due(now, baseline, threshold)
        if due:
            heap.trim()
            now = heap.info()
            log.debug("heap trimmed", free_bytes=now.free, heap_bytes=now.arena, in_use_bytes=now.in_use)
        baseline = next_baseline(now, baseline, due)
