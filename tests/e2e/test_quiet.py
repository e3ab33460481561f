"""Idempotent and quiet (docs/architecture.md): once converged, reconciling every service
again makes no write at all, and neither does a freshly started controller."""

from typing import Any

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
    restarted_controller,
    settled,
    status_of,
    writes_quiesce,
)

from llmkube.kube.types import ObjectKey
from llmkube.plan.inferenceservice.drain import DRAIN_TIMEOUT_ANNOTATION, ROLLOUT_ANNOTATION

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
    "drained": ("Ready", 1),
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
        drained(isvc("drained", modelRef="hf", skipModelInit=True)),  # a preStop hook, a grace period
    ]
    for service in services:
        admin.create(service, namespace=ns)


def drained(service: dict[str, Any]) -> dict[str, Any]:
    service["metadata"]["annotations"] = {ROLLOUT_ANNOTATION: "drain", DRAIN_TIMEOUT_ANNOTATION: "90s"}
    return service


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

        # 1. Reconcile every service and Model again: zero mutating requests. Each reconcile runs
        # (its count moves), its status write would be made inside it, and its Events are written
        # by the time the recorder drained: only then does "no write" mean something.
        service_keys = [ObjectKey(ns, name) for name in EXPECTED]
        model_keys = [ObjectKey(ns, name) for name in ("hf", "cuda", "remote")]
        counts, model_counts = reconcile_log(isvcs), reconcile_log(models)
        before = {key: counts(key) for key in service_keys} | {key: model_counts(key) for key in model_keys}
        writes = operator.mutating_requests()
        await reconcile_now(isvcs, *service_keys)
        await reconcile_now(models, *model_keys)
        await operator.manager.recorder.drain()
        assert all(counts(key) > before[key] for key in service_keys)
        assert all(model_counts(key) > before[key] for key in model_keys)
        assert operator.mutating_requests() == writes

        # 2. A freshly started controller (its own client, caches and queues, watching only this
        # namespace) finds nothing to do: zero mutating requests once it has reconciled everything.
        async with restarted_controller(operator, ns) as restarted:
            logs = reconcile_log(restarted.controllers.inference_services.controller)
            model_logs = reconcile_log(restarted.controllers.models.controller)
            await poll(
                lambda: (
                    all(logs(key) >= 1 for key in service_keys)
                    and all(model_logs(key) >= 1 for key in model_keys)
                ),
                what="every service and Model reconciled once",
            )
            await restarted.idle()
            assert restarted.mutating_requests() == 0, sorted(restarted.requests.request_counts.items())
            assert restarted.requests.total_requests() > 0  # it did read (list + watch)
        assert operator.mutating_requests() == writes
    finally:
        await delete_services_and_wait(operator, ns, pods_too=True)
