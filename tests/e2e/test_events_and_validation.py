"""Warnings reach users as events.k8s.io Events (the controller's RBAC allows them: the reference's
did not, https://github.com/defilantech/LLMKube/issues/910), and bad input the schema cannot catch
gives a clear Failed status, an Event, and no hot loop."""

import asyncio
from typing import Any

import pytest
from e2e_support import (
    API,
    RunningController,
    condition_triple,
    eventually,
    hf_model,
    isvc,
    patch_isvc,
    phase_is,
    reconcile_log,
    services_deleted_first,  # noqa: F401  (a fixture)
    status_of,
    worked_through,
)
from llmkube_testing.rest import KubeRest

from llmkube.kube.types import ObjectKey

pytestmark = pytest.mark.usefixtures("services_deleted_first")

EVENTS = "events.k8s.io/v1"


def events_for(admin: KubeRest, namespace: str, name: str) -> list[dict[str, Any]]:
    return [
        event
        for event in admin.list(EVENTS, "Event", namespace)
        if (event.get("regarding") or {}).get("name") == name
        and (event.get("regarding") or {}).get("kind") == "InferenceService"
    ]


def reasons(admin: KubeRest, namespace: str, name: str) -> set[str]:
    return {event["reason"] for event in events_for(admin, namespace, name)}


async def test_missing_memory_request_is_an_event(operator: RunningController, full_namespace: str) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    admin.create(hf_model("m"), namespace=ns)
    # CPU MoE offload keeps expert weights in host RAM: without a memory request, warn.
    admin.create(isvc("moe", modelRef="m", skipModelInit=True, moeCPUOffload=True), namespace=ns)
    await eventually(phase_is(admin, "InferenceService", "moe", ns, "Ready"), what="moe Ready")
    await eventually(lambda: "MissingMemoryRequest" in reasons(admin, ns, "moe"), what="the warning event")
    (event,) = [e for e in events_for(admin, ns, "moe") if e["reason"] == "MissingMemoryRequest"]
    assert event["type"] == "Warning"
    # One reporter name, the reference's: `kubectl describe` shows it in its From column (it reads
    # core/v1 Events, where reportingController is reportingComponent and source is empty).
    assert event["reportingController"] == "inferenceservice-controller"
    (core,) = [e for e in admin.list("v1", "Event", ns) if e["metadata"]["name"] == event["metadata"]["name"]]
    assert core["reportingComponent"] == "inferenceservice-controller"
    assert not (core.get("source") or {}).get("component")
    assert event["regarding"]["apiVersion"] == "inference.llmkube.dev/v1alpha1"
    assert event["note"]  # says what to do


async def test_invalid_quantity_fails_clearly_without_a_hot_loop(
    operator: RunningController, full_namespace: str
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    controller = operator.controllers.inference_services.controller
    log = reconcile_log(controller)
    admin.create(hf_model("m"), namespace=ns)
    admin.create(isvc("bad", modelRef="m", skipModelInit=True, resources={"cpu": "two"}), namespace=ns)
    await eventually(phase_is(admin, "InferenceService", "bad", ns, "Failed"), what="bad Failed")
    status = status_of(admin, "InferenceService", "bad", ns)
    degraded = condition_triple(status, "Degraded")
    assert degraded is not None and degraded[:2] == ("True", "InvalidSpec")
    assert "resources.cpu" in degraded[2] and "two" in degraded[2]
    # Nothing was applied for an invalid spec.
    assert admin.get_or_none("apps/v1", "Deployment", "bad", ns) is None
    await eventually(lambda: "InvalidSpec" in reasons(admin, ns, "bad"), what="the InvalidSpec event")

    # No hot loop: without a new event the service is not reconciled again.
    key = ObjectKey(ns, "bad")
    before = log(key)
    await asyncio.sleep(3)  # an observation window: a hot loop would reconcile many times in it
    await worked_through(operator.controllers.inference_services.controller, ns)  # and it was worked
    assert log(key) - before <= 1  # at most the echo of our own write, never a retry storm

    # Fixing the spec heals it.
    patch_isvc(admin, "bad", ns, {"resources": {"cpu": "2"}})
    await eventually(phase_is(admin, "InferenceService", "bad", ns, "Ready"), what="healed")
    assert condition_triple(status_of(admin, "InferenceService", "bad", ns), "Degraded") == (
        "False",
        "Recovered",
        "No longer failing: the service is Ready",
    )


async def test_a_service_with_the_longest_name_gets_its_warning_event(
    operator: RunningController, full_namespace: str
) -> None:
    """A 253-character name (the most an object's name may have) fails validation, and the Warning
    Event that says why exists: the Event's own name, `<name>.<suffix>` in client-go's form, would
    be longer than any name the API server accepts."""
    admin = operator.cluster.admin()
    ns = full_namespace
    name = "n" * 253
    admin.create(hf_model("m"), namespace=ns)
    admin.create(isvc(name, modelRef="m", skipModelInit=True), namespace=ns)
    await eventually(phase_is(admin, "InferenceService", name, ns, "Failed"), what="the long name Failed")
    status = status_of(admin, "InferenceService", name, ns)
    assert status["schedulingStatus"] == "InvalidSpec"
    await eventually(lambda: "InvalidSpec" in reasons(admin, ns, name), what="the InvalidSpec event")
    (event,) = [e for e in events_for(admin, ns, name) if e["reason"] == "InvalidSpec"]
    assert event["type"] == "Warning"
    assert event["regarding"]["uid"] == admin.get(API, "InferenceService", name, ns)["metadata"]["uid"]
    assert len(event["metadata"]["name"]) <= 253 and event["metadata"]["name"].startswith("n" * 200)
    degraded = condition_triple(status, "Degraded")
    assert degraded is not None and degraded[:2] == ("True", "InvalidSpec")
    assert event["note"] in degraded[2]  # one Event per problem, each named in the condition
