"""GPUs on the kwok nodes (kwok-gpu-0: 2, kwok-gpu-1: 1, both tainted): a service that fits runs
on a GPU node; one that cannot fit waits in the GPU queue, ranked by priority then age;
freeing GPUs lets a waiting service schedule and moves everybody behind it up."""

from datetime import UTC, datetime
from typing import Any

from e2e_support import (
    API,
    GPU,
    GPU_TOLERATION,
    RunningController,
    StatusWatch,
    condition_triple,
    delete_services_and_wait,
    eventually,
    eventually_equal,
    gpus_idle,
    hf_model,
    isvc,
    patch_isvc,
    phase_is,
    poll,
    settled,
    status_of,
)
from prometheus_client import REGISTRY


def gpu_service(name: str, gpus: int, **spec: Any) -> dict[str, Any]:
    return isvc(name, modelRef="gpu-model", skipModelInit=True, resources={"gpu": gpus}, **spec)


def created_at(admin: Any, name: str, namespace: str) -> datetime:
    stamp = admin.get(API, "InferenceService", name, namespace)["metadata"]["creationTimestamp"]
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


async def a_second_later(admin: Any, name: str, namespace: str) -> None:
    """creationTimestamp has one-second resolution: wait until the next object is strictly younger."""
    stamp = created_at(admin, name, namespace)
    await eventually(
        lambda: (datetime.now(UTC) - stamp).total_seconds() >= 1.05, what=f"a second after {name}"
    )


def the_pod(admin: Any, name: str, namespace: str) -> dict[str, Any]:
    (pod,) = admin.list("v1", "Pod", namespace, label_selector=f"inference.llmkube.dev/service={name}")
    return pod


async def free_the_pods_of(operator: RunningController, name: str, namespace: str) -> None:
    """Once the controller has forgotten the deleted service, delete its Deployment as the garbage
    collector would: the collector's first pass over a CRD's dependents can wait for its 30 s
    discovery resync, and garbage collection is not what this test is about (see test_isvc_lifecycle)."""
    store = operator.controllers.inference_services.services.store
    await poll(lambda: store.get_object(namespace, name) is None, what=f"{name} gone from the cache")
    operator.cluster.admin().delete("apps/v1", "Deployment", name, namespace)


def wait_count(namespace: str, name: str) -> float | None:
    labels = {"inferenceservice": name, "namespace": namespace}
    return REGISTRY.get_sample_value("llmkube_gpu_queue_wait_duration_seconds_count", labels)


def waited_once(namespace: str, name: str) -> bool:
    """The service's time in the queue was observed exactly once, and is a plausible duration."""
    labels = {"inferenceservice": name, "namespace": namespace}
    total = REGISTRY.get_sample_value("llmkube_gpu_queue_wait_duration_seconds_sum", labels)
    return wait_count(namespace, name) == 1 and total is not None and 0 < total < 600


def queue(admin: Any, namespace: str) -> dict[str, int]:
    """name -> queuePosition of the services of this namespace that are WaitingForGPU."""
    return {
        s["metadata"]["name"]: s["status"].get("queuePosition")
        for s in admin.list(API, "InferenceService", namespace)
        if (s.get("status") or {}).get("phase") == "WaitingForGPU"
    }


async def test_gpu_services_run_on_gpu_nodes_and_wait_in_a_priority_queue(
    operator: RunningController, full_namespace: str
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    await gpus_idle(admin)
    admin.create(hf_model("gpu-model", hardware={"accelerator": "cuda"}), namespace=ns)
    # The GPU count from the Model (hardware.gpu.count) wins over the service's resources.gpu.
    admin.create(
        hf_model("two-gpu-model", hardware={"accelerator": "cuda", "gpu": {"count": 2}}), namespace=ns
    )
    try:
        # 1. Two GPUs from the Model: only kwok-gpu-0 has two.
        admin.create(
            isvc("big", modelRef="two-gpu-model", skipModelInit=True, resources={"gpu": 1}), namespace=ns
        )
        big = await eventually(phase_is(admin, "InferenceService", "big", ns, "Ready"), what="big Ready")
        assert (big["readyReplicas"], big["desiredReplicas"]) == (1, 1)
        pod = the_pod(admin, "big", ns)
        assert pod["spec"]["nodeName"] == "kwok-gpu-0"
        (container,) = pod["spec"]["containers"]
        assert container["resources"]["limits"] == {GPU: "2"}
        assert GPU_TOLERATION in pod["spec"]["tolerations"]
        assert container["args"][container["args"].index("--n-gpu-layers") + 1] == "99"
        assert container["args"][container["args"].index("--tensor-split") + 1] == "1,1"
        deployment = admin.get("apps/v1", "Deployment", "big", ns)
        assert deployment["spec"]["strategy"]["type"] == "Recreate"

        # 2. One GPU from the service: the last free one, on kwok-gpu-1.
        admin.create(gpu_service("small", 1), namespace=ns)
        await eventually(phase_is(admin, "InferenceService", "small", ns, "Ready"), what="small Ready")
        pod = the_pod(admin, "small", ns)
        assert pod["spec"]["nodeName"] == "kwok-gpu-1"
        assert pod["spec"]["containers"][0]["resources"]["limits"] == {GPU: "1"}

        # 3. Every GPU is taken: an older normal service waits...
        admin.create(gpu_service("older-normal", 1), namespace=ns)
        waiting = await eventually(
            phase_is(admin, "InferenceService", "older-normal", ns, "WaitingForGPU"),
            what="older-normal WaitingForGPU",
        )
        assert waiting["queuePosition"] == 1
        assert waiting["waitingFor"] == f"{GPU}: 1"
        # ...then a younger normal one that needs two GPUs on one node...
        await a_second_later(admin, "older-normal", ns)
        admin.create(gpu_service("younger-normal", 2), namespace=ns)
        await eventually_equal(
            lambda: queue(admin, ns), {"older-normal": 1, "younger-normal": 2}, what="the GPU queue"
        )
        # ...then the youngest, with priority high and more GPUs than any node has: it goes first.
        await a_second_later(admin, "younger-normal", ns)
        watch = StatusWatch(admin, "InferenceService", "urgent", ns).start()
        try:
            admin.create(gpu_service("urgent", 4, priority="high"), namespace=ns)
            await eventually_equal(
                lambda: queue(admin, ns),
                {"urgent": 1, "older-normal": 2, "younger-normal": 3},
                what="the GPU queue",
            )
        finally:
            watch.stop()
        # The position is right on the very first WaitingForGPU write (the reference's said 0).
        urgent_history = [s for s in watch.statuses if s.get("phase") == "WaitingForGPU"]
        assert urgent_history and {s["queuePosition"] for s in urgent_history} == {1}

        urgent = status_of(admin, "InferenceService", "urgent", ns)
        assert {k: urgent[k] for k in ("phase", "schedulingStatus", "waitingFor", "queuePosition")} == {
            "phase": "WaitingForGPU",
            "schedulingStatus": "InsufficientGPU",
            "waitingFor": f"{GPU}: 4",
            "queuePosition": 1,
        }
        assert f"Insufficient {GPU}" in urgent["schedulingMessage"]
        assert (urgent["readyReplicas"], urgent["desiredReplicas"], urgent["effectivePriority"]) == (
            0,
            1,
            100000,
        )
        assert condition_triple(urgent, "Available") == (
            "False",
            "WaitingForGPU",
            "No replica is ready: waiting for GPU resources",
        )
        assert condition_triple(urgent, "Progressing") == (
            "True",
            "WaitingForGPU",
            "Queued at position 1 waiting for GPU",
        )
        assert condition_triple(urgent, "GPUAvailable") == (
            "False",
            "InsufficientGPU",
            f"Waiting for GPU resources: {GPU}: 4",
        )
        older = status_of(admin, "InferenceService", "older-normal", ns)
        assert condition_triple(older, "Progressing") == (
            "True",
            "WaitingForGPU",
            "Queued at position 2 waiting for GPU",
        )
        assert the_pod(admin, "urgent", ns)["spec"]["priorityClassName"] == "llmkube-high"

        # 4. Deleting `small` frees kwok-gpu-1: the one-GPU service schedules there; the others
        # move up (urgent cannot fit anywhere, younger-normal needs two GPUs on one node).
        admin.delete(API, "InferenceService", "small", ns)
        await free_the_pods_of(operator, "small", ns)
        ready = await eventually(
            phase_is(admin, "InferenceService", "older-normal", ns, "Ready"),
            within=60,
            what="older-normal Ready once small is gone",
        )
        assert "queuePosition" not in ready  # QUEUE blank once it no longer waits
        await poll(lambda: waited_once(ns, "older-normal"), what="older-normal's queue wait observed")
        assert condition_triple(ready, "GPUAvailable") == (
            "True",
            "NotWaitingForGPU",
            "Not waiting for GPU resources",
        )
        assert the_pod(admin, "older-normal", ns)["spec"]["nodeName"] == "kwok-gpu-1"
        await eventually_equal(
            lambda: queue(admin, ns), {"urgent": 1, "younger-normal": 2}, what="the GPU queue"
        )
        younger = status_of(admin, "InferenceService", "younger-normal", ns)
        assert condition_triple(younger, "Progressing") == (
            "True",
            "WaitingForGPU",
            "Queued at position 2 waiting for GPU",
        )
        assert REGISTRY.get_sample_value("llmkube_gpu_queue_depth") == 2  # a count, not a position
    finally:
        # The queue and the GPUs are cluster-wide: leave them empty for the next test.
        await delete_services_and_wait(operator, ns, pods_too=True)
        await gpus_idle(admin)


async def test_the_queue_follows_priority_changes_and_services_leaving_the_middle(
    operator: RunningController, full_namespace: str
) -> None:
    """Transitions of a running queue: a waiting service's priority changes, one in the middle is
    deleted, another in the middle is stopped; every other service's position follows.
    Four GPUs fit on no node, so these services wait whatever else runs."""
    admin = operator.cluster.admin()
    ns = full_namespace
    await gpus_idle(admin)
    admin.create(hf_model("gpu-model", hardware={"accelerator": "cuda"}), namespace=ns)
    try:
        for index, name in enumerate(("w1", "w2", "w3", "w4")):
            if index:
                await a_second_later(admin, f"w{index}", ns)
            admin.create(gpu_service(name, 4), namespace=ns)
            await eventually(
                phase_is(admin, "InferenceService", name, ns, "WaitingForGPU"), what=f"{name} waiting"
            )
        await eventually_equal(
            lambda: queue(admin, ns), {"w1": 1, "w2": 2, "w3": 3, "w4": 4}, what="the GPU queue"
        )

        # 1. The youngest becomes high priority while it waits: it goes first, the others move back.
        patch_isvc(admin, "w4", ns, {"priority": "high"})
        await eventually_equal(
            lambda: queue(admin, ns), {"w4": 1, "w1": 2, "w2": 3, "w3": 4}, what="the GPU queue"
        )
        w4 = status_of(admin, "InferenceService", "w4", ns)
        assert w4["effectivePriority"] == 100_000
        assert condition_triple(w4, "Progressing") == (
            "True",
            "WaitingForGPU",
            "Queued at position 1 waiting for GPU",
        )

        # 2. The service in the middle is deleted: the ones behind it move up.
        admin.delete(API, "InferenceService", "w1", ns)
        await eventually_equal(lambda: queue(admin, ns), {"w4": 1, "w2": 2, "w3": 3}, what="the GPU queue")

        # 3. The next one in the middle is stopped (replicas 0): it leaves the queue, w3 moves up.
        watch = StatusWatch(admin, "InferenceService", "w2", ns).start()
        try:
            patch_isvc(admin, "w2", ns, {"replicas": 0})
            stopped = await eventually(
                phase_is(admin, "InferenceService", "w2", ns, "Stopped"), what="w2 Stopped"
            )
            await eventually_equal(lambda: queue(admin, ns), {"w4": 1, "w3": 2}, what="the GPU queue")
            await settled(operator.controllers.inference_services.controller)
        finally:
            watch.stop()
        assert "queuePosition" not in stopped
        # One write for the transition: reconciles that run before the cache shows it plan from it.
        assert len([s for s in watch.statuses if s.get("phase") == "Stopped"]) == 1
        # Its wait is observed once, when it leaves; the deleted w1's series went with it.
        await poll(lambda: waited_once(ns, "w2"), what="w2's queue wait observed")
        assert wait_count(ns, "w1") is None
        await eventually_equal(lambda: queue(admin, ns), {"w4": 1, "w3": 2}, what="the GPU queue")
        w3 = status_of(admin, "InferenceService", "w3", ns)
        assert condition_triple(w3, "Progressing") == (
            "True",
            "WaitingForGPU",
            "Queued at position 2 waiting for GPU",
        )
    finally:
        await delete_services_and_wait(operator, ns, pods_too=True)
        await gpus_idle(admin)
