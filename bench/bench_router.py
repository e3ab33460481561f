"""The router's overhead: added latency over going direct, requests/s, CPU per request, and memory
per open stream, beside LiteLLM's proxy (the Python anchor) on the same workload in the same run.

Processes: an OpenAI-compatible stand-in (llmkube_testing.openai_upstream), each proxy on the same
one core in turn, and this process as the client (aiohttp), on the stand-in's core unless
`--client-core` says otherwise (never the proxies' core). The proxies:

* `router`: the real `llmkube.router.proxy.Proxy` of this tree with a static spec (one
  InferenceService backend whose endpoint is the stand-in; the API server plays no part in a
  request);
* `baseline` (with `--baseline DIR`): the same, from another copy of the package, for a
  before/after in one run (`git archive main llmkube | tar -x -C DIR`);
* `relay_uvloop` (with `--relay`): a byte-for-byte TCP relay on the router's loop and core, no
  HTTP parsed: the floor of what any Python proxy adds here for the extra hop;
* `litellm` (unless `--no-litellm`): LiteLLM's proxy from the benchmark-only venv
  `hack/litellm-venv.sh` installs (never a dependency of the package), one worker, its model
  pointing at the same stand-in.

Workloads, each direct and through every proxy:

* non-streaming answers from an instant stand-in at 1, 64 and 512 concurrent requests: latency
  p50/p99 (added = through the proxy - direct), requests/s, and the proxy's CPU seconds per request
  (from /proc: utime + stime of its process tree, which means something on a loaded machine where
  wall latency does not);
* streams of 200 tokens at a fixed rate: time to first byte, and CPU per stream; closed loop at 1,
  64 and 512 (all of a round start at once: a burst), and 64 kept open for `--steady-seconds` with
  their starts spread over a stream's length (steady service) through a proxy while 64 more go
  direct at the same moment (their difference is the proxy's alone, whatever the machine does
  meanwhile), in `--steady-rounds` rounds of every proxy in turn (the medians reported);
* the router's RSS with 1,000 streams open (a stand-in sending a token a second), minus its RSS
  idle.

Usage: .venv/bin/python bench/bench_router.py [--requests 2000] [--router-core 1]
       [--baseline DIR] [--no-litellm] [--litellm-streams-up-to 64] [--workloads instant,streaming,slow]
       [--steady-seconds 10] [--steady-rounds 3] [--client-core N] [--router-loop auto|uvloop|asyncio]
       [--relay]
Prints one JSON object; stores it in bench/results/router-<time>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from scale_support import machine_info, progress, save_result  # noqa: E402

PYTHON = sys.executable
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
LITELLM_SCRIPT = REPO / "hack" / "litellm-venv.sh"
BODY = {"model": "m", "messages": [{"role": "user", "content": "hello there"}]}

# The router process: the proxy with a static spec, on the given port (no API server involved).
ROUTER = r"""
import asyncio, os, sys
from pathlib import Path
from llmkube.router.audit import AuditSink
from llmkube.router.metrics import RouterMetrics
from llmkube.router.proxy import Proxy
from llmkube.router.secrets import SecretFiles
from llmkube.router.state import RouterState
from llmkube.router.upstream import Upstreams

class Quiet(AuditSink):
    def write(self, line): pass

async def serve(proxy, port):
    try:  # the router's own server (llmkube.router.http)
        from llmkube.router.process import http_server
    except ImportError:  # a --baseline copy from before it: aiohttp's
        from aiohttp import web
        runner = web.ServerRunner(web.Server(proxy.handle, handler_cancellation=True, access_log=None))
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port, backlog=4096).start()
        return
    try:  # one load generator's address stands for many clients: no cap per address
        from llmkube.router.http.limits import Limits
    except ImportError:  # a --baseline copy from before the caps
        await http_server(proxy).start("127.0.0.1", port, backlog=4096)
        return
    limits = Limits(max_connections=8192, max_connections_per_client=0)
    await http_server(proxy, limits).start("127.0.0.1", port, backlog=4096)

async def main(port, upstream):
    state = RouterState("bench", "ns")
    state.load({"metadata": {"generation": 1}, "spec": {
        "backends": [{"name": "m", "inferenceServiceRef": {"name": "m"}}], "defaultRoute": "m"}})
    state.set_endpoints("m", (upstream,))
    upstreams = Upstreams(stream_idle_timeout=600.0, api_servers=())
    secrets = Path(sys.argv[3])
    try:
        from llmkube.router.process import metrics_page
    except ImportError:
        from llmkube.router.process import _metrics_page as metrics_page
    proxy = Proxy(state, upstreams, RouterMetrics("bench"), Quiet(), credentials=SecretFiles(secrets),
                  api_keys_root=secrets, ready=list, metrics_page=metrics_page)
    await serve(proxy, port)
    print("ready", flush=True)
    await asyncio.Event().wait()

try:  # the loop `llmkube router --loop <choice>` would run on (a copy without the choice: asyncio's)
    from llmkube.router.event_loop import loop_factory
    new_loop = loop_factory(sys.argv[4])[1]
except ImportError:
    new_loop = asyncio.new_event_loop
with asyncio.Runner(loop_factory=new_loop) as runner:
    runner.run(main(int(sys.argv[1]), sys.argv[2]))
"""

# The floor: a byte-for-byte TCP relay (a new upstream connection per client connection, no HTTP
# parsed), on the router's loop. What any Python proxy on this core pays for the extra hop alone.
RELAY = r"""
import asyncio, sys

class Pipe(asyncio.Protocol):
    def __init__(self, peer=None):
        self.peer, self.transport, self.pending = peer, None, []
    def connection_made(self, transport):
        # What the other side sent before this one was connected goes first, in order.
        self.transport = transport
        for data in self.pending:
            transport.write(data)
        self.pending = []
    def data_received(self, data):
        if self.peer.transport is None:
            self.peer.pending.append(data)
        else:
            self.peer.transport.write(data)
    def connection_lost(self, exc):
        if self.peer.transport is not None:
            self.peer.transport.close()

async def main(port, host, upstream_port):
    loop = asyncio.get_running_loop()

    class Client(Pipe):
        def connection_made(self, transport):
            super().connection_made(transport)
            self.peer = Pipe(self)
            loop.create_task(self.dial())
        async def dial(self):
            try:
                await loop.create_connection(lambda: self.peer, host, upstream_port)
            except OSError:
                self.transport.close()

    server = await loop.create_server(Client, "127.0.0.1", port, backlog=4096)
    print("ready", flush=True)
    await server.serve_forever()

if sys.argv[3] == "uvloop":
    import uvloop
    new_loop = uvloop.new_event_loop
else:
    new_loop = asyncio.new_event_loop
host, upstream_port = sys.argv[2].rsplit(":", 1)
with asyncio.Runner(loop_factory=new_loop) as runner:
    runner.run(main(int(sys.argv[1]), host, int(upstream_port)))
"""


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(
    args: list[str],
    core: int | None,
    *,
    cwd: Path = REPO,
    env: dict[str, str] | None = None,
    ready: str | None = None,
) -> subprocess.Popen[str]:
    """A process pinned to `core`, once it printed its first line (or, with `ready`, once that URL
    answers)."""
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE if ready is None else subprocess.DEVNULL,
        stderr=None if ready is None else subprocess.DEVNULL, text=True, cwd=cwd,
        env={**os.environ, **(env or {})}, start_new_session=True,
    )  # fmt: skip
    if core is not None:
        os.sched_setaffinity(proc.pid, {core})
    if ready is None:
        assert proc.stdout is not None
        proc.stdout.readline()  # "listening ..." or "ready"
        return proc
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{args[0]} exited with {proc.returncode} before it answered {ready}")
        try:
            with urllib.request.urlopen(ready, timeout=2) as answer:
                if answer.status == 200:
                    return proc
        except OSError:
            pass
        time.sleep(0.5)
    proc.kill()
    raise RuntimeError(f"{args[0]} did not answer {ready} within 180 s")


def _tree(pid: int) -> list[int]:
    """The process and its descendants (LiteLLM's CLI may run its server in a child)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += parents.get(current, [])
    return found


@contextlib.contextmanager
def _alone(proxies: list[tuple[str, subprocess.Popen[str], str]], measured: str | None) -> Iterator[None]:
    """Every proxy but `measured` (None: all of them, for the direct runs) stopped (SIGSTOP) while
    it is measured: they share its core, and one still busy with a backlog or its own timers
    (LiteLLM's, after a load it could not keep up with) would be measured with it."""
    stopped = [
        member
        for name, proc, _ in proxies
        if name != measured and proc.poll() is None
        for member in _tree(proc.pid)
    ]
    for member in stopped:
        with contextlib.suppress(ProcessLookupError):
            os.kill(member, signal.SIGSTOP)
    try:
        yield
    finally:
        for member in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(member, signal.SIGCONT)


def _cpu_seconds(pid: int) -> float:
    total = 0
    for member in _tree(pid):
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / CLOCK_TICKS


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _timed_post(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any], stream: bool
) -> float | None:
    """One completion: ms to its first byte (a stream, then read to its end) or to its whole answer;
    None when it was not answered with 200."""
    started = time.perf_counter()
    async with session.post(url + "/v1/chat/completions", json=body) as answer:
        if answer.status != 200:
            await answer.read()
            return None
        if not stream:
            await answer.read()
            return (time.perf_counter() - started) * 1000
        await answer.content.readany()
        took = (time.perf_counter() - started) * 1000
        async for _ in answer.content.iter_any():
            pass
        return took


async def _requests(url: str, total: int, concurrency: int, stream: bool) -> dict[str, float]:
    """Latency (non-streaming) or time to first byte (streams) in ms, requests/s answered with 200,
    and how many were not."""
    timings: list[float] = []
    connector = aiohttp.TCPConnector(limit=0)
    body = {**BODY, "stream": True} if stream else BODY
    failed = 0
    # No total timeout: a proxy that falls behind shows as latency, not as an error.
    timeout = aiohttp.ClientTimeout(total=None)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        gate = asyncio.Semaphore(concurrency)

        async def one() -> None:
            nonlocal failed
            async with gate:
                took = await _timed_post(session, url, body, stream)
                if took is None:
                    failed += 1
                else:
                    timings.append(took)

        begun = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(total)))
        elapsed = time.perf_counter() - begun
    return {
        "p50_ms": round(statistics.median(timings), 3) if timings else -1.0,
        "p99_ms": round(_pct(timings, 0.99), 3) if timings else -1.0,
        "requests_per_second": round(len(timings) / elapsed, 1),
        "failed": failed,
    }


async def _steady_streams(
    urls: list[str], concurrency: int, seconds: float, stream_seconds: float
) -> dict[str, dict[str, float]]:
    """`concurrency` streams open at every moment to each of `urls` together, their starts spread
    evenly (the slots of all urls interleaved: slot i begins i/n of a stream's length in, and opens
    its next stream as one ends): what a router in steady service sees, where the closed loop of
    `_requests` starts all of them at once and measures that burst. Streams direct and through a
    proxy at the same moment meet the same machine: their difference is the proxy's, whatever the
    machine does meanwhile. Per url: time to first byte in ms, and how many streams were served."""
    timings: dict[str, list[float]] = {url: [] for url in urls}
    failed = dict.fromkeys(urls, 0)
    body = {**BODY, "stream": True}
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=None)
    ) as session:
        begun = time.perf_counter()
        end = begun + seconds
        slots = [url for _ in range(concurrency) for url in urls]

        async def slot(index: int, url: str) -> None:
            await asyncio.sleep(stream_seconds * index / len(slots))
            while time.perf_counter() < end:
                took = await _timed_post(session, url, body, True)
                if took is None:
                    failed[url] += 1
                else:
                    timings[url].append(took)

        await asyncio.gather(*(slot(i, url) for i, url in enumerate(slots)))
        elapsed = time.perf_counter() - begun
    return {
        url: {
            "p50_ms": round(statistics.median(found), 3) if found else -1.0,
            "p99_ms": round(_pct(found, 0.99), 3) if found else -1.0,
            "streams": len(found),
            "streams_per_second": round(len(found) / elapsed, 1),
            "failed": failed[url],
        }
        for url, found in timings.items()
    }


async def _open_streams(url: str, count: int) -> tuple[aiohttp.ClientSession, list[Any]]:
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    answers = []
    gate = asyncio.Semaphore(32)

    async def one() -> None:
        async with gate:
            answer = await session.post(url + "/v1/chat/completions", json={**BODY, "stream": True})
            await answer.content.readany()
            answers.append(answer)

    await asyncio.gather(*(one() for _ in range(count)))
    return session, answers


LITELLM_CONFIG = """\
model_list:
  - model_name: m
    litellm_params:
      model: openai/m
      api_base: http://{upstream}/v1
      api_key: none
litellm_settings:
  telemetry: false
general_settings:
  # Without client keys, as the router runs here (LiteLLM refuses to start without a master key
  # unless told this).
  dangerously_permit_weak_or_unset_master_key: true
"""


def _litellm_venv() -> Path:
    """The benchmark-only venv (installed on first use; cached)."""
    found = subprocess.run(["bash", str(LITELLM_SCRIPT)], check=True, stdout=subprocess.PIPE, text=True)
    return Path(found.stdout.strip().splitlines()[-1])


def _proxies(
    args: argparse.Namespace, upstream: str, secrets: str, litellm: Path | None
) -> list[tuple[str, subprocess.Popen[str], str]]:
    """(name, process, URL) of every proxy in front of `upstream`, started in turn on the router's core."""
    started = []
    sources = [("router", REPO)] + ([("baseline", Path(args.baseline).resolve())] if args.baseline else [])
    for name, source in sources:
        port = _free_port()
        proc = _start(
            [PYTHON, "-c", ROUTER, str(port), upstream, secrets, args.router_loop], args.router_core,
            cwd=source,
            env={"PYTHONPATH": str(source)},
        )  # fmt: skip
        started.append((name, proc, f"http://127.0.0.1:{port}"))
    if args.relay:
        port = _free_port()
        loop = "uvloop" if args.router_loop != "asyncio" and _importable("uvloop") else "asyncio"
        proc = _start([PYTHON, "-c", RELAY, str(port), upstream, loop], args.router_core)
        started.append((f"relay_{loop}", proc, f"http://127.0.0.1:{port}"))
    if litellm is not None:
        port = _free_port()
        config = Path(secrets) / f"litellm-{port}.yaml"
        config.write_text(LITELLM_CONFIG.format(upstream=upstream))
        proc = _start(
            [str(litellm / "bin" / "litellm"), "--config", str(config), "--host", "127.0.0.1",
             "--port", str(port), "--num_workers", "1"],
            args.router_core, cwd=Path(secrets),
            # No model cost map fetched from the network, no telemetry, no request logs.
            env={
                "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                "LITELLM_LOG": "ERROR",
                "LITELLM_TELEMETRY": "False",
            },
            ready=f"http://127.0.0.1:{port}/health/liveliness",
        )  # fmt: skip
        started.append(("litellm", proc, f"http://127.0.0.1:{port}"))
    return started


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def _stop(proc: subprocess.Popen[str]) -> None:
    for member in reversed(_tree(proc.pid)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(member, signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        for member in reversed(_tree(proc.pid)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(member, signal.SIGKILL)
        proc.wait(5)


async def _through(
    proc: subprocess.Popen[str], url: str, total: int, concurrency: int, stream: bool
) -> dict[str, float]:
    before = _cpu_seconds(proc.pid)
    found = await _requests(url, total, concurrency, stream)
    found["cpu_ms_per_request"] = round((_cpu_seconds(proc.pid) - before) / total * 1000, 3)
    return found


def _ratios(row: dict[str, Any]) -> dict[str, float]:
    """router / each other proxy: requests/s per core and CPU per request (each pinned to one core)."""
    ours = row["router"]
    found = {}
    for name in ("baseline", "litellm"):
        other = row.get(name)
        if other and other.get("requests_per_second") and ours["cpu_ms_per_request"]:
            found[f"requests_per_second_vs_{name}"] = round(
                ours["requests_per_second"] / other["requests_per_second"], 2
            )
            found[f"cpu_per_request_{name}_over_router"] = round(
                other["cpu_ms_per_request"] / ours["cpu_ms_per_request"], 2
            )
    return found


async def _steady(
    args: argparse.Namespace, direct: str, proxies: list[tuple[str, subprocess.Popen[str], str]]
) -> dict[str, Any]:
    """64 streams through each proxy in steady service, and 64 direct at the same moment
    (`_steady_streams`: the difference is the proxy's alone), in `--steady-rounds` rounds of every
    proxy in turn (LiteLLM only when it can relay that many). The medians of the rounds are the
    figures; every round is kept."""
    concurrency, seconds = 64, args.steady_seconds
    found: dict[str, Any] = {"concurrency": concurrency, "seconds": seconds, "rounds": []}
    names = [name for name, _, _ in proxies if name != "litellm" or concurrency <= args.litellm_streams_up_to]
    for index in range(args.steady_rounds):
        round_: dict[str, Any] = {}
        for name, proc, url in proxies:
            if name not in names:
                continue
            before = _cpu_seconds(proc.pid)
            with _alone(proxies, name):
                both = await _steady_streams([direct, url], concurrency, seconds, 1.0)
            d, r = both[direct], both[url]
            r["cpu_ms_per_stream"] = round((_cpu_seconds(proc.pid) - before) / max(1, r["streams"]) * 1000, 3)
            r["direct_p50_ms"], r["direct_p99_ms"] = d["p50_ms"], d["p99_ms"]
            r["added_p50_ms"] = round(r["p50_ms"] - d["p50_ms"], 3)
            r["added_p99_ms"] = round(r["p99_ms"] - d["p99_ms"], 3)
            round_[name] = r
        found["rounds"].append(round_)
        progress(
            f"  steady streams c={concurrency}, round {index + 1}/{args.steady_rounds}: {json.dumps(round_)}"
        )
    keys = [
        "direct_p50_ms",
        "direct_p99_ms",
        "p50_ms",
        "p99_ms",
        "added_p50_ms",
        "added_p99_ms",
        "cpu_ms_per_stream",
    ]
    for name in names:
        rounds = [r[name] for r in found["rounds"]]
        found[name] = {key: round(statistics.median(r[key] for r in rounds), 3) for key in keys}
        found[name]["streams"] = sum(r["streams"] for r in rounds)
        found[name]["failed"] = sum(r["failed"] for r in rounds)
    return found


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {
        "benchmark": "router",
        "machine": machine_info(),
        "router_core": args.router_core,
        "baseline": args.baseline,
    }
    litellm = None
    if not args.no_litellm:
        litellm = _litellm_venv()
        result["litellm"] = (litellm / ".version").read_text().strip()
    procs: list[subprocess.Popen[str]] = []
    secrets = tempfile.mkdtemp()
    try:
        for label, tokens, interval in (("instant", 8, 0.0), ("streaming", 200, 0.005), ("slow", 200, 1.0)):
            if label not in args.workloads.split(","):
                continue
            progress(f"workload {label}")
            up_port = _free_port()
            upstream = _start(
                [PYTHON, "-m", "llmkube_testing.openai_upstream", "--port", str(up_port),
                 "--tokens", str(tokens), "--interval", str(interval)],
                args.upstream_core,
            )  # fmt: skip
            procs.append(upstream)
            direct = f"http://127.0.0.1:{up_port}"
            if label == "slow":
                router_port = _free_port()
                router = _start(
                    [PYTHON, "-c", ROUTER, str(router_port), f"127.0.0.1:{up_port}", secrets,
                     args.router_loop],
                    args.router_core,
                )  # fmt: skip
                procs.append(router)
                routed = f"http://127.0.0.1:{router_port}"
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
                _stop(router)
            else:
                stream = label == "streaming"
                proxies = _proxies(args, f"127.0.0.1:{up_port}", secrets, litellm)
                procs += [proc for _, proc, _ in proxies]
                rows = {}
                for concurrency in (1, 64, 512):
                    # Streams last a second each (200 tokens, 5 ms apart): one at a time, 20 say enough.
                    total = args.requests if not stream else min(args.requests, max(64, concurrency * 2))
                    if concurrency == 1:
                        total = min(total, 20 if stream else 300)
                    row: dict[str, Any] = {"requests": total}
                    with _alone(proxies, None):
                        row["direct"] = d = await _requests(direct, total, concurrency, stream)
                    for name, proc, url in proxies:
                        if name == "litellm" and stream and concurrency > args.litellm_streams_up_to:
                            row[name] = {"skipped": f"streams beyond {args.litellm_streams_up_to} at once"}
                            continue
                        with _alone(proxies, name):
                            await _requests(url, min(total, 100), concurrency, stream)  # warm up
                            r = row[name] = await _through(proc, url, total, concurrency, stream)
                        r["added_p50_ms"] = round(r["p50_ms"] - d["p50_ms"], 3)
                        r["added_p99_ms"] = round(r["p99_ms"] - d["p99_ms"], 3)
                    row.update(_ratios(row))
                    rows[str(concurrency)] = row
                    progress(f"  {label} c={concurrency}: {json.dumps(row)}")
                result[label] = rows
                if stream and args.steady_seconds > 0:
                    result["steady_streams"] = await _steady(args, direct, proxies)
                for _, proc, _ in proxies:
                    _stop(proc)
            _stop(upstream)
    finally:
        for proc in procs:
            if proc.poll() is None:
                _stop(proc)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--open-streams", type=int, default=1000)
    parser.add_argument("--router-core", type=int, default=min(1, (os.cpu_count() or 1) - 1))
    parser.add_argument("--upstream-core", type=int, default=0)
    parser.add_argument("--baseline", help="also run the router from this copy of the package")
    parser.add_argument(
        "--router-loop",
        choices=("auto", "uvloop", "asyncio"),
        default="auto",
        help="the router's event loop, as `llmkube router --loop` (a --baseline copy without that flag "
        "runs on asyncio's)",
    )
    parser.add_argument(
        "--relay",
        action="store_true",
        help="also a byte-for-byte TCP relay on the router's loop and core: the floor of any Python "
        "proxy's added latency here",
    )
    parser.add_argument("--no-litellm", action="store_true", help="leave LiteLLM's proxy out")
    parser.add_argument(
        "--litellm-streams-up-to",
        type=int,
        default=64,
        help="stream through LiteLLM only up to this many at once (it relays about half a stream of "
        "200 tokens per second on one core here: 1,024 streams would take over half an hour)",
    )
    parser.add_argument("--workloads", default="instant,streaming,slow", help="comma-separated: which to run")
    parser.add_argument(
        "--steady-rounds",
        type=int,
        default=3,
        help="rounds of the steady workload (direct and every proxy in turn); the figures are their medians",
    )
    parser.add_argument(
        "--client-core",
        type=int,
        default=None,
        help="the core this process (the client) runs on (default: the upstream's, so that it never "
        "shares the router's core)",
    )
    parser.add_argument(
        "--steady-seconds",
        type=float,
        default=10.0,
        help="with the streaming workload: 64 streams kept open this long (per round) with their starts "
        "spread (steady service, not a burst); 0 leaves it out",
    )
    args = parser.parse_args()
    # The client never shares the router's core: on a machine of two cores, one for the router and
    # one for the upstream stand-in and the client, the router's figures are its own.
    os.sched_setaffinity(0, {args.upstream_core if args.client_core is None else args.client_core})
    result = asyncio.run(measure(args))
    print(json.dumps(result, indent=2))
    progress(f"saved {save_result('router', result)}")


if __name__ == "__main__":
    main()
