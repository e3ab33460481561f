"""The router's overhead: added latency over going direct, requests/s, and memory per open stream.

Three processes: an OpenAI-compatible stand-in (llmkube.testing.openai_upstream), the router's
proxy on one core (the real `llmkube.router.proxy.Proxy` with a static spec: one InferenceService
backend whose endpoint is the stand-in; the API server plays no part in a request), and this
process as the client (aiohttp). The same workload goes direct to the stand-in and through the
router in the same run:

* non-streaming answers from an instant stand-in at 1, 64 and 512 concurrent requests: latency
  p50/p99 direct and routed (added = routed - direct), and requests/s;
* streams of 200 tokens at a fixed rate: time to first byte direct and routed, at 1, 64 and 512
  concurrent streams;
* the router's RSS with 1,000 streams open (a slow stand-in), minus its RSS idle.

The anchor the issue names (LiteLLM's proxy in the benchmark's own environment) is not run here
yet: the figures below are the router against going direct.

Usage: .venv/bin/python bench/bench_router.py [--requests 2000] [--router-core 1]
Prints one JSON object; stores it in bench/results/router-<time>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from scale_support import machine_info, progress, save_result  # noqa: E402

PYTHON = sys.executable
BODY = {"model": "m", "messages": [{"role": "user", "content": "hello there"}]}

# The router process: the proxy with a static spec, on the given port (no API server involved).
ROUTER = r"""
import asyncio, os, sys
from pathlib import Path
from aiohttp import web
from llmkube.router.audit import AuditSink
from llmkube.router.metrics import RouterMetrics
from llmkube.router.process import _metrics_page
from llmkube.router.proxy import Proxy
from llmkube.router.secrets import SecretFiles
from llmkube.router.state import RouterState
from llmkube.router.upstream import Upstreams

class Quiet(AuditSink):
    def write(self, line): pass

async def main(port, upstream):
    state = RouterState("bench", "ns")
    state.load({"metadata": {"generation": 1}, "spec": {
        "backends": [{"name": "m", "inferenceServiceRef": {"name": "m"}}], "defaultRoute": "m"}})
    state.set_endpoints("m", (upstream,))
    upstreams = Upstreams(stream_idle_timeout=600.0, api_servers=())
    secrets = Path(sys.argv[3])
    proxy = Proxy(state, upstreams, RouterMetrics("bench"), Quiet(), credentials=SecretFiles(secrets),
                  api_keys_root=secrets, ready=list, metrics_page=_metrics_page)
    runner = web.ServerRunner(web.Server(proxy.handle, handler_cancellation=True, access_log=None))
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, backlog=4096).start()
    print("ready", flush=True)
    await asyncio.Event().wait()

asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
"""


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(args: list[str], core: int | None) -> subprocess.Popen[str]:
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, cwd=REPO)
    if core is not None:
        os.sched_setaffinity(proc.pid, {core})
    assert proc.stdout is not None
    proc.stdout.readline()  # "listening ..." or "ready"
    return proc


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _requests(url: str, total: int, concurrency: int, stream: bool) -> dict[str, float]:
    """Latency (non-streaming) or time to first byte (streams) in ms, and requests/s."""
    timings: list[float] = []
    connector = aiohttp.TCPConnector(limit=0)
    body = {**BODY, "stream": True} if stream else BODY
    async with aiohttp.ClientSession(connector=connector) as session:
        gate = asyncio.Semaphore(concurrency)

        async def one() -> None:
            async with gate:
                started = time.perf_counter()
                async with session.post(url + "/v1/chat/completions", json=body) as answer:
                    if stream:
                        await answer.content.readany()
                        timings.append((time.perf_counter() - started) * 1000)
                        async for _ in answer.content.iter_any():
                            pass
                    else:
                        await answer.read()
                        timings.append((time.perf_counter() - started) * 1000)
                    assert answer.status == 200, answer.status

        begun = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(total)))
        elapsed = time.perf_counter() - begun
    return {
        "p50_ms": round(statistics.median(timings), 3),
        "p99_ms": round(_pct(timings, 0.99), 3),
        "requests_per_second": round(total / elapsed, 1),
    }


async def _open_streams(url: str, count: int) -> tuple[aiohttp.ClientSession, list[Any]]:
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    answers = []
    for _ in range(count):
        answer = await session.post(url + "/v1/chat/completions", json={**BODY, "stream": True})
        await answer.content.readany()
        answers.append(answer)
    return session, answers


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {
        "benchmark": "router",
        "machine": machine_info(),
        "router_core": args.router_core,
    }
    procs: list[subprocess.Popen[str]] = []
    secrets = tempfile.mkdtemp()
    try:
        for label, tokens, interval in (("instant", 8, 0.0), ("streaming", 200, 0.005), ("slow", 200, 0.1)):
            progress(f"workload {label}")
            up_port, router_port = _free_port(), _free_port()
            upstream = _start(
                [PYTHON, "-m", "llmkube.testing.openai_upstream", "--port", str(up_port),
                 "--tokens", str(tokens), "--interval", str(interval)],
                args.upstream_core,
            )  # fmt: skip
            router = _start(
                [PYTHON, "-c", ROUTER, str(router_port), f"127.0.0.1:{up_port}", secrets], args.router_core
            )
            procs += [upstream, router]
            direct, routed = f"http://127.0.0.1:{up_port}", f"http://127.0.0.1:{router_port}"
            if label == "slow":
                idle = _rss_kib(router.pid)
                session, answers = await _open_streams(routed, args.open_streams)
                held = _rss_kib(router.pid)
                for answer in answers:
                    answer.close()
                await session.close()
                result["rss"] = {
                    "open_streams": args.open_streams,
                    "idle_mib": round(idle / 1024, 1),
                    "with_streams_mib": round(held / 1024, 1),
                    "per_1000_streams_mib": round((held - idle) / 1024 * 1000 / args.open_streams, 1),
                }
            else:
                stream = label == "streaming"
                rows = {}
                for concurrency in (1, 64, 512):
                    total = args.requests if not stream else min(args.requests, max(64, concurrency * 2))
                    if concurrency == 1:
                        total = min(total, 300)
                    await _requests(routed, min(total, 100), concurrency, stream)  # warm up
                    d = await _requests(direct, total, concurrency, stream)
                    r = await _requests(routed, total, concurrency, stream)
                    rows[str(concurrency)] = {
                        "requests": total,
                        "direct": d,
                        "routed": r,
                        "added_p50_ms": round(r["p50_ms"] - d["p50_ms"], 3),
                        "added_p99_ms": round(r["p99_ms"] - d["p99_ms"], 3),
                    }
                    progress(f"  {label} c={concurrency}: {rows[str(concurrency)]}")
                result[label] = rows
            for proc in (upstream, router):
                proc.terminate()
                proc.wait(10)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--open-streams", type=int, default=1000)
    parser.add_argument("--router-core", type=int, default=min(1, (os.cpu_count() or 1) - 1))
    parser.add_argument("--upstream-core", type=int, default=0)
    args = parser.parse_args()
    result = asyncio.run(measure(args))
    print(json.dumps(result, indent=2))
    progress(f"saved {save_result('router', result)}")


if __name__ == "__main__":
    main()
