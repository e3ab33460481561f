"""Returning the C heap's free memory: when to trim (a table), and that a trim really lowers the
process's resident memory on this machine's glibc."""

import os
import sys

import pytest

from llmkube.manager.heap import TRIM_AT_FREE, GlibcHeap, HeapUsage, should_trim

MIB = 2**20


@pytest.mark.parametrize(
    ("heap", "free", "released", "trim"),
    [
        (200 * MIB, 150 * MIB, 0, True),  # much freed, most of the heap: trim
        (200 * MIB, 150 * MIB, 140 * MIB, False),  # trimmed before, little freed since
        (200 * MIB, 150 * MIB, 150 * MIB - TRIM_AT_FREE, True),  # freed enough since
        (800 * MIB, 100 * MIB, 0, False),  # a small share of a busy heap: not worth a walk
        (20 * MIB, 10 * MIB, 0, False),  # little to gain
    ],
)
def test_when_to_trim(heap: int, free: int, released: int, trim: bool) -> None:
    assert should_trim(HeapUsage(heap=heap, free=free), released) is trim


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_a_trim_gives_freed_memory_pinned_by_survivors_back() -> None:
    heap = GlibcHeap.load()
    assert heap is not None, "this Linux has glibc 2.33+: mallinfo2 and malloc_trim"
    # 48 MiB of 1 KB blocks (malloc's, not Python's small-object allocator), one in 32 kept: the
    # survivors pin the heap, so freeing the rest leaves it free but resident.
    blocks = [bytes(1024) for _ in range(48 * 1024)]
    survivors = blocks[::32]
    del blocks
    usage = heap.usage()
    assert usage.free >= 40 * MIB, usage
    before = resident_bytes()
    assert heap.trim()
    after = resident_bytes()
    assert before - after >= 32 * MIB, (before // MIB, after // MIB)
    assert len(survivors) == 1536
