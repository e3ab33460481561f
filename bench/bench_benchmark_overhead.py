"""What `llmkube benchmark` itself costs: is it ever the bottleneck?

The OpenAI stand-in (llmkube_testing.openai_standin) answers at once, with no delay at all, in a
process of its own pinned to one core; `llmkube benchmark --url` runs pinned to the other one, at
each concurrency level, streaming. What it reaches against a server that costs nothing is the most
it can measure: its output tokens/s and requests/s, and the CPU time it spends per token and per
request (its own `client_cpu_seconds` over what it counted). The anchor, in the same run and on the
same cores: a bare aiohttp client that sends the same requests and reads each answer's bytes
without looking at them (no SSE parsing, no timing, no statistics). The ratio benchmark/anchor says
what the measuring adds on top of HTTP itself.

Usage: .venv/bin/python bench/bench_benchmark_overhead.py [--levels 1,4,16,64] [--requests 400]
    [--max-tokens 64]
Prints one JSON object and saves it to bench/results/benchmark-overhead-<time>.json.
"""

import argparse
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from scale_support import machine_info, save_result

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from llmkube_testing.openai_standin import standin_process  # noqa: E402

SERVER_CPU, CLIENT_CPU = 1, 0

# The anchor: the same requests, the answers read and thrown away.
BARE = textwrap.dedent(
    """
    import asyncio, json, sys, time
    import aiohttp
    url, concurrency, total, max_tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    body = json.dumps({"messages": [{"role": "user", "content": "hello " * 128}], "max_tokens": max_tokens,
                       "stream": True, "stream_options": {"include_usage": True}}).encode()
    async def main():
        sent = 0
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
            async def worker():
                nonlocal sent
                while sent < total:
                    sent += 1
                    async with http.post(url, data=body, headers={"Content-Type": "application/json"}) as r:
                        async for _ in r.content:
                            pass
            started, cpu = time.perf_counter(), time.process_time()
            await asyncio.gather(*(worker() for _ in range(concurrency)))
            seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "requests": total}))
    asyncio.run(main())
    """
)


def pinned(cpu: int, *command: str) -> list[str]:
    return ["taskset", "--cpu-list", str(cpu), *command]


def llmkube_level(url: str, concurrency: int, requests: int, max_tokens: int) -> dict[str, Any]:
    command = pinned(
        CLIENT_CPU,
        str(Path(sys.executable).parent / "llmkube"),
        *("benchmark", "--url", url, "-c", str(concurrency), "--requests", str(requests)),
        *("--max-tokens", str(max_tokens), "--warmup", "1", "-o", "json"),
    )
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    (level,) = json.loads(done.stdout)["levels"]
    tokens = level["output_tokens_mean"] * level["requests"]
    assert not level["errors"], level["errors"]
    return {
        "requests_per_second": round(level["requests_per_second"], 1),
        "output_tokens_per_second": round(level["output_tokens_per_second"], 1),
        "client_cpu_share": round(level["client_cpu_seconds"] / level["seconds"], 2),
        "client_cpu_us_per_token": round(level["client_cpu_seconds"] / tokens * 1e6, 2),
        "client_cpu_us_per_request": round(level["client_cpu_seconds"] / level["requests"] * 1e6, 1),
        "ttft_p50_ms": round(level["ttft"]["p50"] * 1000, 2),
    }


def bare_level(url: str, concurrency: int, requests: int, max_tokens: int) -> dict[str, Any]:
    command = pinned(
        CLIENT_CPU, sys.executable, "-c", BARE, url, str(concurrency), str(requests), str(max_tokens)
    )
    done = json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
    return {
        "requests_per_second": round(done["requests"] / done["seconds"], 1),
        "output_tokens_per_second": round(done["requests"] * max_tokens / done["seconds"], 1),
        "client_cpu_us_per_request": round(done["cpu_seconds"] / done["requests"] * 1e6, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--levels", default="1,4,16,64")
    parser.add_argument("--requests", type=int, default=400, help="requests per level")
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()
    levels = [int(level) for level in args.levels.split(",")]
    if len(os.sched_getaffinity(0)) < 2:
        sys.exit("needs 2 cores: the stand-in and the client each get one")
    results: dict[str, Any] = {}
    with standin_process(slots=max(levels), cpu=SERVER_CPU) as server:
        url = f"{server.url}/v1/chat/completions"
        for concurrency in levels:
            print(f"concurrency {concurrency} ...", file=sys.stderr, flush=True)
            ours = llmkube_level(url, concurrency, args.requests, args.max_tokens)
            bare = bare_level(url, concurrency, args.requests, args.max_tokens)
            results[str(concurrency)] = {
                "llmkube_benchmark": ours,
                "bare_aiohttp_reader": bare,
                "ratio_requests_per_second": round(
                    ours["requests_per_second"] / bare["requests_per_second"], 2
                ),
            }
    record = {
        "benchmark": "benchmark_overhead",
        "requests_per_level": args.requests,
        "max_tokens": args.max_tokens,
        "levels": results,
        "machine": machine_info(),
    }
    save_result("benchmark-overhead", record)
    print(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
