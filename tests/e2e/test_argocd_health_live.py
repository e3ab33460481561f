"""The Argo CD health checks on live objects: what the controller really writes, read back from the
API server and run through the Lua scripts, across a service's transitions."""

import pytest
from argocd_health import health
from e2e_support import (
    API,
    RunningController,
    eventually,
    hf_model,
    isvc,
    patch_isvc,
    phase_is,
    services_deleted_first,  # noqa: F401  (a fixture)
)

pytestmark = pytest.mark.usefixtures("services_deleted_first")


async def test_health_follows_the_service_through_ready_stopped_and_failed(
    operator: RunningController, full_namespace: str
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    admin.create(hf_model("chat"), namespace=ns)
    admin.create(
        isvc("chat", modelRef="chat", skipModelInit=True, resources={"cpu": "500m", "memory": "512Mi"}),
        namespace=ns,
    )

    def argo(kind: str) -> tuple[str, str]:
        found = health(admin.get(API, kind, "chat", ns))
        return found.status, found.message

    await eventually(phase_is(admin, "Model", "chat", ns, "Ready"), what="Model Ready")
    assert argo("Model")[0] == "Healthy"
    await eventually(phase_is(admin, "InferenceService", "chat", ns, "Ready"), what="service Ready")
    status, message = argo("InferenceService")
    assert status == "Healthy"
    assert f"http://chat.{ns}.svc.cluster.local:8080" in message

    patch_isvc(admin, "chat", ns, {"replicas": 0})
    await eventually(lambda: argo("InferenceService")[0] == "Suspended", what="Suspended once scaled to zero")
    assert argo("InferenceService")[1] == "Scaled to zero: spec.replicas is 0"

    patch_isvc(admin, "chat", ns, {"replicas": 1, "resources": {"cpu": "500m", "memory": "half a gig"}})
    await eventually(lambda: argo("InferenceService")[0] == "Degraded", what="Degraded on an invalid spec")
    assert "half a gig" in argo("InferenceService")[1]

    patch_isvc(admin, "chat", ns, {"resources": {"cpu": "500m", "memory": "512Mi"}})
    await eventually(lambda: argo("InferenceService")[0] == "Healthy", what="Healthy again once fixed")
