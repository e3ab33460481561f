"""A restart against warned services: how many mutating requests (Events included) does a freshly
started controller make against N services that each carry a warning it already announced?
(The warnings live in conditions, and their Events are announced only when a condition changes,
so the answer should be 0.)

Creates N Models and N InferenceServices on a real kube-apiserver (tier "api"): a third with an
ignored setting (IgnoredSetting), a third with an invalid quantity (InvalidSpec), a third with CPU
MoE offload and no memory request (MissingMemoryRequest). Runs the operator until every service has
a status and every Event is written, stops it, starts a new one, and counts its mutating requests
for `--window` seconds.

Usage: .venv/bin/python bench/bench_restart_warnings.py [--services 200] [--window 15]
Prints one JSON object. Needs the binaries from hack/build-k8s.sh.
"""

import argparse
import asyncio
import json
import logging
import time
from typing import Any

import structlog
from bench_operator import API, NAMESPACE, poll, running
from llmkube_testing.cluster import LocalCluster
from llmkube_testing.rest import KubeRest, wait_until

from llmkube.api.crds import all_crds
from llmkube.controllers.resources import INFERENCE_SERVICES
from llmkube.manager import Manager

WARNINGS: list[dict[str, Any]] = [
    {"vllmConfig": {"dtype": "float16"}},  # ignored by llama.cpp
    {"resources": {"cpu": "two"}},  # invalid quantity
    {"moeCPUOffload": True},  # no memory request
]


def create_objects(admin: KubeRest, count: int) -> None:
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    for i in range(count):
        name = f"svc-{i:04d}"
        admin.create(
            {"apiVersion": API, "kind": "Model", "metadata": {"name": name}, "spec": {"source": "org/repo"}},
            namespace=NAMESPACE,
        )
        spec = {"modelRef": name, "skipModelInit": True, **WARNINGS[i % len(WARNINGS)]}
        admin.create(
            {"apiVersion": API, "kind": "InferenceService", "metadata": {"name": name}, "spec": spec},
            namespace=NAMESPACE,
        )


def every_status_written(manager: Manager, count: int) -> bool:
    services = manager.informer(INFERENCE_SERVICES).store.objects()
    return len(services) == count and all((s.get("status") or {}).get("conditions") for s in services)


async def run(count: int, window: float) -> dict[str, Any]:
    with LocalCluster("api") as cluster:
        admin = cluster.admin()
        for crd in all_crds():
            admin.apply(crd)
        admin.forget_discovery()
        wait_until(lambda: admin.get_text(f"/apis/{API}/models")[0] == 200, timeout=30, what="CRDs served")

        async with running(cluster, 4) as first:
            created = time.perf_counter()
            await asyncio.to_thread(create_objects, admin, count)
            await poll(lambda: every_status_written(first.manager, count), 600, "every status written")
            converge = time.perf_counter() - created
            await asyncio.sleep(3)
            await first.manager.recorder.drain()
            events = len(admin.list("events.k8s.io/v1", "Event", NAMESPACE))

        started = time.perf_counter()
        async with running(cluster, 4) as restarted:
            await asyncio.sleep(window)
            await restarted.manager.recorder.drain()
            elapsed = time.perf_counter() - started
            writes = restarted.mutating_requests()
            by_method = {m: n for m, n in restarted.requests.by_method().items() if m != "GET"}

    return {
        "benchmark": "restart_against_warned_services",
        "services": count,
        "converge_seconds": round(converge, 1),
        "events_before_restart": events,
        "restart_window_seconds": round(elapsed, 1),
        "restart_mutating_requests": writes,
        "restart_mutating_by_method": by_method,
    }


def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser()
    parser.add_argument("--services", type=int, default=200)
    parser.add_argument("--window", type=float, default=15.0)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.services, args.window)), indent=2))


if __name__ == "__main__":
    main()
