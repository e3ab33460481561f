"""Optional status fields with nothing to say are left out, on a real API server: an object written
by an older controller (which wrote them as "") costs no write for that alone, and loses them with
the next status that changes anyway (server-side apply drops the fields our manager no longer
sends)."""

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from llmkube_testing.pytest_plugin import ClusterHandle, apply_manifests
from llmkube_testing.request_log import RequestLog

from llmkube.api.crds import all_crds
from llmkube.api.inferenceservice import InferenceServiceStatus
from llmkube.api.model import ModelStatus
from llmkube.controllers.inferenceservice import encode_status as encode_service_status
from llmkube.controllers.model import encode_status as encode_model_status
from llmkube.controllers.resources import INFERENCE_SERVICES, MODELS
from llmkube.kube.apply import Applier
from llmkube.kube.control import StatusWriter
from llmkube.kube.resource import Resource
from llmkube.kube.rest import ApiClient, load_client_config
from llmkube.plan.inferenceservice.status import status_changed as service_status_changed
from llmkube.plan.model.status import status_changed as model_status_changed

pytestmark = pytest.mark.integration

API = "inference.llmkube.dev/v1alpha1"
T0 = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def crds_installed(api_cluster: ClusterHandle) -> ClusterHandle:
    apply_manifests(api_cluster, all_crds())
    return api_cluster


@pytest.fixture
async def client(crds_installed: ClusterHandle, requests: RequestLog) -> AsyncIterator[ApiClient]:
    config = await load_client_config(crds_installed.kubeconfig)
    async with ApiClient.from_config(config, observer=requests) as api:
        yield api


@pytest.fixture
def requests() -> RequestLog:
    return RequestLog()


async def written_by_an_older_version(
    client: ApiClient, resource: Resource, obj: dict[str, Any], status: dict[str, Any]
) -> dict[str, Any]:
    """Create `obj` and apply `status` as its status with our field manager, as an older llmkube
    did; returns the object as stored (what the cache would hold)."""
    created = await client.create(resource, obj)
    meta = {"name": created["metadata"]["name"], "namespace": created["metadata"]["namespace"]}
    body = {"apiVersion": API, "kind": resource.kind, "metadata": meta, "status": status}
    stored, _ = await client.apply(resource, body, subresource="status")
    return stored


async def test_a_service_status_with_empty_fields_is_left_alone_then_cleaned_by_the_next_change(
    client: ApiClient, requests: RequestLog, namespace: str
) -> None:
    ready = InferenceServiceStatus(
        phase="Ready",
        replicas=1,
        ready_replicas=1,
        desired_replicas=1,
        endpoint="http://svc.ns.svc.cluster.local:8080/v1/chat/completions",
        model_ready=True,
        last_updated=T0,
    )
    empty = {"schedulingStatus": "", "schedulingMessage": "", "waitingFor": ""}
    isvc = {
        "apiVersion": API,
        "kind": "InferenceService",
        "metadata": {"name": "svc", "namespace": namespace},
        "spec": {"modelRef": "m"},
    }
    observed = await written_by_an_older_version(
        client, INFERENCE_SERVICES, isvc, {**encode_service_status(ready), **empty}
    )
    assert {key: observed["status"][key] for key in empty} == empty
    cached = InferenceServiceStatus.model_validate(observed["status"])
    writer = StatusWriter(
        Applier(client), INFERENCE_SERVICES, differs=service_status_changed, encode=encode_service_status
    )
    writes = requests.mutating_requests()

    # Planned again, unchanged but for the time: no write, although the stored status has the "".
    later = ready.model_copy(update={"last_updated": T0 + timedelta(minutes=5)})
    assert await writer.write(observed, cached, later) is None
    assert requests.mutating_requests() == writes

    # The next real change is one write, and the empty fields are gone with it.
    progressing = later.model_copy(update={"phase": "Progressing", "ready_replicas": 0})
    assert await writer.write(observed, cached, progressing) is not None
    assert requests.mutating_requests() == writes + 1
    stored = await client.get(INFERENCE_SERVICES, "svc", namespace)
    assert stored["status"]["phase"] == "Progressing"
    assert not set(empty) & set(stored["status"]), stored["status"]


async def test_a_model_status_with_an_empty_path_is_left_alone_then_cleaned_by_the_next_change(
    client: ApiClient, requests: RequestLog, namespace: str
) -> None:
    ready = ModelStatus(phase="Ready", size="0", cache_key="", last_updated=T0)
    model = {
        "apiVersion": API,
        "kind": "Model",
        "metadata": {"name": "hf", "namespace": namespace},
        "spec": {"source": "https://example.com/m.gguf", "format": "gguf"},
    }
    observed = await written_by_an_older_version(
        client, MODELS, model, {**encode_model_status(ready), "path": ""}
    )
    assert observed["status"]["path"] == ""
    cached = ModelStatus.model_validate(observed["status"])
    writer = StatusWriter(Applier(client), MODELS, differs=model_status_changed, encode=encode_model_status)
    writes = requests.mutating_requests()

    later = ready.model_copy(update={"last_updated": T0 + timedelta(minutes=5)})
    assert await writer.write(observed, cached, later) is None
    assert requests.mutating_requests() == writes

    failed = later.model_copy(update={"phase": "Failed"})
    assert await writer.write(observed, cached, failed) is not None
    assert requests.mutating_requests() == writes + 1
    stored = await client.get(MODELS, "hf", namespace)
    assert stored["status"]["phase"] == "Failed"
    assert "path" not in stored["status"], stored["status"]
