"""The per-namespace model cache claim is level-triggered too: deleted by hand, it comes back."""

import pytest
from e2e_support import (
    RunningController,
    eventually,
    isvc,
    model,
    phase_is,
    services_deleted_first,  # noqa: F401  (a fixture)
)

pytestmark = pytest.mark.usefixtures("services_deleted_first")

CLAIM = "llmkube-model-cache"


async def test_a_deleted_cache_claim_is_recreated(operator: RunningController, full_namespace: str) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    admin.create(model("m"), namespace=ns)  # an http(s) source: cached mode, the claim is needed
    # No replicas, so no pod holds the claim and its deletion is not delayed by pvc-protection.
    admin.create(isvc("svc", modelRef="m", replicas=0), namespace=ns)
    await eventually(phase_is(admin, "InferenceService", "svc", ns, "Stopped"), what="svc Stopped")
    first = await eventually(
        lambda: admin.get_or_none("v1", "PersistentVolumeClaim", CLAIM, ns), what="claim"
    )
    before = operator.mutating_requests()

    admin.delete("v1", "PersistentVolumeClaim", CLAIM, ns)

    def recreated() -> bool:
        claim = admin.get_or_none("v1", "PersistentVolumeClaim", CLAIM, ns)
        return claim is not None and claim["metadata"]["uid"] != first["metadata"]["uid"]

    await eventually(recreated, what="the claim recreated")
    claim = admin.get("v1", "PersistentVolumeClaim", CLAIM, ns)
    assert claim["metadata"]["labels"]["app.kubernetes.io/component"] == "model-cache"
    assert "ownerReferences" not in claim["metadata"]  # shared by the namespace, owned by no service
    # The controller made it: its write is counted once its client has the API server's answer,
    # which may come after the test has already seen the claim.
    await eventually(lambda: operator.mutating_requests() > before, what="the controller's write counted")
