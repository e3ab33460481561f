"""Replicas and autoscaling: scale to zero and back through the scale subresource, an HPA that owns
the replica count (the controller never fights it), and HPAs we do not own are left alone."""

from typing import Any

import pytest
from e2e_support import (
    API,
    RunningController,
    condition_triple,
    conditions,
    eventually,
    eventually_equal,
    hf_model,
    isvc,
    patch,
    patch_isvc,
    phase_is,
    reconcile_now,
    services_deleted_first,  # noqa: F401  (a fixture)
    status_of,
)

from llmkube.kube.types import ObjectKey

pytestmark = pytest.mark.usefixtures("services_deleted_first")

HPA = ("autoscaling/v2", "HorizontalPodAutoscaler")
STOPPED = "Scaled to zero: spec.replicas is 0"


def replica_counts(admin: Any, name: str, namespace: str) -> tuple[Any, ...]:
    status = status_of(admin, "InferenceService", name, namespace)
    keys = ("phase", "replicas", "readyReplicas", "desiredReplicas")
    return tuple(status.get(k) for k in keys)


def deployment_replicas(admin: Any, name: str, namespace: str) -> int:
    return int(admin.get("apps/v1", "Deployment", name, namespace)["spec"]["replicas"])


def fields_owned_by(obj: dict[str, Any], manager: str) -> list[dict[str, Any]]:
    entries = obj["metadata"].get("managedFields", [])
    return [e.get("fieldsV1", {}) for e in entries if e["manager"] == manager]


def foreign_hpa(name: str, target: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "labels": labels or {"team": "someone-else"}},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
            "minReplicas": 1,
            "maxReplicas": 2,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}},
                }
            ],
        },
    }


async def test_scale_to_zero_stops_the_service_and_back_to_ready(
    operator: RunningController, full_namespace: str
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    admin.create(hf_model("m"), namespace=ns)
    admin.create(isvc("s", modelRef="m", skipModelInit=True), namespace=ns)
    await eventually_equal(lambda: replica_counts(admin, "s", ns), ("Ready", 1, 1, 1), what="s Ready")

    # `kubectl scale isvc s --replicas 0`: through the scale subresource.
    patch(admin, API, "InferenceService", "s", ns, {"spec": {"replicas": 0}}, subresource="scale")
    await eventually_equal(lambda: replica_counts(admin, "s", ns), ("Stopped", 0, 0, 0), what="s Stopped")
    stopped = status_of(admin, "InferenceService", "s", ns)
    assert condition_triple(stopped, "Available") == ("False", "Stopped", STOPPED)
    assert condition_triple(stopped, "Progressing") == ("False", "Stopped", STOPPED)
    assert condition_triple(stopped, "Ready")[:2] == ("True", "Stopped")  # zero replicas, as asked
    assert set(conditions(stopped)) == {"Available", "Progressing", "Ready", "Reconciling"}
    assert stopped["endpoint"] == f"http://s.{ns}.svc.cluster.local:8080/v1/chat/completions"
    assert deployment_replicas(admin, "s", ns) == 0
    assert admin.list("v1", "Pod", ns, label_selector="inference.llmkube.dev/service=s") == []
    scale = admin.request("GET", admin.path_for(API, "InferenceService", ns, "s") + "/scale")
    # Zero is omitted from the Scale object (omitempty).
    assert (scale["spec"].get("replicas", 0), scale["status"].get("replicas", 0)) == (0, 0)

    patch(admin, API, "InferenceService", "s", ns, {"spec": {"replicas": 1}}, subresource="scale")
    await eventually_equal(lambda: replica_counts(admin, "s", ns), ("Ready", 1, 1, 1), what="s Ready again")
    ready = status_of(admin, "InferenceService", "s", ns)
    assert condition_triple(ready, "Available") == (
        "True",
        "InferenceReady",
        "Inference service is ready and serving requests",
    )
    assert deployment_replicas(admin, "s", ns) == 1


async def test_the_hpa_owns_the_replica_count_while_autoscaling_is_on(
    operator: RunningController, full_namespace: str
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    controller = operator.controllers.inference_services.controller
    key = ObjectKey(ns, "auto")
    admin.create(hf_model("m"), namespace=ns)
    created = admin.create(isvc("auto", modelRef="m", skipModelInit=True), namespace=ns)
    await eventually_equal(lambda: replica_counts(admin, "auto", ns), ("Ready", 1, 1, 1), what="auto Ready")

    patch_isvc(admin, "auto", ns, {"autoscaling": {"minReplicas": 1, "maxReplicas": 4}})
    hpa = await eventually(lambda: admin.get_or_none(*HPA, "auto", ns), what="the HPA")
    assert {k: hpa["spec"].get(k) for k in ("scaleTargetRef", "minReplicas", "maxReplicas", "metrics")} == {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "auto"},
        "minReplicas": 1,
        "maxReplicas": 4,
        "metrics": [
            {
                "type": "Pods",
                "pods": {
                    "metric": {"name": "llamacpp:requests_processing"},
                    "target": {"type": "AverageValue", "averageValue": "2"},
                },
            }
        ],
    }
    assert "behavior" not in hpa["spec"]
    assert hpa["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    assert hpa["metadata"]["labels"]["inference.llmkube.dev/service"] == "auto"
    # With an HPA, the controller lets go of spec.replicas (no write of it, no revert).
    await eventually(
        lambda: (
            not any(
                "f:replicas" in f.get("f:spec", {})
                for f in fields_owned_by(admin.get("apps/v1", "Deployment", "auto", ns), "llmkube-controller")
            )
        ),
        what="spec.replicas released by llmkube-controller",
    )

    # Scale the Deployment the way the HPA does (its scale subresource, its own field manager).
    patch(
        admin,
        "apps/v1",
        "Deployment",
        "auto",
        ns,
        {"spec": {"replicas": 3}},
        subresource="scale",
        field_manager="horizontal-pod-autoscaler",
    )
    # "desired" is the HPA's choice, and Ready means all of those are ready.
    await eventually_equal(
        lambda: replica_counts(admin, "auto", ns), ("Ready", 3, 3, 3), what="auto Ready at 3"
    )
    await reconcile_now(controller, key)
    assert deployment_replicas(admin, "auto", ns) == 3

    # Autoscaling off: our HPA goes and spec.replicas (1) is the count again.
    patch_isvc(admin, "auto", ns, {"autoscaling": None})
    await eventually(lambda: admin.get_or_none(*HPA, "auto", ns) is None, what="our HPA deleted")
    await eventually_equal(
        lambda: replica_counts(admin, "auto", ns), ("Ready", 1, 1, 1), what="auto back to 1"
    )
    assert deployment_replicas(admin, "auto", ns) == 1


@pytest.mark.parametrize(
    "labels",
    [
        pytest.param({"app.kubernetes.io/managed-by": "llmkube"}, id="in-the-controller-cache"),
        pytest.param(None, id="not-cached"),
    ],
)
async def test_an_hpa_we_do_not_own_is_never_taken_over_or_deleted(
    operator: RunningController, full_namespace: str, labels: dict[str, str] | None
) -> None:
    """Only what the service owns is deleted. With our managed-by label the controller's cache sees
    it; without, it does not."""
    admin = operator.cluster.admin()
    ns = full_namespace
    controller = operator.controllers.inference_services.controller
    key = ObjectKey(ns, "x")
    admin.create(hf_model("m"), namespace=ns)
    admin.create(isvc("x", modelRef="m", skipModelInit=True), namespace=ns)
    await eventually_equal(lambda: replica_counts(admin, "x", ns), ("Ready", 1, 1, 1), what="x Ready")
    theirs = admin.create(foreign_hpa("x", "someone-elses-app", labels), namespace=ns)

    # Autoscaling is off: the HPA named like the service is not ours to delete.
    await reconcile_now(controller, key)
    still = admin.get(*HPA, "x", ns)
    assert still["metadata"]["uid"] == theirs["metadata"]["uid"]

    # Autoscaling on: the name is taken by someone else; it must not be taken over.
    patch_isvc(admin, "x", ns, {"autoscaling": {"maxReplicas": 3}})
    failed = await eventually(
        phase_is(admin, "InferenceService", "x", ns, "Failed"), what="x Failed on the name conflict"
    )
    conflict = f"HorizontalPodAutoscaler {ns}/x: exists and is not controlled by this InferenceService"
    assert condition_triple(failed, "Degraded") in (
        ("True", "InvalidSpec", conflict),  # seen in the cache: refused when planning
        ("True", "Failed", conflict),  # not cached: refused before the apply that would take it over
    )
    await reconcile_now(controller, key)
    kept = admin.get(*HPA, "x", ns)
    assert kept["metadata"]["uid"] == theirs["metadata"]["uid"]
    assert kept["metadata"].get("ownerReferences") is None
    assert kept["spec"] == theirs["spec"]
    assert fields_owned_by(kept, "llmkube-controller") == []

    # Autoscaling off again: the service recovers and their HPA is still there.
    patch_isvc(admin, "x", ns, {"autoscaling": None})
    await eventually_equal(lambda: replica_counts(admin, "x", ns), ("Ready", 1, 1, 1), what="x Ready again")
    await reconcile_now(controller, key)
    assert admin.get(*HPA, "x", ns)["metadata"]["uid"] == theirs["metadata"]["uid"]
