"""What a request body costs the router to admit and parse, for the shapes that amplify: for each,
a body at the limit (`--size`, default the default body limit, 16 MiB), in a fresh process each:

* `estimate/size`: parse_cost over the body's size (the bound the router admits by: 12 x, or 32 MiB);
* `peak/size`: the peak RSS parsing it took over its size (what the estimate must bound);
* `prescan ms`: counting its structural bytes (on the event loop, for every body);
* `parse ms`: orjson with the garbage collector held off, as the router parses;
* `admitted`: whether the router would parse it at all (else 413 unparsed);
* and, for the shapes refused at that size, the largest body of that shape the router would
  parse and how long that parse takes: the longest the loop is blocked by one admitted body.

    .venv/bin/python bench/bench_router_bodies.py [--size 16777216] [--shapes lists,dicts,...]

Prints one line per shape and the JSON of them all; asserts nothing."""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
UNITS = {
    "lists": b"[]",
    "dicts": b"{}",
    "members": b'{"a":[]}',
    "nesting": b"[[[]]]",
    "short strings": b'"a"',
    "strings": b'"abcdefgh"',
    "small numbers": b"1",
    "numbers": b"12345",
    "floats": b"1.5",
    "token ids": b"31337",
    "prose": b"",
}


def body(shape: str, size: int) -> bytes:
    head, tail = b'{"model":"m","messages":[{"role":"user","content":', b"}]}"
    if shape == "prose":
        text = b"The quick brown fox, as it happens, jumps over the lazy dog. " * (size // 62)
        return head + b'"' + text + b'"' + tail
    unit = UNITS[shape]
    count = max(1, (size - len(head) - len(tail)) // (len(unit) + 1))
    return head + b"[" + b",".join([unit] * count) + b"]" + tail


def _peak_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM"):
            return int(line.split()[1])
    return 0


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1])
    return 0


def measure_one(shape: str, size: int) -> dict[str, object]:
    """In this (fresh) process: the figures of one shape at one size."""
    import orjson

    from llmkube.plan.router.bodies import parse_allowance, parse_cost

    raw = body(shape, size)
    started = time.perf_counter()
    cost = parse_cost(raw)
    prescan = time.perf_counter() - started
    allowance = parse_allowance(len(raw))
    before = _rss_kib()
    Path("/proc/self/clear_refs").write_text("5")
    gc.disable()
    started = time.perf_counter()
    value = orjson.loads(raw)
    parse = time.perf_counter() - started
    gc.enable()
    peak = (_peak_kib() - before) * 1024
    del value
    return {
        "shape": shape,
        "bytes": len(raw),
        "estimate/size": round(cost / len(raw), 1),
        "peak/size": round(peak / len(raw), 1),
        "bounded": cost >= peak,
        "prescan_ms": round(prescan * 1000, 1),
        "parse_ms": round(parse * 1000, 1),
        "admitted": cost <= allowance,
    }


def largest_admitted(shape: str, size: int) -> int:
    from llmkube.plan.router.bodies import parse_allowance, parse_cost

    low, high = 1024, size
    while high - low > 4096:
        middle = (low + high) // 2
        raw = body(shape, middle)
        if parse_cost(raw) <= parse_allowance(len(raw)):
            low = middle
        else:
            high = middle
    return low


def run(shape: str, size: int) -> dict[str, object]:
    result = subprocess.run(
        [sys.executable, __file__, "--one", shape, "--size", str(size)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return dict(json.loads(result.stdout))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=int, default=16 << 20)
    parser.add_argument("--shapes", default=",".join(UNITS))
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure_one(args.one, args.size)))
        return
    rows = []
    for shape in args.shapes.split(","):
        row = run(shape, args.size)
        if not row["admitted"]:
            largest = largest_admitted(shape, args.size)
            at_limit = run(shape, largest)
            row["largest_admitted_bytes"] = at_limit["bytes"]
            row["largest_admitted_parse_ms"] = at_limit["parse_ms"]
            row["largest_admitted_peak/size"] = at_limit["peak/size"]
        rows.append(row)
        print(
            f"{shape:14s} {row['bytes'] / (1 << 20):5.1f} MiB  estimate {row['estimate/size']:5.1f}x  "
            f"peak {row['peak/size']:5.1f}x  prescan {row['prescan_ms']:6.1f} ms  "
            f"parse {row['parse_ms']:7.1f} ms  "
            + (
                "admitted"
                if row["admitted"]
                else f"413; largest admitted {row['largest_admitted_bytes'] / (1 << 20):.1f} MiB, "
                f"parsed in {row['largest_admitted_parse_ms']} ms (peak {row['largest_admitted_peak/size']}x)"
            ),
            flush=True,
        )
    print(json.dumps({"size": args.size, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
