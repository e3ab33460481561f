"""The router's front door, before and after: a hostile head, an amplifying body, budgets left
by clients that hang up, a client that never reads, against a router in its own process (the
proxy behind its HTTP server, as `llmkube router` wires them, on uvloop; a static spec, the OpenAI
stand-in behind it), for this checkout and, with `--baseline DIR`, another
copy of the package (`git archive main llmkube | tar -x -C DIR`):

* 5: a 16 MiB header value: what the router answered, the bytes it read (/proc's rchar), its peak RSS
  growth;
* 6: an 8 MiB body of `[[],[],...]`: the status, the time, the peak RSS growth, the worst latency of
  /healthz on another connection meanwhile;
* 7: ten streams the client leaves after five reads against a 30-token budget (how many served);
  ten concurrent requests (max_tokens 40, 18 tokens used each) against a 100-token budget;
* 8: a client that asks for a long stream and reads nothing (a 1 s write timeout where the copy has
  one): when the backend's request was cancelled; what a 502 and /metrics say of a pod's address.

    .venv/bin/python bench/bench_router_front_door.py [--baseline DIR]

Prints JSON; asserts nothing (tests/unit/router/test_router_front_door.py holds the numbers)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from llmkube_testing.openai_upstream import Upstream  # noqa: E402

from tests.unit.router.front_door_support import (  # noqa: E402
    LoopProbe,
    MiB,
    bytes_read,
    nested_lists,
    peak_rss,
    reset_peak,
    rss,
    send_until_answered,
)

#: the router process, for any copy of the package (limits only where the copy has them)
HARNESS = r"""
# A router (the given package's Proxy behind its HttpServer) in this process; prints its port.
import asyncio, sys, os, tempfile, json
from pathlib import Path
import orjson
from llmkube.router.audit import AuditSink
from llmkube.router.metrics import RouterMetrics
from llmkube.router.process import http_server, metrics_page
from llmkube.router.proxy import Proxy
from llmkube.router.secrets import SecretFiles
from llmkube.router.state import RouterState
from llmkube.router.upstream import Upstreams
import inspect
class Quiet(AuditSink):
    def write(self, line): pass
async def main():
    opts = json.loads(sys.argv[1])
    d = tempfile.mkdtemp()
    state = RouterState("m", "ns"); metrics = RouterMetrics("m"); metrics.register_state(state)
    proxy = Proxy(state, Upstreams(stream_idle_timeout=30.0), metrics, Quiet(),
        credentials=SecretFiles(Path(d)/"c"), api_keys_root=Path(d)/"k", ready=list,
        metrics_page=metrics_page)
    kwargs = {}
    if "limits" in inspect.signature(http_server).parameters and opts.get("limits"):
        from llmkube.router.http.limits import Limits
        kwargs["limits"] = Limits(**opts["limits"])
    server = http_server(proxy, **kwargs)
    _, port = await server.start("127.0.0.1", 0)
    state.load({"metadata": {"name": "m", "generation": 1}, "spec": opts["spec"]})
    for s, a in opts.get("endpoints", {}).items(): state.set_endpoints(s, tuple(a))
    print(json.dumps({"port": port, "pid": os.getpid()}), flush=True)
    loop = asyncio.get_running_loop(); f = loop.create_future()
    loop.add_reader(0, lambda: f.done() or f.set_result(None)); await f
import uvloop
uvloop.run(main())
"""


async def start_router(
    package: str, spec: dict[str, Any], endpoints: dict[str, list[str]], limits: dict[str, Any] | None = None
) -> tuple[Any, int, int]:
    p = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        HARNESS,
        json.dumps({"spec": spec, "endpoints": endpoints, "limits": limits or {}}),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": package},
        cwd=package,  # `-c` puts the working directory first on the path: the copy's
    )
    assert p.stdout is not None
    info = json.loads(await p.stdout.readline())
    return p, info["port"], info["pid"]


def spec(**extra: Any) -> dict[str, Any]:
    return {
        "backends": [{"name": "alpha", "inferenceServiceRef": {"name": "alpha"}}],
        "defaultRoute": "alpha",
        **extra,
    }


async def measure(PKG: str) -> dict[str, Any]:
    async def router(
        spec: dict[str, Any], endpoints: dict[str, list[str]], limits: dict[str, Any] | None = None
    ) -> tuple[Any, int, int]:
        return await start_router(PKG, spec, endpoints, limits)

    out: dict[str, Any] = {}
    up = await Upstream(name="alpha").start()
    # 5
    p, port, pid = await router(spec(), {"alpha": [f"127.0.0.1:{up.port}"]})
    await asyncio.sleep(0.5)
    reset_peak(pid)
    r0, b0 = rss(pid), bytes_read(pid)
    ans, sent = await asyncio.to_thread(
        send_until_answered,
        port,
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nX-Long: ",
        b"v" * 65536,
        16 * MiB,
    )
    out["5 header 16MiB"] = {
        "answer": ans[:12].decode(errors="replace") or None,
        "router_read_bytes": bytes_read(pid) - b0,
        "client_sent": sent,
        "peak_rss_growth_MiB": round((peak_rss(pid) - r0) / MiB, 1),
    }
    p.stdin.close()
    await p.wait()
    # 6
    p, port, pid = await router(
        spec(proxy={"maxRequestBodyBytes": 16 * MiB}), {"alpha": [f"127.0.0.1:{up.port}"]}
    )
    await asyncio.sleep(0.5)
    async with aiohttp.ClientSession() as s:
        async with s.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "x"}]},
        ) as a:
            await a.read()
        probe = LoopProbe(port).start()
        await asyncio.sleep(0.2)
        reset_peak(pid)
        r0 = rss(pid)
        t = time.perf_counter()
        async with s.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            data=nested_lists(8 * MiB),
            headers={"Content-Type": "application/json"},
        ) as a:
            st = a.status
            await a.read()
        took = time.perf_counter() - t
        g = peak_rss(pid) - r0
        await asyncio.sleep(0.2)
        await probe.stop()
    out["6 [[],...] 8MiB"] = {
        "status": st,
        "seconds": round(took, 3),
        "peak_rss_growth_MiB": round(g / MiB, 1),
        "loop_worst_ms": round(probe.worst * 1000, 1),
    }
    p.stdin.close()
    await p.wait()
    await up.stop()
    # 7
    up = await Upstream(name="alpha", tokens=40, interval=0.01, usage=False).start()
    p, port, pid = await router(
        spec(policy={"budgets": [{"name": "cap", "scope": "router", "maxTokens": 30, "windowSeconds": 600}]}),
        {"alpha": [f"127.0.0.1:{up.port}"]},
    )
    statuses = []
    async with aiohttp.ClientSession() as s:
        for _ in range(10):
            async with s.post(
                f"http://127.0.0.1:{port}/v1/chat/completions",
                json={"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
            ) as a:
                statuses.append(a.status)
                if a.status == 200:
                    n = 0
                    async for _c in a.content.iter_any():
                        n += 1
                        if n >= 5:
                            break
            await asyncio.sleep(0.1)
    out["7 hang-up streams vs 30-token budget"] = {"served_of_10": statuses.count(200)}
    # concurrent
    p.stdin.close()
    await p.wait()
    await up.stop()
    up = await Upstream(name="alpha", delay=0.5, tokens=8).start()
    p, port, pid = await router(
        spec(
            policy={"budgets": [{"name": "cap", "scope": "router", "maxTokens": 100, "windowSeconds": 600}]}
        ),
        {"alpha": [f"127.0.0.1:{up.port}"]},
    )
    async with aiohttp.ClientSession() as s:

        async def one() -> int:
            async with s.post(
                f"http://127.0.0.1:{port}/v1/chat/completions",
                json={"model": "m", "max_tokens": 40, "messages": [{"role": "user", "content": "hi"}]},
            ) as a:
                await a.read()
                return a.status

        sts = await asyncio.gather(*(one() for _ in range(10)))
    out["7 10 concurrent (18 tokens used each) vs 100-token budget"] = {
        "served": sts.count(200),
        "tokens_used": 18 * sts.count(200),
    }
    p.stdin.close()
    await p.wait()
    await up.stop()
    # 8
    up = await Upstream(name="alpha", tokens=400_000).start()
    p, port, pid = await router(spec(), {"alpha": [f"127.0.0.1:{up.port}"]}, limits={"write_timeout": 1.0})
    body = json.dumps(
        {"model": "m", "stream": True, "messages": [{"role": "user", "content": "go"}]}
    ).encode()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%b" % (len(body), body)
    )
    t = time.monotonic()
    for _ in range(200):  # 20 s at most
        if up.cancelled:
            break
        await asyncio.sleep(0.1)
    out["8 never-reading client"] = {
        "backend_freed_after_s": round(time.monotonic() - t, 1) if up.cancelled else None,
        "backend_in_flight_at_end": up.in_flight,
    }
    sock.close()
    p.stdin.close()
    await p.wait()
    await up.stop()
    # 8 names
    p, port, pid = await router(spec(), {"alpha": ["127.0.0.1:9"]})
    async with aiohttp.ClientSession() as s:
        async with s.post(
            f"http://127.0.0.1:{port}/v1/chat/completions", json={"model": "m", "messages": []}
        ) as a:
            msg = (await a.json())["error"]["message"]
        async with s.get(f"http://127.0.0.1:{port}/metrics") as a:
            m = await a.text()
    out["8 names"] = {"502 message": msg, "metrics name 127.0.0.1:9": "127.0.0.1:9" in m}
    p.stdin.close()
    await p.wait()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--baseline", help="also measure this copy of the package")
    args = parser.parse_args()
    results = {"router": asyncio.run(measure(str(REPO)))}
    if args.baseline:
        results["baseline"] = asyncio.run(measure(args.baseline))
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
