"""First end-to-end path: a CPU llama.cpp service goes Pending -> Creating -> Ready."""

import pytest
from e2e_support import (
    RunningController,
    eventually,
    isvc,
    model,
    services_deleted_first,  # noqa: F401  (a fixture)
    status_of,
)

# Delete the service before the namespace: otherwise the namespace controller can remove its
# Deployment first, the controller re-creates it, and the API answers 403 (namespace terminating),
# which the operator fixture counts as an RBAC refusal.
pytestmark = pytest.mark.usefixtures("services_deleted_first")


async def test_cpu_service_becomes_ready(operator: RunningController, full_namespace: str) -> None:
    admin = operator.cluster.admin()
    admin.create(
        isvc("tiny", modelRef="tiny", resources={"cpu": "1", "memory": "1Gi"}), namespace=full_namespace
    )
    pending = await eventually(
        lambda: status_of(admin, "InferenceService", "tiny", full_namespace).get("phase") == "Failed",
        what="Failed while the Model is missing",
    )
    assert pending
    admin.create(model("tiny"), namespace=full_namespace)
    await eventually(
        lambda: status_of(admin, "InferenceService", "tiny", full_namespace).get("phase") == "Ready",
        what="tiny Ready",
    )
    status = status_of(admin, "InferenceService", "tiny", full_namespace)
    assert status["endpoint"] == f"http://tiny.{full_namespace}.svc.cluster.local:8080/v1/chat/completions"
    assert (status["readyReplicas"], status["desiredReplicas"], status["replicas"]) == (1, 1, 1)
    assert status["modelReady"] is True
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Available"]["status"] == "True"
    assert conditions["Available"]["reason"] == "InferenceReady"
