"""A Recreate drain on the real API server, with the controller in-process: while a pod of a drained
GPU service terminates, its Service selects no pod (kube-proxy would otherwise keep sending new
requests to the terminating pod, its only endpoint), the service says it drains, and a pod still
there at its deadline is a DrainTimedOut Event; once the pod is gone the selector is the usual one.

The terminating pod is made by the test: unscheduled (a scheduler nobody runs), its server shown
running through the status subresource, held by a finalizer of the test's own; deleted, the API
server gives it no grace (it was never scheduled), so its deadline has passed at once."""

from typing import Any

from e2e_support import RunningController, condition_triple, eventually, hf_model, isvc, status_of

from llmkube.plan.inferenceservice.drain import DRAINING, HOLD_LABEL, ROLLOUT_ANNOTATION
from llmkube.plan.inferenceservice.names import selector_labels

NAME = "held"
FINALIZER = "e2e.llmkube.dev/hold"


def terminating_pod(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{NAME}-old",
            "namespace": namespace,
            # The service's pod label only: no Deployment selector matches it, nothing adopts it.
            "labels": {"inference.llmkube.dev/service": NAME},
            "finalizers": [FINALIZER],
        },
        "spec": {"schedulerName": "nobody", "containers": [{"name": "llama-server", "image": "x"}]},
    }


async def test_a_recreate_drain_holds_the_service_and_reports_the_timeout(
    operator: RunningController, full_namespace: str
) -> None:
    admin, ns = operator.cluster.admin(), full_namespace
    admin.create(hf_model("gpu-model", hardware={"accelerator": "cuda", "gpu": {"count": 1}}), namespace=ns)
    service = isvc(NAME, modelRef="gpu-model", skipModelInit=True, replicas=0)
    service["metadata"]["annotations"] = {ROLLOUT_ANNOTATION: "drain"}
    admin.create(service, namespace=ns)
    await eventually(lambda: admin.get_or_none("v1", "Service", NAME, ns), what="the Service")
    assert admin.get("v1", "Service", NAME, ns)["spec"]["selector"] == selector_labels(NAME)

    pod = admin.create(terminating_pod(ns), namespace=ns)
    running = {"running": {"startedAt": "2026-03-01T12:00:00Z"}}
    statuses = [
        {
            "name": "llama-server",
            "image": "x",
            "imageID": "",
            "ready": True,
            "restartCount": 0,
            "state": running,
        }
    ]
    admin.request(
        "PATCH",
        f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}/status",
        {"status": {"phase": "Running", "containerStatuses": statuses}},
        content_type="application/merge-patch+json",
    )
    admin.delete("v1", "Pod", pod["metadata"]["name"], ns)

    held = await eventually(
        lambda: (
            (selector := admin.get("v1", "Service", NAME, ns)["spec"]["selector"]).get(HOLD_LABEL)
            and selector
        ),
        what="the Service held",
    )
    assert held == {**selector_labels(NAME), HOLD_LABEL: "holding"}
    message = (
        "The drain's timeout (120 s) passed with held-old still holding requests: the server is stopped now"
    )
    await eventually(
        lambda: (
            condition_triple(status_of(admin, "InferenceService", NAME, ns), DRAINING)
            == ("True", "DrainTimedOut", message)
        ),
        what="Draining: DrainTimedOut",
    )
    events = await eventually(
        lambda: [e for e in admin.list("v1", "Event", ns) if e.get("reason") == "DrainTimedOut"],
        what="the DrainTimedOut Event",
    )
    assert [
        (e["type"], e["involvedObject"]["kind"], e["involvedObject"]["name"], e["message"]) for e in events
    ] == [("Warning", "InferenceService", NAME, message)]

    # The pod goes: the Service selects pods again, and the condition keeps the timeout's account.
    admin.request(
        "PATCH",
        f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}",
        {"metadata": {"finalizers": None}},
        content_type="application/merge-patch+json",
    )
    await eventually(
        lambda: admin.get("v1", "Service", NAME, ns)["spec"]["selector"] == selector_labels(NAME),
        what="the Service's usual selector",
    )
    ended = ("False", "DrainTimedOut", "The last drain was cut by its timeout: see the DrainTimedOut event")
    await eventually(
        lambda: condition_triple(status_of(admin, "InferenceService", NAME, ns), DRAINING) == ended,
        what="Draining False",
    )
    assert operator.requests.rbac_refusals() == {}
