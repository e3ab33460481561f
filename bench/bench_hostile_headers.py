"""What hostile GGUF headers cost the controller's remote header reader: its resident memory
across repeated reads, and the requests and bytes one read of each costs.

A loopback HTTP server (this process) serves the headers of llmkube_testing.hostile_gguf (2 and
4 MiB names, counts of 2^64-1, arrays 5,000 deep, ...) and one file announced with a
Content-Range total of 10^30 bytes; a fresh child process with the code under test reads each of
them `--rounds` times with the controller's reader (what one revalidation or retry does) and
reports its RSS after each round (VmRSS, and the peak VmHWM). `--code NAME=DIR` runs the reader
of another checkout (e.g. an export of an older commit) beside this one, for a before/after.

Usage: .venv/bin/python bench/bench_hostile_headers.py [--rounds 20] [--code before=/tmp/before]
Prints one JSON object and saves it to bench/results/hostile-headers-<time>.json.
"""

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from aiohttp import web
from scale_support import machine_info, save_result

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from llmkube_testing.hostile_gguf import HOSTILE, ordinary  # noqa: E402

_RANGE = re.compile(r"^bytes=(\d+)-(\d+)$")

# The reader under test, in a process of its own (imports from PYTHONPATH: the code under test).
CHILD = r"""
import asyncio, gc, inspect, json, sys
import aiohttp
from llmkube.controllers.modelsource.remoteheader import read_remote_gguf_metadata

def rss():
    fields = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
    return {k: int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM")}

async def main(base, names, rounds):
    kwargs = {}
    if "policy" in inspect.signature(read_remote_gguf_metadata).parameters:
        from llmkube.plan.model.egress import EgressPolicy, parse_allowed_hosts
        policy = EgressPolicy(allowed=parse_allowed_hosts("127.0.0.1"))
        kwargs["policy"] = lambda: policy
    outcomes, samples = {}, []
    async with aiohttp.ClientSession() as session:
        await read_remote_gguf_metadata(session, base + "/files/ordinary", **kwargs)  # warm up
        gc.collect()
        samples.append(rss())
        for _ in range(rounds):
            for name in names:
                path = "/lying/ordinary" if name == "content-range-total" else "/files/" + name
                try:
                    header = await read_remote_gguf_metadata(session, base + path, **kwargs)
                    outcomes[name] = header.failure.value if header.failure else "metadata"
                except Exception as error:
                    outcomes[name] = "raised " + type(error).__name__
            gc.collect()
            samples.append(rss())
    print(json.dumps({"outcomes": outcomes, "rss": samples}))

asyncio.run(main(sys.argv[1], sys.argv[2].split(","), int(sys.argv[3])))
"""


class Files:
    def __init__(self) -> None:
        self.files = {"ordinary": ordinary(), **HOSTILE}
        self.requests: Counter[str] = Counter()
        self.bytes: Counter[str] = Counter()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        label = "content-range-total" if request.path.startswith("/lying/") else name
        self.requests[label] += 1
        body = self.files[name]
        match = _RANGE.match(request.headers.get("Range", ""))
        if match is None:
            return web.Response(body=body)
        start, end = int(match.group(1)), min(int(match.group(2)), len(body) - 1)
        total = 10**30 if label == "content-range-total" else len(body)
        chunk = body[start : end + 1]
        self.bytes[label] += len(chunk)
        return web.Response(status=206, body=chunk, headers={"Content-Range": f"bytes {start}-{end}/{total}"})


async def measure(code: str, rounds: int) -> dict[str, Any]:
    files = Files()
    app = web.Application()
    app.router.add_get("/files/{name}", files.handle)
    app.router.add_get("/lying/{name}", files.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    base = f"http://127.0.0.1:{runner.addresses[0][1]}"
    names = [*HOSTILE, "content-range-total"]
    try:
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            CHILD,
            base,
            ",".join(names),
            str(rounds),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": code},
            cwd="/",  # not this checkout: `python -c` imports from its working directory first
        )
        out, err = await child.communicate()
    finally:
        await runner.cleanup()
    if child.returncode != 0:
        raise SystemExit(f"the reader under {code} failed: {err.decode()[-2000:]}")
    report = json.loads(out)
    rss = report["rss"]
    files.requests.pop("ordinary", None)
    return {
        "code": code,
        "rss_mib": {
            "after_warm_up": round(rss[0]["VmRSS"], 1),
            "after_first_round": round(rss[1]["VmRSS"], 1),
            "after_last_round": round(rss[-1]["VmRSS"], 1),
            "peak": round(rss[-1]["VmHWM"], 1),
        },
        "outcomes": report["outcomes"],
        "requests_per_read": {name: files.requests[name] / rounds for name in names},
        "mib_per_read": {name: round(files.bytes[name] / rounds / 2**20, 2) for name in names},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument(
        "--code", action="append", default=[], metavar="NAME=DIR", help="another checkout's reader too"
    )
    args = parser.parse_args()
    codes = {"this checkout": str(REPO)} | dict(item.split("=", 1) for item in args.code)
    results = {name: asyncio.run(measure(path, args.rounds)) for name, path in codes.items()}
    record = {
        "benchmark": "hostile_headers",
        "rounds": args.rounds,
        "readers": results,
        "machine": machine_info(),
    }
    save_result("hostile-headers", record)
    print(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
