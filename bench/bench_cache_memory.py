"""Bytes per service in each of the controller's caches (tracemalloc), on a converged cluster.

Creates N Models and N CPU InferenceServices on a fresh local control plane, lets the real
`llmkube controller` process converge them (and stops it), then builds the controller's informers
exactly as `llmkube controller` does (same resources, selectors, transforms, indexes) in this
process and fills them one at a time under tracemalloc: what each cache retains after its first
LIST, per cached object and per service. Tier "full" adds pods (kwok) and Nodes.

Usage: .venv/bin/python bench/bench_cache_memory.py [--services 1000] [--tier api]
Prints one JSON object; stores it in bench/results/cache-memory-N<services>-<time>.json.
"""

import argparse
import asyncio
import gc
import json
import logging
import time
import tracemalloc
from typing import Any

import structlog
from scale_support import (
    AuditCounter,
    BenchCluster,
    Observer,
    RunningOperator,
    admin_client,
    create_workload,
    install,
    llmkube_operator,
    machine_info,
    progress,
    save_result,
    wait_for,
)

from llmkube.cli import build_parser as cli_parser
from llmkube.controllers.setup import setup_controllers
from llmkube.manager import Manager, ManagerConfig
from llmkube.process.config import controllers_config


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    count = args.services
    spec = llmkube_operator()
    result: dict[str, Any] = {"benchmark": "cache_memory", "services": count, "tier": args.tier}
    with BenchCluster(args.tier) as cluster:
        install(cluster, spec.crds, spec.rbac)
        progress(f"creating {count} Models and InferenceServices")
        await create_workload(cluster, count)
        async with await admin_client(cluster) as admin:
            observer = Observer(admin)
            observer.start()
            await observer.synced()
            operator = RunningOperator(spec, cluster.controller_kubeconfig, cluster.logs_dir / "operator.log")
            try:
                progress("llmkube converging them")
                await wait_for(lambda: observer.converged(count), 1800, "convergence", interval=0.2)
                if args.tier == "full":
                    await asyncio.sleep(10)  # pods appear behind their Deployments
            finally:
                operator.stop()
                await observer.stop()
        AuditCounter(cluster.writes_log).settle()
        result["machine"] = machine_info(cluster)
        result["caches"] = await caches(cluster.controller_kubeconfig, count)
    total = sum(cache["kib"] for cache in result["caches"])
    result["total_kib"] = round(total, 1)
    result["bytes_per_service"] = round(total * 1024 / count)
    return result


async def caches(kubeconfig: Any, count: int) -> list[dict[str, Any]]:
    args = cli_parser().parse_args(["controller", f"--kubeconfig={kubeconfig}", "--model-cache-path="])
    manager = Manager(ManagerConfig(kubeconfig=str(kubeconfig), configure_logging=False))
    await manager.connect()
    setup_controllers(manager, controllers_config(args))
    measured = []
    tracemalloc.start()
    try:
        for informer in manager.informers:
            gc.collect()
            before = tracemalloc.get_traced_memory()[0]
            informer.start()
            await informer.wait_for_sync()
            await informer.stop()  # the store stays: only the watch ends
            gc.collect()
            retained = tracemalloc.get_traced_memory()[0] - before
            objects = len(informer.store)
            measured.append(
                {
                    "cache": f"{informer.resource.kind}"
                    + (
                        f" [{informer.label_selector or informer.field_selector}]"
                        if informer.label_selector or informer.field_selector
                        else ""
                    ),
                    "objects": objects,
                    "kib": round(retained / 1024, 1),
                    "bytes_per_object": round(retained / objects) if objects else None,
                    "bytes_per_service": round(retained / count),
                }
            )
            progress(f"{measured[-1]}")
    finally:
        tracemalloc.stop()
        await manager.client.close()
    return measured


def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser()
    parser.add_argument("--services", type=int, default=1000)
    parser.add_argument("--tier", choices=["api", "full"], default="api")
    args = parser.parse_args()
    started = time.perf_counter()
    result = asyncio.run(measure(args))
    result["seconds"] = round(time.perf_counter() - started, 1)
    path = save_result(f"cache-memory-N{args.services}", result)
    print(json.dumps(result, indent=2))
    print(f"stored in {path}")


if __name__ == "__main__":
    main()
