"""The GPU queue at scale: the controller's CPU per queue event with W services waiting for GPUs.

The real InferenceServiceController (its informers, stores, indexes, handlers, workqueue, workers,
planner and status writer) runs on one event loop. Only the API server is simulated, because this
measures the controller's own cost: the caches are fed directly (a LIST, then watch events), a
status write is echoed back to the cache as the MODIFIED watch event the API server would send, and
every other apply is compared with the cache (the real compare) and reported unchanged.

Start: W services wait for GPUs (one unschedulable pod each: "Insufficient nvidia.com/gpu"), with
positions already right. Then, one at a time, each event below; for each it reports the process CPU
seconds until the controller is idle again, the wall seconds until every stored queuePosition is
right (the last status write), the reconciles run and the status writes made:

- enter_back:   a new normal-priority service joins at the end (nobody else moves);
- enter_front:  a new high-priority service joins at the front (everybody moves one back);
- leave_middle: the service in the middle is deleted (everybody behind it moves one up);
- reprioritise: the last service's priority becomes critical (it moves to the front).

Usage: .venv/bin/python bench/bench_gpu_queue.py [--waiting 1000 5000] [--workers 4]
Prints one JSON object (progress goes to stderr); stores it with the machine it ran on in
bench/results/gpu-queue-W<sizes>-<time>.json.
"""

import argparse
import asyncio
import copy
import json
import logging
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from prometheus_client import CollectorRegistry
from scale_support import machine_info, save_result

from llmkube.controllers.inferenceservice import InferenceServiceController
from llmkube.controllers.metrics import LLMKubeMetrics
from llmkube.controllers.resources import DEPLOYMENTS, INFERENCE_SERVICES, MODELS, PODS, SERVICES
from llmkube.kube.apply.applier import Applier, ApplyOutcome, ApplyResult
from llmkube.kube.apply.compare import clean_intent, needs_apply
from llmkube.kube.cache import Informer
from llmkube.kube.control import Controller, Reconciler, Watch
from llmkube.kube.resource import Resource
from llmkube.kube.rest import ApiClient
from llmkube.kube.types import Obj, ObjectKey
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.names import selector_labels, service_name

API = "inference.llmkube.dev/v1alpha1"
NAMESPACE = "bench"
GPU = "nvidia.com/gpu"
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
PRIORITIES = {"normal": 10_000, "high": 100_000, "critical": 1_000_000}


def progress(message: str) -> None:
    print(f"[bench_gpu_queue {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class NoNetwork:
    """The transport of a client that must never be used: every request is a bug in the setup."""

    def send(self, method: str, url: str, **_: Any) -> Any:
        raise AssertionError(f"unexpected API request: {method} {url}")

    async def close(self) -> None:
        return None


class SimulatedApi:
    """Echoes status writes back into the cache as MODIFIED watch events, a loop turn later."""

    def __init__(self) -> None:
        self.informers: dict[Resource, Informer] = {}
        self.version = 1000
        self.in_flight = 0
        self.status_writes = 0
        self.last_write = 0.0

    def next_version(self) -> str:
        self.version += 1
        return str(self.version)

    def event(self, resource: Resource, event_type: str, obj: Obj) -> None:
        self.informers[resource].watch_event(event_type, obj)

    def echo(self, resource: Resource, obj: Obj) -> None:
        self.in_flight += 1

        def deliver() -> None:
            self.in_flight -= 1
            self.event(resource, "MODIFIED", obj)

        asyncio.get_running_loop().call_soon(deliver)


class SimulatedApplier(Applier):
    def __init__(self, api: SimulatedApi) -> None:
        super().__init__(ApiClient("https://unused.invalid", transport=NoNetwork()))
        self.api = api

    async def apply(
        self, resource: Resource, desired: Obj, observed: Obj | None = None, **_: Any
    ) -> ApplyResult:
        needs_apply(clean_intent(desired), observed, self.field_manager)  # the real compare's cost
        return ApplyResult(ApplyOutcome.UNCHANGED, observed or desired)

    async def apply_status(self, resource: Resource, desired: Obj, observed: Obj | None) -> ApplyResult:
        assert observed is not None
        stored = {
            **observed,
            "metadata": {**observed["metadata"], "resourceVersion": self.api.next_version()},
            "status": copy.deepcopy(desired["status"]),
        }
        self.api.status_writes += 1
        self.api.last_write = time.perf_counter()
        self.api.echo(resource, stored)
        return ApplyResult(ApplyOutcome.UPDATED, stored, ["status"])


class QuietRecorder:
    def event(self, regarding: Obj, type: str, reason: str, note: str, **_: Any) -> None:
        return None


class SimulatedHost:
    """What a controller needs from its process (`llmkube.controllers.host.ControllerHost`)."""

    def __init__(self, api: SimulatedApi) -> None:
        self.api = api
        self._client = ApiClient("https://unused.invalid", transport=NoNetwork())
        self._applier = SimulatedApplier(api)
        self._recorder = QuietRecorder()
        self.controllers: list[Controller] = []
        self.tasks: list[Callable[[], Coroutine[Any, Any, None]]] = []

    @property
    def client(self) -> ApiClient:
        return self._client

    @property
    def applier(self) -> Applier:
        return self._applier

    @property
    def recorder(self) -> Any:
        return self._recorder

    def informer(self, resource: Resource, **_: Any) -> Informer:
        # One informer per kind: selectors only scope what the simulated API would send.
        if resource not in self.api.informers:
            self.api.informers[resource] = Informer(self._client, resource)
        return self.api.informers[resource]

    def add_controller(
        self,
        name: str,
        reconcile: Reconciler,
        *,
        watches: Sequence[Watch],
        workers: int | None = None,
        **_: Any,
    ) -> Controller:
        controller = Controller(name, reconcile, workers=workers or 1)
        for watch in watches:
            self.informer(watch.resource).add_handler(controller.handler(watch.mapper, watch.predicates))
        self.controllers.append(controller)
        return controller

    def add_task(self, name: str, task: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self.tasks.append(task)


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def service(index: int, priority: str = "normal", status: Obj | None = None) -> Obj:
    name = f"svc-{index:05d}"
    obj: Obj = {
        "apiVersion": API,
        "kind": "InferenceService",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": f"uid-{name}",
            "generation": 1,
            "resourceVersion": "1",
            "creationTimestamp": stamp(EPOCH + timedelta(seconds=index)),
        },
        "spec": {
            "modelRef": "gpu-model",
            "skipModelInit": True,
            "resources": {"gpu": 1},
            "priority": priority,
        },
    }
    if status is not None:
        obj["status"] = status
    return obj


def owner(svc: Obj) -> Obj:
    meta = svc["metadata"]
    return {
        "apiVersion": API,
        "kind": "InferenceService",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
    }


def children(svc: Obj) -> tuple[Obj, Obj, Obj]:
    """The service's Deployment and Service as the cache would hold them, and its unschedulable pod."""
    name = svc["metadata"]["name"]
    meta = {"namespace": NAMESPACE, "resourceVersion": "1", "ownerReferences": [owner(svc)]}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "uid": f"deploy-{name}", **meta},
        "spec": {"replicas": 1, "selector": {"matchLabels": selector_labels(name)}},
        "status": {"replicas": 1, "unavailableReplicas": 1},
    }
    k8s_service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": service_name(name), "uid": f"svc-{name}", **meta},
        "spec": {"ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-pod",
            "namespace": NAMESPACE,
            "uid": f"pod-{name}",
            "resourceVersion": "1",
            "labels": {"inference.llmkube.dev/service": name, **selector_labels(name)},
        },
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": f"0/3 nodes are available: 3 Insufficient {GPU}.",
                }
            ],
        },
    }
    return deployment, k8s_service, pod


GPU_MODEL: Obj = {
    "apiVersion": API,
    "kind": "Model",
    "metadata": {"name": "gpu-model", "namespace": NAMESPACE, "uid": "model-uid", "resourceVersion": "1"},
    "spec": {"source": "bench-org/gpu-model", "hardware": {"accelerator": "cuda"}},
    "status": {"phase": "Ready", "cacheKey": ""},
}


def right_positions(services: list[Obj]) -> bool:
    """Every waiting service's stored queuePosition is its rank: priority desc, then age, then name."""
    waiting = [s for s in services if (s.get("status") or {}).get("phase") == "WaitingForGPU"]
    waiting.sort(
        key=lambda s: (
            -s["status"].get("effectivePriority", 0),
            s["metadata"]["creationTimestamp"],
            s["metadata"]["name"],
        )
    )
    return all(s["status"].get("queuePosition") == rank for rank, s in enumerate(waiting, 1))


class Bench:
    def __init__(self, waiting: int, workers: int) -> None:
        self.waiting = waiting
        self.api = SimulatedApi()
        self.host = SimulatedHost(self.api)
        self.isvcs = InferenceServiceController(
            self.host, OperatorConfig(), LLMKubeMetrics(CollectorRegistry()), workers
        )
        self.controller = self.isvcs.controller
        self.running: list[asyncio.Task[None]] = []
        self.reconciles = 0
        inner = self.controller._reconcile

        async def counted(key: ObjectKey) -> Any:
            self.reconciles += 1
            return await inner(key)

        self.controller._reconcile = counted

    def idle(self) -> bool:
        return (
            len(self.controller.queue) == 0
            and self.controller.queue.processing() == 0
            and self.api.in_flight == 0
        )

    async def until_idle(self, limit: float = 3600) -> None:
        started = time.perf_counter()
        while not self.idle():
            if time.perf_counter() - started > limit:
                raise TimeoutError(f"the controller was still busy after {limit}s")
            await asyncio.sleep(0.02)

    async def start(self) -> float:
        """The initial LIST: W waiting services with their positions; returns CPU seconds to settle."""
        services = []
        deployments, k8s_services, pods = [], [], []
        for index in range(self.waiting):
            svc = service(
                index,
                status={
                    "phase": "WaitingForGPU",
                    "effectivePriority": PRIORITIES["normal"],
                    "queuePosition": index + 1,
                },
            )
            services.append(svc)
            deployment, k8s_service, pod = children(svc)
            deployments.append(deployment)
            k8s_services.append(k8s_service)
            pods.append(pod)
        informers = self.api.informers
        for informer in informers.values():
            informer.replace([], "1")
        informers[MODELS].replace([GPU_MODEL], "1")
        informers[DEPLOYMENTS].replace(deployments, "1")
        informers[SERVICES].replace(k8s_services, "1")
        informers[PODS].replace(pods, "1")
        cpu = time.process_time()
        informers[INFERENCE_SERVICES].replace(services, "1")
        self.running = [asyncio.get_running_loop().create_task(task()) for task in self.host.tasks]
        self.controller.start()
        await self.until_idle()
        assert right_positions(informers[INFERENCE_SERVICES].store.objects()), "initial positions wrong"
        return time.process_time() - cpu

    async def measure(self, name: str, act: Callable[[], None]) -> dict[str, Any]:
        await self.until_idle()
        reconciles, writes = self.reconciles, self.api.status_writes
        cpu, wall = time.process_time(), time.perf_counter()
        self.api.last_write = wall
        act()
        await self.until_idle()
        cpu_seconds = time.process_time() - cpu
        store = self.api.informers[INFERENCE_SERVICES].store
        assert right_positions(store.objects()), f"{name}: positions wrong once idle"
        result = {
            "cpu_seconds": round(cpu_seconds, 3),
            "seconds_until_positions_right": round(self.api.last_write - wall, 3),
            "reconciles": self.reconciles - reconciles,
            "status_writes": self.api.status_writes - writes,
        }
        progress(f"W={self.waiting} {name}: {result}")
        return result

    def add_service(self, index: int, priority: str) -> None:
        svc = service(index, priority)
        for resource, child in zip((DEPLOYMENTS, SERVICES, PODS), children(svc), strict=True):
            self.api.event(resource, "ADDED", child)
        self.api.event(INFERENCE_SERVICES, "ADDED", svc)

    def delete_service(self, index: int) -> None:
        store = self.api.informers[INFERENCE_SERVICES].store
        svc = store.get_object(NAMESPACE, f"svc-{index:05d}")
        assert svc is not None
        self.api.event(INFERENCE_SERVICES, "DELETED", svc)

    def reprioritise(self, index: int, priority: str) -> None:
        store = self.api.informers[INFERENCE_SERVICES].store
        svc = store.get_object(NAMESPACE, f"svc-{index:05d}")
        assert svc is not None
        meta = {**svc["metadata"], "generation": 2, "resourceVersion": self.api.next_version()}
        self.api.event(
            INFERENCE_SERVICES,
            "MODIFIED",
            {**svc, "metadata": meta, "spec": {**svc["spec"], "priority": priority}},
        )

    async def run(self) -> dict[str, Any]:
        progress(f"W={self.waiting}: initial sync")
        initial = await self.start()
        progress(f"W={self.waiting}: initial sync took {initial:.1f} s CPU")
        w = self.waiting
        events = {
            "enter_back": await self.measure("enter_back", lambda: self.add_service(w, "normal")),
            "enter_front": await self.measure("enter_front", lambda: self.add_service(w + 1, "high")),
            "leave_middle": await self.measure("leave_middle", lambda: self.delete_service(w // 2)),
            "reprioritise": await self.measure("reprioritise", lambda: self.reprioritise(w - 1, "critical")),
        }
        await self.controller.stop(grace=5)
        for task in self.running:
            task.cancel()
        await asyncio.gather(*self.running, return_exceptions=True)
        return {"initial_sync_cpu_seconds": round(initial, 2), "events": events}


async def run(sizes: list[int], workers: int) -> dict[str, Any]:
    results = {}
    for waiting in sizes:
        results[str(waiting)] = await Bench(waiting, workers).run()
    return {"benchmark": "gpu_queue_events", "workers": workers, "waiting": results}


def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser()
    parser.add_argument("--waiting", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    record = asyncio.run(run(args.waiting, args.workers)) | {"machine": machine_info()}
    save_result("gpu-queue-W" + "-".join(map(str, args.waiting)), record)
    print(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
