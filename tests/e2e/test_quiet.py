"""Idempotent and quiet (docs/architecture.md): once converged, reconciling every service
again makes no write at all, and neither does a freshly started controller."""

import asyncio
from typing import Any

import pytest
from e2e_support import (
    RunningController,
    delete_services_and_wait,
    eventually_equal,
    gpus_idle,
    hf_model,
    isvc,
    model,
    poll,
    reconcile_log,
    reconcile_now,
    settled,
    status_of,
    writes_quiesce,
)

from llmkube.controllers.setup import Controllers, ControllersConfig, setup_controllers
from llmkube.kube.types import ObjectKey
from llmkube.manager import Manager, ManagerConfig

# name -> (phase, running pods) once converged
EXPECTED = {
    "cpu": ("Ready", 1),
    "cached": ("Ready", 1),
    "gen": ("Ready", 1),
    "auto": ("Ready", 1),
    "stopped": ("Stopped", 0),
    "gpu": ("Ready", 1),
    "waiting": ("WaitingForGPU", 0),
    "never": ("Creating", 0),  # Unschedulable: more GPUs than any node has
    "vllm": ("Ready", 1),
    "tgi": ("Ready", 1),
}


def create_everything(admin: Any, ns: str) -> None:
    admin.create(hf_model("hf"), namespace=ns)
    admin.create(hf_model("cuda", hardware={"accelerator": "cuda"}), namespace=ns)
    admin.create(model("remote", source="https://models.invalid/quiet.gguf"), namespace=ns)
    services = [
        isvc("cpu", modelRef="hf", skipModelInit=True, resources={"cpu": "500m", "memory": "512Mi"}),
        isvc("cached", modelRef="remote", contextSize=2048, parallelSlots=2),  # init container + cache claim
        isvc(
            "gen",
            modelRef="hf",
            runtime="generic",
            image="registry.invalid/server:1",
            args=["--port", "8080"],
            env=[{"name": "EMPTY", "value": ""}, {"name": "A", "value": "1"}],
            podLabels={"team": "quiet"},
            podAnnotations={"note": "x"},
            endpoint={"port": 8080, "type": "NodePort"},
            tolerations=[{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
        ),
        isvc("auto", modelRef="hf", skipModelInit=True, autoscaling={"maxReplicas": 3}),
        isvc("stopped", modelRef="hf", skipModelInit=True, replicas=0),
        # Only kwok-gpu-0 has two GPUs: `gpu` holds them (a normal service cannot preempt it).
        isvc("gpu", modelRef="cuda", skipModelInit=True, resources={"gpu": 2}, priority="high"),
        isvc("waiting", modelRef="cuda", skipModelInit=True, resources={"gpu": 2}),
        isvc("never", modelRef="cuda", skipModelInit=True, resources={"gpu": 4}),
        isvc("vllm", modelRef="hf", runtime="vllm", skipModelInit=True, endpoint={"port": 8000}),
        isvc("tgi", modelRef="hf", runtime="tgi", skipModelInit=True, endpoint={"port": 80}),
    ]
    for service in services:
        admin.create(service, namespace=ns)


def phases(admin: Any, ns: str) -> dict[str, tuple[Any, Any]]:
    return {
        name: (status.get("phase"), status.get("replicas"))
        for name in EXPECTED
        for status in [status_of(admin, "InferenceService", name, ns)]
    }


async def test_a_converged_namespace_makes_no_write_on_reconcile_or_restart(
    operator: RunningController, full_namespace: str
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    isvcs = operator.controllers.inference_services.controller
    models = operator.controllers.models.controller
    await gpus_idle(admin)
    create_everything(admin, ns)
    try:
        await eventually_equal(lambda: phases(admin, ns), EXPECTED, within=90, what="every service settled")
        await settled(isvcs)
        await settled(models)
        await writes_quiesce(operator)

        # 1. Reconcile every service and Model again: zero mutating requests.
        service_keys = [ObjectKey(ns, name) for name in EXPECTED]
        model_keys = [ObjectKey(ns, name) for name in ("hf", "cuda", "remote")]
        counts = reconcile_log(isvcs)
        before = {key: counts(key) for key in service_keys}
        writes = operator.mutating_requests()
        await reconcile_now(isvcs, *service_keys)
        await reconcile_now(models, *model_keys)
        await asyncio.sleep(1.0)  # events are written in the background: give them the chance
        await operator.manager.recorder.drain()
        assert all(counts(key) > before[key] for key in service_keys)
        assert operator.mutating_requests() == writes

        # 2. A freshly started controller (its own client, caches and queues, watching only this
        # namespace) finds nothing to do: zero mutating requests.
        restarted = await start_second_controller(operator, ns)
        manager, controllers = restarted
        try:
            logs = reconcile_log(controllers.inference_services.controller)
            await poll(
                lambda: all(logs(key) >= 1 for key in service_keys), what="every service reconciled once"
            )
            for controller in (
                controllers.inference_services.controller,
                controllers.models.controller,
                controllers.priority_classes.controller,
            ):
                await settled(controller)
            await asyncio.sleep(1.0)
            await manager.recorder.drain()
            assert manager.client.mutating_requests() == 0, sorted(manager.client.request_counts.items())
            assert manager.client.total_requests() > 0  # it did read (list + watch)
        finally:
            await stop(manager)
        assert operator.mutating_requests() == writes
    finally:
        await delete_services_and_wait(operator, ns, pods_too=True)


_RUNNING: dict[Manager, "asyncio.Task[None]"] = {}


async def start_second_controller(operator: RunningController, namespace: str) -> tuple[Manager, Controllers]:
    """The whole controller again, as at a restart, but scoped to one namespace; leader election
    off (the session's controller keeps running, and must not be the one that writes either)."""
    assert operator.cluster.controller_kubeconfig is not None
    manager = Manager(
        ManagerConfig(
            kubeconfig=operator.cluster.controller_kubeconfig,
            namespace=namespace,
            leader_election=False,
            metrics_bind_address="0",
            health_bind_address="0",
            configure_logging=False,
            handle_signals=False,
            graceful_shutdown_timeout=10,
        )
    )
    # The same configuration as the session's controller: a restart changes nothing else.
    config = ControllersConfig(
        operator=operator.controllers.inference_services.config, model=operator.controllers.models.config
    )
    holder: dict[str, Controllers] = {}

    def setup(m: Manager) -> None:
        holder["controllers"] = setup_controllers(m, config)
        reconcile_log(holder["controllers"].inference_services.controller)  # count from the first one

    task = asyncio.create_task(manager.run(setup))
    _RUNNING[manager] = task
    try:
        async with asyncio.timeout(60):
            await manager.controllers_started.wait()
    except TimeoutError:
        await stop(manager)
        raise
    return manager, holder["controllers"]


async def stop(manager: Manager) -> None:
    manager.request_shutdown()
    task = _RUNNING.pop(manager)
    await asyncio.wait_for(task, timeout=30)


@pytest.fixture(autouse=True)
def _no_leftover_managers() -> Any:
    yield
    assert not _RUNNING, "a second controller was left running"
