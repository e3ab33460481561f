"""A service naming a RuntimeClass that does not exist says so (Failed/InvalidSpec and an Event),
and heals when the class appears: the controller watches RuntimeClasses (names only) with the RBAC
of manifests/rbac."""

import uuid

import pytest
from e2e_support import (
    RunningController,
    condition_triple,
    eventually,
    hf_model,
    isvc,
    phase_is,
    services_deleted_first,  # noqa: F401  (a fixture)
)

pytestmark = pytest.mark.usefixtures("services_deleted_first")


async def test_a_missing_runtime_class_is_reported_until_it_exists(
    operator: RunningController, full_namespace: str
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    runtime_class = f"sandbox-{uuid.uuid4().hex[:6]}"
    admin.create(hf_model("m"), namespace=ns)
    admin.create(isvc("rc", modelRef="m", skipModelInit=True, runtimeClassName=runtime_class), namespace=ns)
    failed = await eventually(phase_is(admin, "InferenceService", "rc", ns, "Failed"), what="rc Failed")
    message = f'spec.runtimeClassName: RuntimeClass "{runtime_class}" does not exist'
    assert condition_triple(failed, "Degraded") == ("True", "InvalidSpec", message)
    assert admin.get_or_none("apps/v1", "Deployment", "rc", ns) is None
    admin.create(
        {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": runtime_class},
            "handler": "runc",
        }
    )
    try:
        ready = await eventually(phase_is(admin, "InferenceService", "rc", ns, "Ready"), what="rc Ready")
        assert condition_triple(ready, "Degraded")[:2] == ("False", "Recovered")
        deployment = admin.get("apps/v1", "Deployment", "rc", ns)
        assert deployment["spec"]["template"]["spec"]["runtimeClassName"] == runtime_class
    finally:
        admin.delete("node.k8s.io/v1", "RuntimeClass", runtime_class)
