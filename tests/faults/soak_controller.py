"""`llmkube controller` for the soak test, plus a sampler: every few seconds one JSON line on stdout
with what the process holds (RSS, open file descriptors and sockets, threads, asyncio tasks) and
what it did (requests, reconciles queued). Run as `python soak_controller.py <kubeconfig> <period>`.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import threading
import time

import orjson
from llmkube_testing.request_log import RequestLog

from llmkube.controllers.setup import ControllersConfig, setup_controllers
from llmkube.manager import Manager, ManagerConfig


def rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def descriptors() -> tuple[int, int]:
    """(open file descriptors, of which sockets)."""
    fds = os.listdir("/proc/self/fd")
    sockets = 0
    for fd in fds:
        try:
            sockets += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:
            continue
    return len(fds), sockets


async def sample(manager: Manager, requests: RequestLog, period: float) -> None:
    started = time.monotonic()
    while True:
        fds, sockets = descriptors()
        controllers = [manager.controller(name) for name in ("inferenceservice", "model")]
        line = {
            "event": "soak sample",
            "t": round(time.monotonic() - started, 1),
            "rss": rss_bytes(),
            "fds": fds,
            "sockets": sockets,
            "threads": threading.active_count(),
            "tasks": len(asyncio.all_tasks()),
            "requests": requests.total_requests(),
            "writes": requests.mutating_requests(),
            "queued": sum(len(c.queue) for c in controllers),
            "gc_objects": len(gc.get_objects()),
            "by_request": {
                f"{r.verb} {r.rbac_resource}": n for r, n in sorted(requests.api_requests.items())
            },
        }
        sys.stdout.write(orjson.dumps(line).decode() + "\n")
        sys.stdout.flush()
        await asyncio.sleep(period)


def main() -> None:
    kubeconfig, period = sys.argv[1], float(sys.argv[2])
    # The real process, signals and JSON logs included; only its requests are counted besides.
    requests = RequestLog()
    manager = Manager(
        ManagerConfig(
            kubeconfig=kubeconfig,
            metrics_bind_address="0",
            health_bind_address="0",
            log_level="warning",
            log_format="json",
        ),
        request_observer=requests,
    )

    def setup(m: Manager) -> None:
        setup_controllers(m, ControllersConfig(manage_priority_classes=False))

        async def sampler() -> None:
            await sample(m, requests, period)

        m.add_task("soak:sampler", sampler)

    asyncio.run(manager.run(setup))


if __name__ == "__main__":
    main()
