"""Taking over the objects the reference operator created (its field manager is `manager`, and it
writes with Update operations: create, then read-modify-write).

Server-side apply removes only fields our manager owns, so without a migration a field the
reference set and we do not (an annotation a user has since removed from `podAnnotations`, an env
var, a non-default `sessionAffinity`) would stay for ever. The controller adopts the reference's
fields once (its Update entries become part of our Apply entry), after which our apply removes what
we do not set. The objects carry the InferenceService as their controller owner, which is what
lets the controller take them over at all: an object with another controller is never touched."""

from datetime import UTC, datetime
from typing import Any

import pytest
from e2e_support import (
    API,
    RunningController,
    eventually,
    eventually_equal,
    hf_model,
    isvc,
    phase_is,
    reconcile_now,
    services_deleted_first,  # noqa: F401  (a fixture)
    writes_quiesce,
)

from llmkube.api.inferenceservice import InferenceService
from llmkube.api.model import Model
from llmkube.kube.types import ObjectKey
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.observed import ObservedState
from llmkube.plan.inferenceservice.planner import plan_inference_service

pytestmark = pytest.mark.usefixtures("services_deleted_first")

REFERENCE_MANAGER = "manager"  # controller-runtime's default: the binary's name
STRAY_ANNOTATION = "example.com/removed-from-pod-annotations"


def owner(created: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": created["apiVersion"],
        "kind": "InferenceService",
        "name": created["metadata"]["name"],
        "uid": created["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": False,
    }


def reference_deployment(created: dict[str, Any]) -> dict[str, Any]:
    """What the reference (v0.8.7) creates for a CPU llama.cpp service with an http source and defaults,
    plus fields of its own making that we do not set."""
    name = created["metadata"]["name"]
    labels = {
        "app": name,
        "inference.llmkube.dev/model": created["spec"]["modelRef"],
        "inference.llmkube.dev/service": name,
        "inference.llmkube.dev/runtime": "llamacpp",
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels, "ownerReferences": [owner(created)]},
        "spec": {
            "replicas": 1,
            "revisionHistoryLimit": 3,  # stray: we leave the server's default (10)
            "selector": {"matchLabels": {"app": name, "inference.llmkube.dev/service": name}},
            "template": {
                "metadata": {"labels": labels, "annotations": {STRAY_ANNOTATION: "yes"}},
                "spec": {
                    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}, "fsGroup": 102},
                    "priorityClassName": "llmkube-normal",
                    "containers": [
                        {
                            "name": "llama-server",
                            "image": "ghcr.io/ggml-org/llama.cpp:server",
                            "args": ["--model", "", "--host", "0.0.0.0", "--port", "8080", "--metrics"],
                            "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                            "env": [{"name": "LEGACY_ONLY", "value": "1"}],  # stray
                        }
                    ],
                },
            },
        },
    }


def reference_service(created: dict[str, Any]) -> dict[str, Any]:
    name = created["metadata"]["name"]
    selector = {"app": name, "inference.llmkube.dev/service": name}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "labels": {**selector, "legacy.example.com/team": "search"},  # a stray label
            "ownerReferences": [owner(created)],
        },
        "spec": {
            "type": "ClusterIP",
            "selector": selector,
            "sessionAffinity": "ClientIP",  # stray: we leave the default (None)
            "ports": [{"name": "http", "port": 8080, "targetPort": 8080, "protocol": "TCP"}],
        },
    }


def create_as_reference(admin: Any, obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    path = admin.path_for(obj["apiVersion"], obj["kind"], namespace)
    return admin.request("POST", path, obj, query={"fieldManager": REFERENCE_MANAGER})  # type: ignore[no-any-return]


def managers(obj: dict[str, Any]) -> set[tuple[str, str]]:
    return {(e["manager"], e["operation"]) for e in obj["metadata"].get("managedFields") or []}


def spec_managers(obj: dict[str, Any]) -> set[tuple[str, str]]:
    """Managers of the object itself (not of its status, which the Deployment controller writes)."""
    entries = obj["metadata"].get("managedFields") or []
    return {(e["manager"], e["operation"]) for e in entries if not e.get("subresource")}


def taken_over_without_adoption(admin: Any, created: dict[str, Any]) -> None:
    """What a controller build without adoption did to the reference's objects: a forced apply of
    its intent (our label and fields added, the reference's extra fields and entries kept). The
    objects are then in the controller's label-scoped cache, which keeps other managers' entries
    only as stubs."""
    model = Model.model_validate(
        {
            "metadata": {"name": "m", "namespace": created["metadata"]["namespace"]},
            "spec": {"source": "e2e-org/m"},
            "status": {"phase": "Ready"},
        }
    )
    plan = plan_inference_service(
        InferenceService.model_validate(created),
        model,
        ObservedState(now=datetime.now(UTC)),
        OperatorConfig(),
    )
    for intent in (plan.deployment, plan.service):
        assert intent is not None
        meta = intent["metadata"]
        path = admin.path_for(intent["apiVersion"], intent["kind"], meta["namespace"], meta["name"])
        admin.request(
            "PATCH",
            path,
            intent,
            content_type="application/apply-patch+yaml",
            query={"fieldManager": "llmkube-controller", "force": "true"},
        )


@pytest.mark.parametrize(
    "earlier_takeover",
    [
        pytest.param(False, id="first-contact"),
        pytest.param(True, id="after-a-takeover-without-adoption"),
    ],
)
async def test_objects_of_the_reference_operator_are_adopted_and_their_stray_fields_removed(
    operator: RunningController, full_namespace: str, earlier_takeover: bool
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    controller = operator.controllers.inference_services.controller
    # The Model comes last, so the controller applies nothing while we play the reference.
    created = admin.create(isvc("svc", modelRef="m", skipModelInit=True), namespace=ns)
    await eventually(phase_is(admin, "InferenceService", "svc", ns, "Failed"), what="svc waits for m")
    deployment = create_as_reference(admin, reference_deployment(created), ns)
    service = create_as_reference(admin, reference_service(created), ns)
    assert managers(deployment) == {(REFERENCE_MANAGER, "Update")}
    assert managers(service) == {(REFERENCE_MANAGER, "Update")}
    if earlier_takeover:
        taken_over_without_adoption(admin, created)
        kept = admin.get("apps/v1", "Deployment", "svc", ns)
        assert (REFERENCE_MANAGER, "Update") in managers(kept)
        assert STRAY_ANNOTATION in kept["spec"]["template"]["metadata"]["annotations"]

    admin.create(hf_model("m"), namespace=ns)
    await eventually(phase_is(admin, "InferenceService", "svc", ns, "Ready"), what="svc Ready")

    def converged_deployment() -> dict[str, Any] | None:
        current = admin.get("apps/v1", "Deployment", "svc", ns)
        template = current["spec"]["template"]
        (container,) = template["spec"]["containers"]
        names = [var["name"] for var in container.get("env") or []]
        if STRAY_ANNOTATION in (template["metadata"].get("annotations") or {}) or "LEGACY_ONLY" in names:
            return None
        return current  # type: ignore[no-any-return]

    adopted = await eventually(converged_deployment, what="the reference's stray Deployment fields gone")
    assert adopted["metadata"]["uid"] == deployment["metadata"]["uid"]  # taken over, not recreated
    assert adopted["spec"]["revisionHistoryLimit"] == 10  # back to the server's default
    assert adopted["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "llmkube"
    assert (REFERENCE_MANAGER, "Update") not in managers(adopted)

    def service_fields() -> tuple[str, str | None]:
        current = admin.get("v1", "Service", "svc", ns)
        return current["spec"]["sessionAffinity"], current["metadata"]["labels"].get(
            "legacy.example.com/team"
        )

    await eventually_equal(service_fields, ("None", None), what="the reference's stray Service fields gone")
    adopted_service = admin.get("v1", "Service", "svc", ns)
    assert adopted_service["metadata"]["uid"] == service["metadata"]["uid"]
    assert adopted_service["spec"]["clusterIP"] == service["spec"]["clusterIP"]
    assert adopted_service["spec"]["ports"] == [
        {"name": "http", "port": 8080, "targetPort": "http", "protocol": "TCP"}
    ]
    assert (REFERENCE_MANAGER, "Update") not in managers(adopted_service)

    # Taken over once: from now on a reconcile writes nothing.
    await writes_quiesce(operator)
    before = operator.mutating_requests()
    await reconcile_now(controller, ObjectKey(ns, "svc"))
    assert operator.mutating_requests() == before
    await eventually(phase_is(admin, "InferenceService", "svc", ns, "Ready"), what="svc still Ready")


async def test_an_object_of_the_reference_owned_by_another_service_is_not_adopted(
    operator: RunningController, full_namespace: str
) -> None:
    """Adoption never takes over what another controls: the reference's object controlled by a different
    InferenceService is refused, not taken over."""
    admin = operator.cluster.admin()
    ns = full_namespace
    other = admin.create(isvc("other", modelRef="never-there", skipModelInit=True), namespace=ns)
    created = admin.create(isvc("svc", modelRef="m", skipModelInit=True), namespace=ns)
    await eventually(phase_is(admin, "InferenceService", "svc", ns, "Failed"), what="svc waits for m")
    theirs = reference_deployment(created)
    theirs["metadata"]["ownerReferences"] = [owner(other)]
    create_as_reference(admin, theirs, ns)
    admin.create(hf_model("m"), namespace=ns)

    def refused() -> bool:
        status = admin.get(API, "InferenceService", "svc", ns).get("status") or {}
        return any(
            "is not controlled by this InferenceService" in c.get("message", "")
            for c in status.get("conditions") or []
        )

    await eventually(refused, what="svc refuses the object it does not control")
    await writes_quiesce(operator)
    kept = admin.get("apps/v1", "Deployment", "svc", ns)
    assert spec_managers(kept) == {(REFERENCE_MANAGER, "Update")}
    assert "app.kubernetes.io/managed-by" not in kept["metadata"]["labels"]
    assert STRAY_ANNOTATION in kept["spec"]["template"]["metadata"]["annotations"]
