"""Giving freed heap back (llmkube/manager/heap.py): the decision as a table, the loop on a scripted
heap, and glibc's own malloc_trim on this process."""

import asyncio
import os
import sys

import pytest

from llmkube.manager.heap import GlibcHeap, HeapInfo, next_baseline, trim_due, trim_periodically

MIB = 1 << 20


@pytest.mark.parametrize(
    ("free", "baseline", "threshold", "due"),
    [
        (0, 0, 8 * MIB, False),
        (8 * MIB, 0, 8 * MIB, True),  # the first look after start-up
        (20 * MIB, 15 * MIB, 8 * MIB, False),  # grew by 5 MiB since the last trim
        (23 * MIB, 15 * MIB, 8 * MIB, True),
        (40 * MIB, 40 * MIB, 8 * MIB, False),  # trimmed pages stay counted as free
        (100 * MIB, 0, 0, False),  # threshold 0: never
    ],
)
def test_trim_due(free: int, baseline: int, threshold: int, due: bool) -> None:
    assert trim_due(HeapInfo(arena=free + MIB, in_use=MIB, free=free), baseline, threshold) is due


@pytest.mark.parametrize(
    ("free", "baseline", "trimmed", "expected"),
    [
        (30 * MIB, 10 * MIB, True, 30 * MIB),  # after a trim: what is free now
        (5 * MIB, 10 * MIB, False, 5 * MIB),  # work reused free memory: growth counts from here
        (12 * MIB, 10 * MIB, False, 10 * MIB),  # not yet worth it: keep counting from the trim
    ],
)
def test_next_baseline(free: int, baseline: int, trimmed: bool, expected: int) -> None:
    assert next_baseline(HeapInfo(arena=free, in_use=0, free=free), baseline, trimmed) == expected


class ScriptedHeap:
    """Free bytes as a script, one value per look; counts the trims."""

    def __init__(self, frees: list[int]) -> None:
        self.frees, self.looks, self.trims = frees, 0, 0
        self.done = asyncio.Event()

    def info(self) -> HeapInfo:
        free = self.frees[min(self.looks, len(self.frees) - 1)]
        self.looks += 1
        if self.looks >= len(self.frees):
            self.done.set()
        return HeapInfo(arena=free + MIB, in_use=MIB, free=free)

    def trim(self) -> bool:
        self.trims += 1
        return True


async def test_the_loop_trims_once_per_burst() -> None:
    # looks: 10 MiB free (trim, then 10 after it), 12 (no), 30 (trim, 30 after), 31 (no), 31 (no)
    heap = ScriptedHeap([10 * MIB, 10 * MIB, 12 * MIB, 30 * MIB, 30 * MIB, 31 * MIB, 31 * MIB])
    task = asyncio.create_task(trim_periodically(heap, interval=0.001, threshold=8 * MIB))
    await asyncio.wait_for(heap.done.wait(), timeout=10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert heap.trims == 2


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc is Linux's")
def test_glibc_gives_holes_back() -> None:
    heap = GlibcHeap.load()
    assert heap is not None, "this Linux has glibc >= 2.33 (mallinfo2)"
    # 1 KiB strings come from malloc (pymalloc serves only <= 512 bytes). Keep every fiftieth: the
    # holes between them cannot be returned from the top of the heap, only by a trim.
    blocks = [bytearray(1024) for _ in range(60_000)]
    kept = blocks[::50]
    del blocks
    freed = heap.info()
    assert freed.free >= 40 * MIB, freed
    before = _rss()
    assert heap.trim() is True
    after = _rss()
    assert before - after >= 30 * MIB, (before / MIB, after / MIB)
    assert len(kept) == 1_200
