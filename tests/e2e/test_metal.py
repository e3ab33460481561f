"""The metal path: no Deployment, readiness from the host agent's EndpointSlices, including for
names with dots."""

from datetime import UTC, datetime
from typing import Any

import pytest
from e2e_support import (
    RunningController,
    condition_triple,
    eventually,
    isvc,
    model,
    phase_is,
    services_deleted_first,  # noqa: F401  (a fixture)
    status_of,
)

pytestmark = pytest.mark.usefixtures("services_deleted_first")


def agent_slice(service: str, namespace: str, *, ready_addresses: int, heartbeat: str) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{service}-agent",
            "namespace": namespace,
            "labels": {"kubernetes.io/service-name": service, "llmkube.ai/managed-by": "metal-agent"},
            "annotations": {"llmkube.ai/agent-heartbeat": heartbeat},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": [
            {"addresses": [f"192.0.2.{i + 1}"], "conditions": {"ready": True}} for i in range(ready_addresses)
        ],
    }


async def test_metal_service_is_ready_from_the_agents_endpoint_slices(
    operator: RunningController, full_namespace: str
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    name = "llama.3.2"  # dots: the Service (and slice label) is llama-3-2
    admin.create(
        model("mac", source="/Users/me/models/llama.gguf", hardware={"accelerator": "metal"}), namespace=ns
    )
    admin.create(isvc(name, modelRef="mac"), namespace=ns)

    waiting = await eventually(phase_is(admin, "InferenceService", name, ns, "Creating"), what="Creating")
    assert waiting["schedulingStatus"] == "WaitingForMetalAgent"
    assert waiting["endpoint"] == f"http://llama-3-2.{ns}.svc.cluster.local:8080/v1/chat/completions"
    assert admin.get_or_none("apps/v1", "Deployment", name, ns) is None
    assert admin.get_or_none("v1", "Service", "llama-3-2", ns) is None

    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    admin.create(agent_slice("llama-3-2", ns, ready_addresses=1, heartbeat=now), namespace=ns)
    ready = await eventually(
        phase_is(admin, "InferenceService", name, ns, "Ready"), what="Ready from the slice"
    )
    assert ready["readyReplicas"] == 1
    assert condition_triple(ready, "Available") is not None
    assert admin.get_or_none("apps/v1", "Deployment", name, ns) is None

    # A heartbeat older than 3 minutes: the host may be gone, so nothing counts as ready.
    stale = {"metadata": {"annotations": {"llmkube.ai/agent-heartbeat": "2020-01-01T00:00:00Z"}}}
    admin.request(
        "PATCH",
        admin.path_for("discovery.k8s.io/v1", "EndpointSlice", ns, "llama-3-2-agent"),
        stale,
        content_type="application/merge-patch+json",
    )

    def stale_reported() -> bool:
        status = status_of(admin, "InferenceService", name, ns)
        return status.get("schedulingStatus") == "AgentHeartbeatStale" and status.get("readyReplicas") == 0

    await eventually(stale_reported, what="AgentHeartbeatStale")
