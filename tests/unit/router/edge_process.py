"""A router's proxy in a process of its own, for the tests that hold its front door to numbers (peak
RSS, the event loop's latency): the real Proxy behind the real HttpServer, wired as `llmkube
router` wires them (`process.http_server`), on the loop the image runs (uvloop where installed),
its spec and endpoints given on the command line instead of by the watches.

    python -m tests.unit.router.edge_process '{"spec": {...}, "endpoints": {"alpha": ["127.0.0.1:9"]}}'

prints one JSON line (`{"port": N, "pid": N}`) once it listens, and stops when its standard input
closes (so it never outlives the test that started it)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

from llmkube.router.event_loop import loop_factory
from llmkube.router.http.limits import Limits
from tests.unit.router.proxy_support import running_proxy


async def _serve(options: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as secrets:
        limits = Limits(**options.get("limits", {}))
        async with running_proxy("edge", Path(secrets), limits=limits) as running:
            running.load(options["spec"])
            for service, addresses in (options.get("endpoints") or {}).items():
                running.endpoints(service, *addresses)
            port = int(running.url.rsplit(":", 1)[1])
            sys.stdout.write(orjson.dumps({"port": port, "pid": os.getpid()}).decode() + "\n")
            sys.stdout.flush()
            loop = asyncio.get_running_loop()
            stdin_closed = loop.create_future()
            loop.add_reader(sys.stdin.fileno(), lambda: stdin_closed.done() or stdin_closed.set_result(None))
            await stdin_closed


def main() -> None:
    options = orjson.loads(sys.argv[1])
    _, factory = loop_factory("auto")
    loop = factory()
    with contextlib.suppress(KeyboardInterrupt):
        loop.run_until_complete(_serve(options))
    loop.close()


if __name__ == "__main__":
    main()
