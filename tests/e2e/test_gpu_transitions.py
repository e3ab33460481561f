"""A running service gains or loses its GPU (through `resources.gpu`, or a `modelRef` switch to a GPU
Model): the Deployment moves between the server's default RollingUpdate strategy and Recreate in
one rollout, in place (same uid), never through Failed. Also for a Deployment written by the
previous version of the controller, whose defaulted `strategy.rollingUpdate` nobody owns: applying
`type: Recreate` over it used to keep that block, and the API server refused the result ("may not
be specified when strategy `type` is 'Recreate'") on every retry."""

from datetime import UTC, datetime
from typing import Any

from e2e_support import (
    GPU,
    GPU_TOLERATION,
    RunningController,
    StatusWatch,
    delete_services_and_wait,
    eventually,
    eventually_equal,
    gpus_idle,
    hf_model,
    isvc,
    patch_isvc,
    phase_is,
    writes_quiesce,
)

from llmkube.api.inferenceservice import InferenceService
from llmkube.api.model import Model
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.observed import ObservedState
from llmkube.plan.inferenceservice.planner import plan_inference_service

REVISION = "deployment.kubernetes.io/revision"
ROLLING_DEFAULT = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}


def deployment(admin: Any, name: str, namespace: str) -> dict[str, Any]:
    return admin.get("apps/v1", "Deployment", name, namespace)  # type: ignore[no-any-return]


def revision(admin: Any, name: str, namespace: str) -> int:
    return int(deployment(admin, name, namespace)["metadata"].get("annotations", {}).get(REVISION, "0"))


def gpu_limit(admin: Any, name: str, namespace: str) -> str | None:
    (container,) = deployment(admin, name, namespace)["spec"]["template"]["spec"]["containers"]
    return ((container.get("resources") or {}).get("limits") or {}).get(GPU)


def rolled_out(admin: Any, name: str, namespace: str) -> bool:
    """The Deployment controller has acted on the latest spec and every replica is the new one."""
    current = deployment(admin, name, namespace)
    status, replicas = current.get("status") or {}, current["spec"].get("replicas", 1)
    return bool(
        status.get("observedGeneration") == current["metadata"]["generation"]
        and status.get("updatedReplicas", 0) == replicas
        and status.get("readyReplicas", 0) == replicas
        and status.get("replicas", 0) == replicas
    )


async def settle_on(
    operator: RunningController,
    name: str,
    namespace: str,
    *,
    gpu: str | None,
    revision_now: int,
    uid: str,
) -> None:
    """The service is Ready on a Deployment with (or without) the GPU, updated in place by exactly
    one rollout since `revision_now`, with the strategy that goes with it."""
    admin = operator.cluster.admin()
    await eventually_equal(lambda: gpu_limit(admin, name, namespace), gpu, what=f"{name}: GPU limit {gpu}")
    await eventually(lambda: rolled_out(admin, name, namespace), what=f"{name} rolled out")
    await eventually(phase_is(admin, "InferenceService", name, namespace, "Ready"), what=f"{name} Ready")
    await writes_quiesce(operator)
    current = deployment(admin, name, namespace)
    assert current["metadata"]["uid"] == uid, "the Deployment was deleted and recreated"
    assert revision(admin, name, namespace) == revision_now + 1, "not exactly one rollout"
    strategy = current["spec"]["strategy"]
    assert strategy == ({"type": "Recreate"} if gpu else ROLLING_DEFAULT)
    tolerations = current["spec"]["template"]["spec"].get("tolerations") or []
    assert (GPU_TOLERATION in tolerations) == bool(gpu)


async def test_cpu_to_gpu_and_back_through_resources_and_through_the_model(
    operator: RunningController, full_namespace: str
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    await gpus_idle(admin)
    admin.create(hf_model("cpu-model"), namespace=ns)
    admin.create(hf_model("gpu-model", hardware={"accelerator": "cuda", "gpu": {"count": 1}}), namespace=ns)
    admin.create(isvc("svc", modelRef="cpu-model", skipModelInit=True), namespace=ns)
    watch = StatusWatch(admin, "InferenceService", "svc", ns).start()
    try:
        await eventually(phase_is(admin, "InferenceService", "svc", ns, "Ready"), what="svc Ready on CPU")
        uid = deployment(admin, "svc", ns)["metadata"]["uid"]
        assert deployment(admin, "svc", ns)["spec"]["strategy"] == ROLLING_DEFAULT

        steps: list[tuple[dict[str, Any], str | None]] = [
            ({"resources": {"gpu": 1}}, "1"),  # CPU -> GPU by the service's own resources
            ({"resources": None}, None),  # GPU -> CPU
            ({"modelRef": "gpu-model"}, "1"),  # CPU -> GPU by a Model that needs one
            ({"modelRef": "cpu-model"}, None),  # and back
        ]
        for change, gpu in steps:
            before = revision(admin, "svc", ns)
            patch_isvc(admin, "svc", ns, change)
            await settle_on(operator, "svc", ns, gpu=gpu, revision_now=before, uid=uid)
    finally:
        watch.stop()
        await delete_services_and_wait(operator, ns, pods_too=True)
        await gpus_idle(admin)
    assert "Failed" not in watch.phases(), watch.phases()


def previous_version_deployment(isvc_obj: dict[str, Any]) -> dict[str, Any]:
    """The CPU Deployment the previous controller version applied: our planner's intent without any
    `strategy` (the server defaults RollingUpdate, and that default belongs to no manager)."""
    cpu_model = Model.model_validate(
        {
            "metadata": {"name": "later", "namespace": isvc_obj["metadata"]["namespace"]},
            "spec": {"source": "e2e-org/later"},
            "status": {"phase": "Ready"},
        }
    )
    plan = plan_inference_service(
        InferenceService.model_validate(isvc_obj),
        cpu_model,
        ObservedState(now=datetime.now(UTC)),
        OperatorConfig(),
    )
    assert plan.deployment is not None
    intent = dict(plan.deployment)
    intent["spec"] = {key: value for key, value in intent["spec"].items() if key != "strategy"}
    return intent


async def test_a_deployment_of_the_previous_version_gains_a_gpu_in_place(
    operator: RunningController, full_namespace: str
) -> None:
    """Migration: the Deployment was written (with server-side apply, as our own manager) by the
    previous version for a CPU service; the service now needs a GPU."""
    admin = operator.cluster.admin()
    ns = full_namespace
    await gpus_idle(admin)
    # The Model does not exist yet, so the controller applies nothing while we plant the old object.
    created = admin.create(isvc("old", modelRef="later", skipModelInit=True), namespace=ns)
    await eventually(phase_is(admin, "InferenceService", "old", ns, "Failed"), what="old waits for its Model")
    old = previous_version_deployment(created)
    path = admin.path_for("apps/v1", "Deployment", ns, "old")
    planted = admin.request(
        "PATCH",
        path,
        old,
        content_type="application/apply-patch+yaml",
        query={"fieldManager": "llmkube-controller", "force": "true"},
    )
    assert planted["spec"]["strategy"] == ROLLING_DEFAULT  # defaulted by the server, owned by nobody
    await eventually_equal(lambda: revision(admin, "old", ns), 1, what="the old Deployment rolled out")
    uid = planted["metadata"]["uid"]
    watch = StatusWatch(admin, "InferenceService", "old", ns).start()
    try:
        admin.create(hf_model("later", hardware={"accelerator": "cuda", "gpu": {"count": 1}}), namespace=ns)
        await settle_on(operator, "old", ns, gpu="1", revision_now=1, uid=uid)
    finally:
        watch.stop()
        await delete_services_and_wait(operator, ns, pods_too=True)
        await gpus_idle(admin)
    # It was Failed while the Model was missing; once the Model is there it never fails again.
    after_model = watch.phases()[watch.phases().index("Failed") + 1 :] if "Failed" in watch.phases() else []
    assert "Failed" not in after_model, watch.phases()
