"""An InferenceService's life, end to end: Pending while its Model is not Ready, Creating, Ready;
Failed while the Model is missing and healed by the Model alone; garbage collection on delete."""

from typing import Any

import pytest
from e2e_support import (
    API,
    RunningController,
    StatusWatch,
    condition_triple,
    conditions,
    eventually,
    hf_model,
    isvc,
    model,
    phase_is,
    services_deleted_first,  # noqa: F401  (a fixture)
    status_of,
)

pytestmark = pytest.mark.usefixtures("services_deleted_first")

READY_MESSAGE = "Inference service is ready and serving requests"
WAITING_FOR_MODEL = "Waiting for Model to be Ready"
MANUAL_CLASS = "llmkube-e2e-manual"  # no provisioner serves it: only a volume made for the claim binds it


def claim(name: str, storage_class: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": storage_class,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


def volume_for(name: str, claim_name: str, namespace: str, storage_class: str) -> dict[str, Any]:
    """A volume pre-bound to one claim (the way an admin hands out a prepared disk)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": storage_class,
            "claimRef": {"namespace": namespace, "name": claim_name},
            "hostPath": {"path": f"/tmp/llmkube-e2e/{name}", "type": "DirectoryOrCreate"},
        },
    }


def owner_refs(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return list(obj["metadata"].get("ownerReferences") or [])


async def test_cpu_service_goes_pending_creating_ready(
    operator: RunningController, full_namespace: str
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    admin.create(claim("weights", MANUAL_CLASS), namespace=ns)
    admin.create(model("tiny", source="pvc://weights/models/tiny.gguf"), namespace=ns)
    await eventually(phase_is(admin, "Model", "tiny", ns, "Pending"), what="Model Pending (claim unbound)")

    watch = StatusWatch(admin, "InferenceService", "tiny", ns).start()
    volume_name = f"{ns}-weights"
    try:
        created = admin.create(
            isvc("tiny", modelRef="tiny", resources={"cpu": "1", "memory": "1Gi"}), namespace=ns
        )
        generation = created["metadata"]["generation"]
        pending = await eventually(phase_is(admin, "InferenceService", "tiny", ns, "Pending"))
        assert {k: v for k, v in pending.items() if k not in ("conditions", "lastUpdated")} == {
            "phase": "Pending",
            "replicas": 0,
            "readyReplicas": 0,
            "desiredReplicas": 0,
            "modelReady": False,
            "effectivePriority": 10000,
            "schedulingStatus": "WaitingForModel",
        }  # no endpoint, scheduling message or GPUs waited for: left out, not ""
        assert condition_triple(pending, "Progressing") == ("True", "Pending", WAITING_FOR_MODEL)
        assert condition_triple(pending, "Available") == ("False", "Pending", WAITING_FOR_MODEL)
        assert condition_triple(pending, "Ready")[:2] == ("False", "Pending")
        assert set(conditions(pending)) == {"Available", "Progressing", "Ready", "Reconciling"}
        assert admin.get_or_none("apps/v1", "Deployment", "tiny", ns) is None  # nothing before the gate

        # Bind the claim: the Model turns Ready and that alone moves the service on.
        admin.create(volume_for(volume_name, "weights", ns, MANUAL_CLASS))
        model_status = await eventually(
            phase_is(admin, "Model", "tiny", ns, "Ready"), within=45, what="Model Ready once bound"
        )
        assert model_status["path"] == "/model-source/models/tiny.gguf"
        assert condition_triple(model_status, "Available") == (
            "True",
            "PVCModelReady",
            'Model available on PVC "weights"',
        )

        def converged() -> dict[str, Any] | None:
            status = status_of(admin, "InferenceService", "tiny", ns)
            return status if status.get("phase") == "Ready" and status.get("replicas") == 1 else None

        ready = await eventually(converged, within=60, what="tiny Ready with its pod running")
    finally:
        watch.stop()
        admin.delete("v1", "PersistentVolume", volume_name)

    assert watch.phases() == ["Pending", "Creating", "Ready"]
    endpoint = f"http://tiny.{ns}.svc.cluster.local:8080/v1/chat/completions"
    creating = watch.first("Creating")
    assert (creating["readyReplicas"], creating["desiredReplicas"], creating["modelReady"]) == (0, 1, True)
    assert creating["endpoint"] == endpoint
    assert condition_triple(creating, "Progressing") == (
        "True",
        "Creating",
        "Creating inference service (0/1 replicas ready)",
    )
    assert conditions(creating)["Available"]["status"] == "False"  # never a stale True

    assert {k: v for k, v in ready.items() if k not in ("conditions", "lastUpdated")} == {
        "phase": "Ready",
        "mode": "chat",  # the serving mode resolved from spec.mode (chat by default), as the reference
        "replicas": 1,
        "readyReplicas": 1,
        "desiredReplicas": 1,
        "endpoint": endpoint,
        "modelReady": True,
        "effectivePriority": 10000,
    }  # nothing to diagnose: no schedulingStatus, schedulingMessage or waitingFor at all
    assert condition_triple(ready, "Available") == ("True", "InferenceReady", READY_MESSAGE)
    assert condition_triple(ready, "Progressing") == ("False", "Ready", "All 1 replicas are ready")
    assert condition_triple(ready, "Ready")[:2] == ("True", "Ready")
    assert condition_triple(ready, "Reconciling")[0] == "False"
    assert set(conditions(ready)) == {"Available", "Progressing", "Ready", "Reconciling"}
    assert {c["observedGeneration"] for c in ready["conditions"]} == {generation}
    # Each status write, once its watch event arrived, is forgotten (no reconcile is needed for it).
    writers = (
        operator.controllers.inference_services.status_writer,
        operator.controllers.models.status_writer,
    )
    await eventually(lambda: sum(map(len, writers)) == 0, within=10, what="no status write remembered")

    # What was built: the claim mounted read-only, no init container, CPU requests only, a CPU node.
    deployment = admin.get("apps/v1", "Deployment", "tiny", ns)
    pod_spec = deployment["spec"]["template"]["spec"]
    (container,) = pod_spec["containers"]
    assert container["name"] == "llama-server"
    assert container["image"] == "ghcr.io/ggml-org/llama.cpp:server-b10068"
    assert container["args"] == [
        "--model",
        "/model-source/models/tiny.gguf",
        "--host",
        "0.0.0.0",
        "--port",
        "8080",
        "--metrics",
    ]
    # The memory limit is the request (plan/inferenceservice/hardening.py).
    assert container["resources"] == {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "1Gi"}}
    assert container["volumeMounts"] == [
        {"name": "model-source", "mountPath": "/model-source", "readOnly": True},
        {"name": "tmp", "mountPath": "/tmp"},  # llama-server's writable /tmp under a read-only root
    ]
    assert pod_spec["volumes"] == [
        {"name": "model-source", "persistentVolumeClaim": {"claimName": "weights", "readOnly": True}},
        {"name": "tmp", "emptyDir": {}},
    ]
    assert "initContainers" not in pod_spec
    assert pod_spec["priorityClassName"] == "llmkube-normal"
    (pod,) = admin.list("v1", "Pod", ns, label_selector="inference.llmkube.dev/service=tiny")
    assert pod["spec"]["nodeName"] == "kwok-cpu-0"
    # A pvc:// source mounts its own claim, so no namespace cache claim is made.
    assert admin.get_or_none("v1", "PersistentVolumeClaim", "llmkube-model-cache", ns) is None
    service = admin.get("v1", "Service", "tiny", ns)
    http = {"name": "http", "port": 8080, "targetPort": "http", "protocol": "TCP"}
    assert service["spec"]["ports"] == [http]


async def test_missing_model_fails_then_the_model_alone_heals_it(
    operator: RunningController, full_namespace: str
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    created = admin.create(isvc("orphan", modelRef="later", skipModelInit=True), namespace=ns)
    failed = await eventually(phase_is(admin, "InferenceService", "orphan", ns, "Failed"))
    assert {k: v for k, v in failed.items() if k not in ("conditions", "lastUpdated")} == {
        "phase": "Failed",
        "replicas": 0,
        "readyReplicas": 0,
        "desiredReplicas": 0,
        "modelReady": False,
        "effectivePriority": 10000,
        "schedulingStatus": "ModelNotFound",  # the REASON column
    }
    missing = f'Model "later" not found in namespace "{ns}"'
    assert condition_triple(failed, "Degraded") == ("True", "ModelNotFound", missing)
    assert condition_triple(failed, "Available") == ("False", "ModelNotFound", missing)
    assert condition_triple(failed, "Progressing") == ("False", "ModelNotFound", missing)
    assert admin.list("apps/v1", "Deployment", ns) == []

    # Only the Model appears: no edit of the service, the Model watch brings it back.
    admin.create(hf_model("later"), namespace=ns)
    ready = await eventually(
        lambda: (
            (s := status_of(admin, "InferenceService", "orphan", ns)).get("phase") == "Ready"
            and s.get("replicas") == 1
            and s
        ),
        what="orphan Ready after its Model appeared",
    )
    assert condition_triple(ready, "Available") == ("True", "InferenceReady", READY_MESSAGE)
    # Cleared once the cause is gone: kept, and False (one condition rule for both kinds).
    assert condition_triple(ready, "Degraded") == (
        "False",
        "Recovered",
        "No longer failing: the service is Ready",
    )
    assert (ready["readyReplicas"], ready["desiredReplicas"], ready["modelReady"]) == (1, 1, True)
    current = admin.get(API, "InferenceService", "orphan", ns)
    assert current["metadata"]["generation"] == created["metadata"]["generation"]


async def test_deleting_the_service_collects_what_it_owned_but_keeps_the_cache_claim(
    operator: RunningController, full_namespace: str
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    # An http(s) source is fetched by the pod's init container into the namespace cache claim.
    admin.create(model("web", source="https://models.invalid/web.gguf"), namespace=ns)
    created = admin.create(isvc("web", modelRef="web", autoscaling={"maxReplicas": 2}), namespace=ns)
    uid = created["metadata"]["uid"]
    await eventually(phase_is(admin, "InferenceService", "web", ns, "Ready"), what="web Ready")

    owned = {
        ("apps/v1", "Deployment"): admin.get("apps/v1", "Deployment", "web", ns),
        ("v1", "Service"): admin.get("v1", "Service", "web", ns),
        ("autoscaling/v2", "HorizontalPodAutoscaler"): admin.get(
            "autoscaling/v2", "HorizontalPodAutoscaler", "web", ns
        ),
    }
    expected_owner = {
        "apiVersion": API,
        "kind": "InferenceService",
        "name": "web",
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": False,
    }
    for obj in owned.values():
        assert owner_refs(obj) == [expected_owner]
    cache = admin.get("v1", "PersistentVolumeClaim", "llmkube-model-cache", ns)
    assert owner_refs(cache) == []
    assert cache["metadata"]["labels"] == {
        "app.kubernetes.io/name": "llmkube",
        "app.kubernetes.io/component": "model-cache",
        "app.kubernetes.io/managed-by": "llmkube-controller",
    }
    volumes = owned[("apps/v1", "Deployment")]["spec"]["template"]["spec"]["volumes"]
    assert {"name": "model-cache", "persistentVolumeClaim": {"claimName": "llmkube-model-cache"}} in volumes

    admin.delete(API, "InferenceService", "web", ns)

    def collected() -> bool:
        return all(admin.get_or_none(av, kind, "web", ns) is None for av, kind in owned)

    await eventually(collected, within=60, what="Deployment, Service and HPA garbage-collected")
    await eventually(
        lambda: not admin.list("v1", "Pod", ns, label_selector="inference.llmkube.dev/service=web"),
        what="the pods gone",
    )
    kept = admin.get("v1", "PersistentVolumeClaim", "llmkube-model-cache", ns)
    assert kept["metadata"]["uid"] == cache["metadata"]["uid"]
    assert "deletionTimestamp" not in kept["metadata"]
