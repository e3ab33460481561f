"""End-to-end controller throughput against a real kube-apiserver (tier "api").

Creates N Models and N InferenceServices, runs the whole operator in-process, and measures:
- time until every service has its Deployment and Service and a written status (converged);
- API requests per service, by method (how quiet the controller is);
- mutating requests when every service is reconciled again with nothing changed (must be 0);
- mutating requests of a restarted controller against the converged cluster (must be 0);
- process RSS after convergence.

Usage: .venv/bin/python bench/bench_operator.py [--services 200] [--workers 4]
Prints one JSON object. Needs the binaries from hack/build-k8s.sh.
"""

import argparse
import asyncio
import json
import logging
import resource
import time
from collections import Counter
from typing import Any

import structlog

from llmkube.api.crds import all_crds
from llmkube.controllers.resources import DEPLOYMENTS, INFERENCE_SERVICES, MODELS, SERVICES
from llmkube.controllers.setup import ControllersConfig, setup_controllers
from llmkube.kube.types import ObjectKey
from llmkube.manager import Manager, ManagerConfig
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.testing.cluster import LocalCluster
from llmkube.testing.rest import KubeRest, wait_until

API = "inference.llmkube.dev/v1alpha1"
NAMESPACE = "bench"


def manager_for(cluster: LocalCluster) -> Manager:
    return Manager(
        ManagerConfig(
            kubeconfig=cluster.kubeconfig,
            metrics_bind_address="0",
            health_bind_address="0",
            configure_logging=False,
            handle_signals=False,
            log_level="warning",
        )
    )


def setup_for(workers: int) -> Any:
    config = ControllersConfig(
        operator=OperatorConfig(model_cache_path=""),  # emptyDir mode: no PVC to bind on tier api
        isvc_workers=workers,
    )
    holder: dict[str, Any] = {}

    def setup(manager: Manager) -> None:
        holder["controllers"] = setup_controllers(manager, config)

    return setup, holder


def create_objects(admin: KubeRest, count: int) -> None:
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    for i in range(count):
        name = f"svc-{i:04d}"
        admin.create(
            {
                "apiVersion": API,
                "kind": "Model",
                "metadata": {"name": name},
                "spec": {"source": f"https://models.invalid/{name}.gguf"},
            },
            namespace=NAMESPACE,
        )
        admin.create(
            {
                "apiVersion": API,
                "kind": "InferenceService",
                "metadata": {"name": name},
                "spec": {"modelRef": name, "contextSize": 4096, "resources": {"cpu": "1", "memory": "2Gi"}},
            },
            namespace=NAMESPACE,
        )


def converged(manager: Manager, count: int) -> bool:
    services = manager.informer(INFERENCE_SERVICES).store.objects()
    if len(services) < count:
        return False
    deployments = manager.informer(DEPLOYMENTS, label_selector="app.kubernetes.io/managed-by=llmkube").store
    k8s_services = manager.informer(SERVICES, label_selector="app.kubernetes.io/managed-by=llmkube").store
    models = manager.informer(MODELS).store
    for obj in services:
        name = obj["metadata"]["name"]
        if (obj.get("status") or {}).get("phase") != "Creating":
            return False
        if (
            deployments.get_object(NAMESPACE, name) is None
            or k8s_services.get_object(NAMESPACE, name) is None
        ):
            return False
        if ((models.get_object(NAMESPACE, name) or {}).get("status") or {}).get("phase") != "Ready":
            return False
    return True


async def poll(predicate: Any, limit: float, what: str) -> float:
    """Seconds until `predicate()` holds (checked every 50 ms), at most `limit`."""
    started = time.perf_counter()
    while not predicate():
        if time.perf_counter() - started > limit:
            raise TimeoutError(f"{what} did not happen within {limit}s")
        await asyncio.sleep(0.05)
    return time.perf_counter() - started


async def run(count: int, workers: int) -> dict[str, Any]:
    with LocalCluster("api") as cluster:
        admin = cluster.admin()
        for crd in all_crds():
            admin.apply(crd)
        admin.forget_discovery()
        wait_until(lambda: admin.get_text(f"/apis/{API}/models")[0] == 200, timeout=30, what="CRDs served")

        manager = manager_for(cluster)
        setup, holder = setup_for(workers)
        task = asyncio.create_task(manager.run(setup))
        await manager.controllers_started.wait()

        created = time.perf_counter()
        await asyncio.to_thread(create_objects, admin, count)
        create_seconds = time.perf_counter() - created
        converge_seconds = await poll(lambda: converged(manager, count), 600, "convergence") + create_seconds
        await asyncio.sleep(2)  # let the last status events arrive
        by_method = Counter[str]()
        for (method, _code), n in manager.client.request_counts.items():
            by_method[method] += n
        requests = dict(by_method)

        # Everything again, nothing changed: zero writes.
        before = manager.client.mutating_requests()
        controller = holder["controllers"].inference_services.controller
        for obj in manager.informer(INFERENCE_SERVICES).store.objects():
            controller.enqueue(ObjectKey.of(obj))
        rerun_started = time.perf_counter()
        await poll(lambda: len(controller.queue) == 0, 120, "draining the queue")
        await asyncio.sleep(2)
        rerun_writes = manager.client.mutating_requests() - before
        rerun_seconds = time.perf_counter() - rerun_started
        rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

        manager.request_shutdown()
        await task

        # A restarted controller against the converged cluster: zero writes.
        restarted = manager_for(cluster)
        restart_setup, _ = setup_for(workers)
        restart_task = asyncio.create_task(restarted.run(restart_setup))
        restart_started = time.perf_counter()
        await restarted.controllers_started.wait()
        synced_seconds = time.perf_counter() - restart_started
        await asyncio.sleep(5)
        restart_writes = restarted.client.mutating_requests()
        restarted.request_shutdown()
        await restart_task

    return {
        "benchmark": "operator_converge_api_tier",
        "services": count,
        "workers": workers,
        "create_seconds": round(create_seconds, 2),
        "converge_seconds": round(converge_seconds, 2),
        "services_per_second": round(count / converge_seconds, 1),
        "requests_by_method": requests,
        "requests_per_service": round(sum(requests.values()) / count, 2),
        "writes_per_service": round(sum(n for m, n in requests.items() if m != "GET") / count, 2),
        "rerun_all_mutating_requests": rerun_writes,
        "rerun_window_seconds": round(rerun_seconds, 1),
        "restart_cache_sync_seconds": round(synced_seconds, 2),
        "restart_mutating_requests": restart_writes,
        "max_rss_mib": round(rss_mib, 1),
    }


def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser()
    parser.add_argument("--services", type=int, default=200)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.services, args.workers)), indent=2))


if __name__ == "__main__":
    main()
