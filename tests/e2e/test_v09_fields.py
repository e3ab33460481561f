"""The v0.9 fields on the full tier (a scheduler, a controller-manager and kwok nodes): replicas
spread by topologySpreadConstraints land one per node, and a suspended service has no pods, keeps
its replica count and comes back with it."""

from typing import Any

import pytest
from e2e_support import (
    RunningController,
    condition_triple,
    eventually,
    eventually_equal,
    hf_model,
    isvc,
    patch_isvc,
    services_deleted_first,  # noqa: F401  (a fixture)
    status_of,
)

pytestmark = pytest.mark.usefixtures("services_deleted_first")

NODES = ["kwok-gpu-0", "kwok-gpu-1"]


def pods_of(admin: Any, name: str, namespace: str) -> list[dict[str, Any]]:
    return [
        p
        for p in admin.list("v1", "Pod", namespace, label_selector=f"inference.llmkube.dev/service={name}")
        if not p["metadata"].get("deletionTimestamp")
    ]


def replica_counts(admin: Any, name: str, namespace: str) -> tuple[Any, ...]:
    status = status_of(admin, "InferenceService", name, namespace)
    return tuple(status.get(k) for k in ("phase", "readyReplicas", "desiredReplicas"))


async def test_spread_replicas_land_one_per_node(operator: RunningController, full_namespace: str) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"inference.llmkube.dev/service": "spread"}},
        }
    ]
    # Two nodes may take them (the GPU nodes, whose taint the pods tolerate): the spread decides.
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": NODES}
                        ]
                    }
                ]
            }
        }
    }
    tolerations = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    admin.create(hf_model("m"), namespace=ns)
    spec = {"replicas": 2, "skipModelInit": True, "topologySpreadConstraints": spread, "affinity": affinity}
    admin.create(isvc("spread", modelRef="m", tolerations=tolerations, **spec), namespace=ns)
    await eventually_equal(lambda: replica_counts(admin, "spread", ns), ("Ready", 2, 2), what="spread Ready")
    pods = pods_of(admin, "spread", ns)
    assert sorted(p["spec"]["nodeName"] for p in pods) == NODES  # one each
    assert all(p["spec"]["topologySpreadConstraints"] == spread for p in pods)
    deployment = admin.get("apps/v1", "Deployment", "spread", ns)
    assert deployment["spec"]["template"]["spec"]["affinity"] == affinity


async def test_a_suspended_service_has_no_pods_and_resumes(
    operator: RunningController, full_namespace: str
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    admin.create(hf_model("m"), namespace=ns)
    admin.create(isvc("paused", modelRef="m", skipModelInit=True, replicas=2), namespace=ns)
    await eventually_equal(lambda: replica_counts(admin, "paused", ns), ("Ready", 2, 2), what="paused Ready")

    patch_isvc(admin, "paused", ns, {"suspend": True})
    await eventually_equal(lambda: replica_counts(admin, "paused", ns), ("Suspended", 0, 0), what="Suspended")
    await eventually(lambda: not pods_of(admin, "paused", ns), what="no pods")
    status = status_of(admin, "InferenceService", "paused", ns)
    assert condition_triple(status, "Available")[:2] == ("False", "Suspended")  # type: ignore[index]
    assert condition_triple(status, "Ready")[:2] == ("True", "Suspended")  # type: ignore[index]
    stored = admin.get("inference.llmkube.dev/v1alpha1", "InferenceService", "paused", ns)
    assert stored["spec"]["replicas"] == 2  # kept for when it resumes
    assert admin.get("apps/v1", "Deployment", "paused", ns)["spec"]["replicas"] == 0

    patch_isvc(admin, "paused", ns, {"suspend": False})
    await eventually_equal(lambda: replica_counts(admin, "paused", ns), ("Ready", 2, 2), what="resumed")
    assert len(pods_of(admin, "paused", ns)) == 2


async def test_a_node_port_is_pinned_where_the_admin_allows_node_ports(
    operator: RunningController, full_namespace: str
) -> None:
    """This session's controller allows NodePort (tests/e2e/conftest.py); where it does not, the
    spec is a PolicyViolation (tests/unit/plan/test_isvc_v09_fields.py)."""
    admin = operator.cluster.admin()
    ns = full_namespace
    admin.create(hf_model("m"), namespace=ns)
    endpoint = {"type": "NodePort", "nodePort": 31234}
    admin.create(isvc("pinned", modelRef="m", skipModelInit=True, endpoint=endpoint), namespace=ns)
    await eventually_equal(lambda: replica_counts(admin, "pinned", ns), ("Ready", 1, 1), what="pinned Ready")
    service = admin.get("v1", "Service", "pinned", ns)
    assert service["spec"]["type"] == "NodePort"
    assert service["spec"]["ports"][0]["nodePort"] == 31234
