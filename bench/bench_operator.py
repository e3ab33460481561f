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
from contextlib import AbstractAsyncContextManager
from typing import Any

import structlog
from llmkube_testing.cluster import LocalCluster
from llmkube_testing.controller_harness import ControllerHarness, controller_running, reconcile_log
from llmkube_testing.rest import KubeRest, wait_until

from llmkube.api.crds import all_crds
from llmkube.controllers.resources import DEPLOYMENTS, INFERENCE_SERVICES, MODELS, SERVICES
from llmkube.controllers.setup import ControllersConfig
from llmkube.kube.types import ObjectKey
from llmkube.manager import Manager
from llmkube.plan.inferenceservice.config import OperatorConfig

API = "inference.llmkube.dev/v1alpha1"
NAMESPACE = "bench"


def controllers_config(workers: int) -> ControllersConfig:
    return ControllersConfig(
        operator=OperatorConfig(model_cache_path=""),  # emptyDir mode: no PVC to bind on tier api
        isvc_workers=workers,
    )


def running(cluster: LocalCluster, workers: int) -> AbstractAsyncContextManager[ControllerHarness]:
    """The whole operator in this process (llmkube_testing.controller_harness), as the admin."""
    return controller_running(cluster.kubeconfig, controllers_config(workers), log_level="warning")


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

        async with running(cluster, workers) as operator:
            manager = operator.manager
            created = time.perf_counter()
            await asyncio.to_thread(create_objects, admin, count)
            create_seconds = time.perf_counter() - created
            converge_seconds = (
                await poll(lambda: converged(manager, count), 600, "convergence") + create_seconds
            )
            await operator.idle()  # the last reconciles done, their Events written
            requests = operator.requests.by_method()

            # Everything again, nothing changed: zero writes.
            before = operator.mutating_requests()
            controller = operator.controllers.inference_services.controller
            log = reconcile_log(controller)
            keys = [ObjectKey.of(obj) for obj in manager.informer(INFERENCE_SERVICES).store.objects()]
            reconciled = {key: log(key) for key in keys}
            for key in keys:
                controller.enqueue(key)
            rerun_started = time.perf_counter()
            await poll(
                lambda: all(log(key) > reconciled[key] for key in keys), 120, "every service reconciled"
            )
            await operator.idle()
            rerun_writes = operator.mutating_requests() - before
            rerun_seconds = time.perf_counter() - rerun_started
            rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

        # A restarted controller against the converged cluster: zero writes once it has reconciled
        # every service.
        restart_started = time.perf_counter()
        async with running(cluster, workers) as restarted:
            synced_seconds = time.perf_counter() - restart_started
            log = reconcile_log(restarted.controllers.inference_services.controller)
            await poll(lambda: all(log(key) >= 1 for key in keys), 120, "every service reconciled")
            await restarted.idle()
            restart_writes = restarted.mutating_requests()

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
