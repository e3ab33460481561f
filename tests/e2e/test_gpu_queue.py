"""GPUs on the kwok nodes (kwok-gpu-0: 2, kwok-gpu-1: 1, both tainted): a service that fits runs
on a GPU node; one that cannot fit waits in the GPU queue, ranked by priority then age; freeing
GPUs lets a waiting service schedule and moves everybody behind it up. A service asking for more
GPUs than any node has is not queued (Unschedulable) until a node that large joins; one whose pod
the scheduler preempts says so, and for whom."""

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from e2e_support import (
    API,
    GPU,
    GPU_TOLERATION,
    RunningController,
    StatusWatch,
    condition_triple,
    conditions,
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
from llmkube_testing.cluster import NodeSpec
from llmkube_testing.pytest_plugin import ClusterHandle, fresh_namespace
from llmkube_testing.rest import RestError
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


async def fill_every_gpu(admin: Any, namespace: str) -> None:
    """Critical services on both GPU nodes (2 + 1 GPUs): nothing of a lower priority preempts them.
    The two-GPU one first: the one-GPU one could otherwise land on the two-GPU node."""
    for name, gpus in (("fill-2", 2), ("fill-1", 1)):
        admin.create(gpu_service(name, gpus, priority="critical"), namespace=namespace)
        await eventually(phase_is(admin, "InferenceService", name, namespace, "Ready"), what=f"{name} Ready")


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
        # 1. Two GPUs from the Model: only kwok-gpu-0 has two. High priority: no later service of
        # this test can preempt it (that is the next test's subject).
        admin.create(
            isvc("big", modelRef="two-gpu-model", skipModelInit=True, resources={"gpu": 1}, priority="high"),
            namespace=ns,
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
        # ...then the youngest, with priority high (as high as `big`: nothing to preempt): it goes first.
        await a_second_later(admin, "younger-normal", ns)
        watch = StatusWatch(admin, "InferenceService", "urgent", ns).start()
        try:
            admin.create(gpu_service("urgent", 2, priority="high"), namespace=ns)
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
            "waitingFor": f"{GPU}: 2",
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
            f"Waiting for GPU resources: {GPU}: 2",
        )
        older = status_of(admin, "InferenceService", "older-normal", ns)
        assert condition_triple(older, "Progressing") == (
            "True",
            "WaitingForGPU",
            "Queued at position 2 waiting for GPU",
        )
        assert the_pod(admin, "urgent", ns)["spec"]["priorityClassName"] == "llmkube-high"

        # 4. Deleting `small` frees kwok-gpu-1: the one-GPU service schedules there; the others
        # move up (urgent and younger-normal need two GPUs on one node, and `big` holds it).
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
    deleted, another in the middle is stopped; every other service's position follows. Critical
    services hold every GPU, so these (two GPUs each: they fit kwok-gpu-0) wait whatever else runs."""
    admin = operator.cluster.admin()
    ns = full_namespace
    await gpus_idle(admin)
    admin.create(hf_model("gpu-model", hardware={"accelerator": "cuda"}), namespace=ns)
    try:
        await fill_every_gpu(admin, ns)
        for index, name in enumerate(("w1", "w2", "w3", "w4")):
            if index:
                await a_second_later(admin, f"w{index}", ns)
            admin.create(gpu_service(name, 2), namespace=ns)
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


@pytest.fixture
def other_namespace(full_cluster: ClusterHandle, request: pytest.FixtureRequest) -> Iterator[str]:
    yield from fresh_namespace(full_cluster, request)


def gpu_node(name: str, gpus: int, *, taint: str = "") -> dict[str, Any]:
    """A kwok node (kwok runs its pods); `taint` adds one no service tolerates."""
    node = NodeSpec(name, gpus=gpus).manifest()
    if taint:
        node["spec"]["taints"].append({"key": taint, "value": "yes", "effect": "NoSchedule"})
    return node


def remove_node(admin: Any, name: str) -> None:
    with contextlib.suppress(RestError):
        admin.delete("v1", "Node", name)


async def test_more_gpus_than_any_node_has_is_not_queued_until_a_node_that_large_joins(
    operator: RunningController, full_namespace: str
) -> None:
    """The probe's case: a critical service asking for 4 GPUs where the largest node has 2 sat at
    the head of the queue for ever, pushing back every service that could run. It is not queued:
    Unschedulable, naming the largest node; a 4-GPU node joining puts it in the queue (or runs it),
    and the node leaving takes it out again."""
    admin = operator.cluster.admin()
    ns = full_namespace
    await gpus_idle(admin)
    admin.create(hf_model("gpu-model", hardware={"accelerator": "cuda"}), namespace=ns)
    try:
        await fill_every_gpu(admin, ns)
        admin.create(gpu_service("fits", 2), namespace=ns)
        await eventually_equal(lambda: queue(admin, ns), {"fits": 1}, what="the GPU queue")

        admin.create(gpu_service("never", 4, priority="critical"), namespace=ns)
        message = (
            f"each replica needs 4 {GPU} and the most any node has is 2, on kwok-gpu-0: "
            "not queued for GPUs until a node with 4 joins"
        )
        never = await eventually(
            lambda: (
                (s := status_of(admin, "InferenceService", "never", ns)).get("schedulingStatus")
                == "Unschedulable"
                and s
            ),
            what="never Unschedulable",
        )
        assert never["phase"] == "Creating" and "queuePosition" not in never
        assert (never["schedulingMessage"], never["waitingFor"]) == (message, f"{GPU}: 4")
        assert condition_triple(never, "Available") == ("False", "Unschedulable", message)
        assert condition_triple(never, "GPUAvailable") == ("False", "Unschedulable", message)
        assert admin.get_or_none("apps/v1", "Deployment", "never", ns) is not None  # still applied
        # It did not push the service that can run back: `fits` keeps the head of the queue.
        await settled(operator.controllers.inference_services.controller)
        assert queue(admin, ns) == {"fits": 1}
        assert REGISTRY.get_sample_value("llmkube_gpu_queue_depth") == 1

        # 1. A 4-GPU node joins, tainted for someone else (the check counts GPUs, not taints): now a
        # node that large exists, so `never` waits in the queue, first by its priority.
        admin.create(gpu_node("kwok-gpu-big", 4, taint="reserved"))
        await eventually_equal(lambda: queue(admin, ns), {"never": 1, "fits": 2}, what="the GPU queue")
        waiting = status_of(admin, "InferenceService", "never", ns)
        assert (waiting["schedulingStatus"], waiting["waitingFor"]) == ("InsufficientGPU", f"{GPU}: 4")
        assert condition_triple(waiting, "GPUAvailable") == (
            "False",
            "InsufficientGPU",
            f"Waiting for GPU resources: {GPU}: 4",
        )

        # 2. It leaves: out of the queue again.
        remove_node(admin, "kwok-gpu-big")
        await eventually_equal(lambda: queue(admin, ns), {"fits": 1}, what="the GPU queue")
        assert status_of(admin, "InferenceService", "never", ns)["schedulingStatus"] == "Unschedulable"

        # 3. A 4-GPU node it may use joins: it runs there.
        admin.create(gpu_node("kwok-gpu-four", 4))
        await eventually(phase_is(admin, "InferenceService", "never", ns, "Ready"), what="never Ready")
        assert the_pod(admin, "never", ns)["spec"]["nodeName"] == "kwok-gpu-four"
        ready = status_of(admin, "InferenceService", "never", ns)
        assert condition_triple(ready, "GPUAvailable") == (
            "True",
            "NotWaitingForGPU",
            "Not waiting for GPU resources",
        )
    finally:
        await delete_services_and_wait(operator, ns, pods_too=True)
        for name in ("kwok-gpu-big", "kwok-gpu-four"):
            remove_node(admin, name)
        await gpus_idle(admin)


async def test_a_preempted_service_says_when_and_by_which_service(
    operator: RunningController, full_namespace: str, other_namespace: str
) -> None:
    """The real scheduler preempts a low-priority service's pod for a critical service of another
    namespace: the victim's status says so (condition Preempted, from the pod's DisruptionTarget
    condition and the scheduler's Preempted Event), waits for GPUs again, and once it runs again
    Preempted turns False with the account kept."""
    admin = operator.cluster.admin()
    ns, theirs = full_namespace, other_namespace
    await gpus_idle(admin)
    for namespace in (ns, theirs):
        admin.create(hf_model("gpu-model", hardware={"accelerator": "cuda"}), namespace=namespace)
    try:
        admin.create(gpu_service("victim", 2, priority="low"), namespace=ns)
        await eventually(phase_is(admin, "InferenceService", "victim", ns, "Ready"), what="victim Ready")
        victim_pod = the_pod(admin, "victim", ns)
        assert victim_pod["spec"]["nodeName"] == "kwok-gpu-0"  # the only node with two GPUs

        admin.create(gpu_service("urgent", 2, priority="critical"), namespace=theirs)
        await eventually(phase_is(admin, "InferenceService", "urgent", theirs, "Ready"), what="urgent Ready")
        urgent_pod = the_pod(admin, "urgent", theirs)
        assert urgent_pod["spec"]["nodeName"] == "kwok-gpu-0"

        def preempted() -> dict[str, Any] | None:
            status = status_of(admin, "InferenceService", "victim", ns)
            found = conditions(status).get("Preempted")
            return status if found and "InferenceService" in found["message"] else None

        status = await eventually(preempted, what="victim's Preempted condition naming the preemptor")
        assert status["phase"] == "WaitingForGPU"
        # Its first place may count `urgent`, still waiting then: the move to 1 follows within 5 s.
        await eventually_equal(lambda: queue(admin, ns), {"victim": 1}, within=15, what="the GPU queue")
        found = conditions(status)["Preempted"]
        assert (found["status"], found["reason"]) == ("True", "PreemptionByScheduler")
        name = victim_pod["metadata"]["name"]
        assert found["message"].startswith(f"pod {name} was preempted by the scheduler at ")
        assert found["message"].endswith(
            f" on node kwok-gpu-0, for pod {theirs}/{urgent_pod['metadata']['name']} "
            f"(InferenceService {theirs}/urgent, priority 1000000)"
        )
        # What Kubernetes v1.37 wrote, which the condition reports: the scheduler's Event names the
        # preemptor by its UID in the note only (`related` is left empty).
        (event,) = [
            e
            for e in admin.list("events.k8s.io/v1", "Event", ns)
            if e.get("reason") == "Preempted" and e["regarding"]["name"] == name
        ]
        assert (event["reportingController"], event["action"]) == ("default-scheduler", "Preempting")
        assert event["note"] == f"Preempted by pod {urgent_pod['metadata']['uid']} on node kwok-gpu-0"
        assert "related" not in event

        # The critical service goes: the victim runs again, and Preempted says it is over.
        admin.delete(API, "InferenceService", "urgent", theirs)
        await free_the_pods_of(operator, "urgent", theirs)
        back = await eventually(
            phase_is(admin, "InferenceService", "victim", ns, "Ready"), within=60, what="victim Ready again"
        )
        settled_condition = conditions(back)["Preempted"]
        assert (settled_condition["status"], settled_condition["reason"]) == ("False", "Recovered")
        assert (
            settled_condition["message"]
            == f"The service is Ready again; the last preemption: {found['message']}"
        )
    finally:
        for namespace in (ns, theirs):
            await delete_services_and_wait(operator, namespace, pods_too=True)
        await gpus_idle(admin)
