"""Run a Python program under tracemalloc and write where its memory is at each new high.

A prefix for `bench_scale.py --llmkube-prefix` (the controller's own process is traced), or for
`bench_write_storms.py --memtrace` (with `--diff-on`: what grew from one storm to the next):

    .venv/bin/python bench/bench_scale.py --services 5000 --no-floor --changes 0 \
        --llmkube-prefix '.venv/bin/python bench/memtrace.py --out /tmp/memtrace/{start} --'

Every `--interval` seconds a thread reads the traced total; whenever it is `--step` above the last
report (and when the program ends), it writes `<out>/<n>-<MiB>.txt`: the top allocation sites by
line, with the traced total and the process's RSS at that moment. tracemalloc slows the program
(about 2x) and counts Python allocations only: compare its totals with RSS to see fragmentation.
"""

import argparse
import ctypes
import os
import runpy
import sys
import threading
import time
import tracemalloc
from pathlib import Path


def rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


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


def malloc_summary() -> str:
    """glibc's view: heap bytes (all arenas), of which in use and free; mmapped blocks."""
    try:
        mallinfo2 = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return "malloc: unknown"
    mallinfo2.restype = _MallInfo2
    info = mallinfo2()
    return (
        f"malloc heap {info.arena / 2**20:.1f} MiB (in use {info.uordblks / 2**20:.1f}, "
        f"free {info.fordblks / 2**20:.1f}), mmapped {info.hblkhd / 2**20:.1f} MiB"
    )


def report(out: Path, number: int, top: int, frames: int) -> None:
    snapshot = _snapshot()
    current, peak = tracemalloc.get_traced_memory()
    lines = [
        f"traced {current / 2**20:.1f} MiB (peak {peak / 2**20:.1f}), RSS {rss_mib():.1f} MiB, "
        f"tracemalloc's own {tracemalloc.get_tracemalloc_memory() / 2**20:.1f} MiB; {malloc_summary()}"
    ]
    group = "traceback" if frames > 1 else "lineno"
    for stat in snapshot.statistics(group)[:top]:
        lines.append(f"{stat.size / 2**20:8.2f} MiB {stat.count:9d} blocks")
        lines += [f"      {line}" for line in stat.traceback.format()[-2 * frames :: 2]]
    (out / f"{number:03d}-{current / 2**20:.0f}MiB.txt").write_text("\n".join(lines) + "\n")


def _snapshot() -> tracemalloc.Snapshot:
    return tracemalloc.take_snapshot().filter_traces(
        [
            tracemalloc.Filter(False, tracemalloc.__file__),
            tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
        ]
    )


class Differ:
    """What was allocated and not freed since the previous diff, by allocation site: written to
    `<out>/diff-<n>.txt` each time the file `trigger` appears (the caller creates it, e.g. after
    each write storm; it is removed once the diff is written)."""

    def __init__(self, out: Path, trigger: Path, top: int, frames: int) -> None:
        self.out, self.trigger, self.top, self.frames = out, trigger, top, frames
        self.previous: tracemalloc.Snapshot | None = None
        self.number = 0

    def poll(self) -> None:
        if not self.trigger.exists():
            return
        snapshot = _snapshot()
        group = "traceback" if self.frames > 1 else "lineno"
        current = tracemalloc.get_traced_memory()[0]
        lines = [f"traced {current / 2**20:.1f} MiB, RSS {rss_mib():.1f} MiB; {malloc_summary()}"]
        if self.previous is not None:
            stats = snapshot.compare_to(self.previous, group)
            grown = sum(stat.size_diff for stat in stats)
            lines.append(f"since the previous diff: {grown / 2**20:+.2f} MiB traced")
            for stat in stats[: self.top]:
                lines.append(f"{stat.size_diff / 2**10:+10.1f} KiB {stat.count_diff:+8d} blocks")
                # Sites only: formatting with source lines would fill linecache, growing what it measures.
                lines += [f"      {frame.filename}:{frame.lineno}" for frame in stat.traceback]
        self.number += 1
        (self.out / f"diff-{self.number:03d}.txt").write_text("\n".join(lines) + "\n")
        self.previous = snapshot
        self.trigger.unlink(missing_ok=True)


def watch(out: Path, interval: float, step: float, top: int, frames: int, differ: Differ | None) -> None:
    reported = 0.0
    number = 0
    while True:
        time.sleep(interval)
        if differ is not None:
            differ.poll()
        current = tracemalloc.get_traced_memory()[0] / 2**20
        if current > reported + step:
            number += 1
            report(out, number, top, frames)
            reported = current


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between reads of the total")
    parser.add_argument("--step", type=float, default=16.0, help="MiB above the last report to report again")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--frames", type=int, default=1, help="stack frames per allocation site")
    parser.add_argument(
        "--diff-on", type=Path, help="write what grew since the last diff whenever this file appears"
    )
    parser.add_argument("program", nargs=argparse.REMAINDER, help="-- script [arguments]")
    args = parser.parse_args()
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    args.out.mkdir(parents=True, exist_ok=True)
    tracemalloc.start(args.frames)
    differ = Differ(args.out, args.diff_on, args.top, args.frames) if args.diff_on else None
    threading.Thread(
        target=watch, args=(args.out, args.interval, args.step, args.top, args.frames, differ), daemon=True
    ).start()
    sys.argv = program
    try:
        runpy.run_path(program[0], run_name="__main__")
    finally:
        report(args.out, 999, args.top, args.frames)


if __name__ == "__main__":
    main()
