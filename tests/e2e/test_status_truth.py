"""Status that tells the truth on the full local control plane: a Model deleted (and recreated)
under a running service, the REASON and QUEUE columns `kubectl get isvc -o wide` shows."""

from collections.abc import AsyncIterator

import pytest
from e2e_support import (
    API,
    RunningController,
    condition_triple,
    delete_services_and_wait,
    eventually,
    hf_model,
    isvc,
    model,
    phase_is,
    status_of,
)

from llmkube.plan.inferenceservice.download import download_progress


@pytest.fixture(autouse=True)
async def services_gone_before_the_namespace(
    operator: RunningController, full_namespace: str
) -> AsyncIterator[None]:
    yield
    await delete_services_and_wait(operator, full_namespace, pods_too=True)


async def test_deleting_the_model_under_a_running_service_reports_serving_replicas(
    operator: RunningController, full_namespace: str
) -> None:
    admin, ns = operator.cluster.admin(), full_namespace
    admin.create(hf_model("m"), namespace=ns)
    admin.create(isvc("svc", modelRef="m", skipModelInit=True, replicas=2), namespace=ns)
    ready = await eventually(phase_is(admin, "InferenceService", "svc", ns, "Ready"), what="Ready")
    endpoint = ready["endpoint"]

    admin.delete(API, "Model", "m", ns)

    def model_reported_missing() -> dict[str, object] | None:
        status = status_of(admin, "InferenceService", "svc", ns)
        return status if status.get("schedulingStatus") == "ModelNotFound" else None

    status = await eventually(model_reported_missing, what="the missing Model reported")
    # The pods still serve: the status says so, instead of 0 ready replicas and no endpoint.
    assert (status["phase"], status["readyReplicas"], status["endpoint"], status["modelReady"]) == (
        "Ready",
        2,
        endpoint,
        False,
    )
    assert condition_triple(status, "Available")[:2] == ("True", "InferenceReady")  # type: ignore[index]
    assert condition_triple(status, "Degraded") == (
        "True",
        "ModelNotFound",
        f'Model "m" not found in namespace "{ns}": '
        "the running replicas keep serving, but no new one can start",
    )
    assert admin.get("apps/v1", "Deployment", "svc", ns)["spec"]["replicas"] == 2  # untouched

    admin.create(hf_model("m"), namespace=ns)

    def recovered() -> dict[str, object] | None:
        status = status_of(admin, "InferenceService", "svc", ns)
        degraded = condition_triple(status, "Degraded")
        return status if degraded and degraded[0] == "False" and status.get("modelReady") else None

    status = await eventually(recovered, what="the Model back")
    assert condition_triple(status, "Degraded")[:2] == ("False", "Recovered")  # type: ignore[index]
    assert status["phase"] == "Ready" and "schedulingStatus" not in status  # nothing to diagnose: left out


async def test_reason_and_queue_columns(operator: RunningController, full_namespace: str) -> None:
    """REASON is filled for Failed, QUEUE unless queued; otherwise both are absent (kubectl shows
    them blank)."""
    admin, ns = operator.cluster.admin(), full_namespace
    admin.create(hf_model("m"), namespace=ns)
    admin.create(isvc("ok", modelRef="m", skipModelInit=True), namespace=ns)
    admin.create(isvc("bad", modelRef="m", skipModelInit=True, resources={"cpu": "two"}), namespace=ns)
    admin.create(isvc("lost", modelRef="nowhere", skipModelInit=True), namespace=ns)
    ok = await eventually(phase_is(admin, "InferenceService", "ok", ns, "Ready"), what="ok Ready")
    bad = await eventually(phase_is(admin, "InferenceService", "bad", ns, "Failed"), what="bad Failed")
    lost = await eventually(phase_is(admin, "InferenceService", "lost", ns, "Failed"), what="lost Failed")
    assert "queuePosition" not in ok and "queuePosition" not in bad
    assert (bad["schedulingStatus"], lost["schedulingStatus"]) == ("InvalidSpec", "ModelNotFound")
    # What `kubectl get isvc -o wide` prints, through the server's own table rendering.
    table = admin.request(
        "GET",
        admin.path_for(API, "InferenceService", ns),
        accept="application/json;as=Table;v=v1;g=meta.k8s.io",
    )
    columns = [c["name"] for c in table["columnDefinitions"]]
    rows = {r["cells"][0]: dict(zip(columns, r["cells"], strict=True)) for r in table["rows"]}
    assert (rows["ok"]["Reason"], rows["ok"]["Queue"]) == (None, None)  # absent, so kubectl shows blanks
    assert (rows["bad"]["Reason"], rows["lost"]["Reason"]) == ("InvalidSpec", "ModelNotFound")


async def test_the_controller_reads_the_downloaders_progress_with_its_own_rbac(
    operator: RunningController, full_namespace: str
) -> None:
    """kwok pods never sit in their init container, so this reads through the controller's own
    reader (its identity, its RBAC: pods/log) from a kwok pod, whose log holds a progress line."""
    admin, ns = operator.cluster.admin(), full_namespace
    admin.create(model("m"), namespace=ns)  # an https source: the pods get the downloader
    admin.create(isvc("dl", modelRef="m"), namespace=ns)
    await eventually(phase_is(admin, "InferenceService", "dl", ns, "Ready"), what="Ready")
    (pod,) = admin.list("v1", "Pod", ns, label_selector="inference.llmkube.dev/service=dl")
    tail = await operator.controllers.inference_services._download_log(ns, pod["metadata"]["name"])
    assert tail is not None
    assert download_progress("dl", tail).message() == "Downloading the model: 1.0 GiB of 4.0 GiB (25%)"
