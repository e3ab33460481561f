"""Per-service model storage (--model-storage=per-service) on the full control plane: each service
gets a claim of its own, owned by it and garbage-collected with it; a switch of mode re-plans the
Deployment onto the other claim; an annotation asking for another size never resizes the claim, and
the service says so.

The session's controller runs in namespace mode. A switch of `--model-storage` is a restart with
another flag, after which every service is reconciled under it: here the controller's configuration
is replaced for the test (and put back after it) and the test's services are reconciled, which is
what a restart does to them. Services have no replicas, so no pod holds a claim (the e2e cluster
provisions no volumes) and a claim's deletion is not held up by pvc-protection.
"""

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

import pytest
from e2e_support import (
    API,
    RunningController,
    eventually,
    isvc,
    model,
    patch,
    phase_is,
    reconcile_log,
    reconcile_now,
    services_deleted_first,  # noqa: F401  (a fixture)
    status_of,
    worked_through,
)

from llmkube.kube.types import ObjectKey
from llmkube.plan.inferenceservice.config import ModelStorageKind
from llmkube.plan.inferenceservice.service_cache import CACHE_NOT_RESIZED, CACHE_SIZE_ANNOTATION

pytestmark = pytest.mark.usefixtures("services_deleted_first")

CLAIM = ("v1", "PersistentVolumeClaim")
NAMESPACE_CLAIM = "llmkube-model-cache"
MAXIMUM = "3Gi"  # the test Model's size is not measured (the runtime would fetch it): it gets this


@contextlib.asynccontextmanager
async def storage_mode(
    operator: RunningController, mode: ModelStorageKind, namespace: str
) -> AsyncIterator[None]:
    """The InferenceService controller under `--model-storage=<mode>` while the block runs, its
    services in `namespace` reconciled at the switch and at the switch back."""
    controller = operator.controllers.inference_services
    before = controller.config
    admin = operator.cluster.admin()

    async def replan() -> None:
        names = [s["metadata"]["name"] for s in admin.list(API, "InferenceService", namespace)]
        await reconcile_now(controller.controller, *(ObjectKey(namespace, n) for n in names), within=60)

    controller.config = replace(before, model_storage=mode, max_service_cache_size=MAXIMUM)
    try:
        await replan()
        yield
    finally:
        controller.config = before
        await replan()


def claim_names(admin: Any, deployment: dict[str, Any]) -> list[str]:
    volumes = deployment["spec"]["template"]["spec"].get("volumes") or []
    return [v["persistentVolumeClaim"]["claimName"] for v in volumes if "persistentVolumeClaim" in v]


def deployment_claims(admin: Any, name: str, namespace: str) -> Callable[[], list[str] | None]:
    def check() -> list[str] | None:
        found = admin.get_or_none("apps/v1", "Deployment", name, namespace)
        return claim_names(admin, found) if found else None

    return check


async def test_each_service_gets_a_claim_of_its_own_owned_and_deleted_with_it(
    operator: RunningController, full_namespace: str
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    admin.create(model("m"), namespace=ns)
    async with storage_mode(operator, "per-service", ns):
        for name in ("one", "two"):
            admin.create(isvc(name, modelRef="m", replicas=0), namespace=ns)
        for name in ("one", "two"):
            await eventually(phase_is(admin, "InferenceService", name, ns, "Stopped"), what=f"{name} Stopped")
        claims = {
            name: await eventually(
                lambda name=name: admin.get_or_none(*CLAIM, f"{name}-model-cache", ns), what=f"{name}'s claim"
            )
            for name in ("one", "two")
        }
        for name, claim in claims.items():
            service = admin.get(API, "InferenceService", name, ns)
            (owner,) = claim["metadata"]["ownerReferences"]
            assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
                "InferenceService",
                name,
                service["metadata"]["uid"],
                True,
            )
            assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
            assert claim["spec"]["resources"]["requests"]["storage"] == MAXIMUM
            assert claim["metadata"]["labels"]["inference.llmkube.dev/service"] == name
            managers = {entry["manager"] for entry in claim["metadata"].get("managedFields") or []}
            assert operator.manager.applier.field_manager in managers, managers  # ours wrote it
            assert deployment_claims(admin, name, ns)() == [f"{name}-model-cache"]
        assert admin.get_or_none(*CLAIM, NAMESPACE_CLAIM, ns) is None  # no namespace claim for them

        admin.delete(API, "InferenceService", "one", ns)
        # The garbage collector follows the owner reference (its first pass over a CRD's dependents
        # can wait for its discovery resync).
        await eventually(
            lambda: admin.get_or_none(*CLAIM, "one-model-cache", ns) is None,
            within=120,
            what="one's claim deleted with it",
        )
        kept = admin.get(*CLAIM, "two-model-cache", ns)
        assert kept["metadata"]["uid"] == claims["two"]["metadata"]["uid"]


async def test_switching_modes_replans_the_deployment(
    operator: RunningController, full_namespace: str
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    admin.create(model("m"), namespace=ns)
    admin.create(isvc("svc", modelRef="m", replicas=0), namespace=ns)
    await eventually(phase_is(admin, "InferenceService", "svc", ns, "Stopped"), what="svc Stopped")
    await eventually(
        lambda: deployment_claims(admin, "svc", ns)() == [NAMESPACE_CLAIM], what="namespace claim"
    )
    assert admin.get_or_none(*CLAIM, "svc-model-cache", ns) is None

    async with storage_mode(operator, "per-service", ns):
        await eventually(
            lambda: deployment_claims(admin, "svc", ns)() == ["svc-model-cache"], what="the service's claim"
        )
        own = admin.get(*CLAIM, "svc-model-cache", ns)
    # Back to the namespace's claim; the service's own stays, unused, until the service goes.
    await eventually(
        lambda: deployment_claims(admin, "svc", ns)() == [NAMESPACE_CLAIM], what="the namespace claim again"
    )
    assert admin.get(*CLAIM, "svc-model-cache", ns)["metadata"]["uid"] == own["metadata"]["uid"]
    assert admin.get_or_none(*CLAIM, NAMESPACE_CLAIM, ns) is not None

    async with storage_mode(operator, "ephemeral", ns):
        await eventually(lambda: deployment_claims(admin, "svc", ns)() == [], what="an emptyDir, no claim")
        volumes = admin.get("apps/v1", "Deployment", "svc", ns)["spec"]["template"]["spec"]["volumes"]
        assert any(v["name"] == "model-storage" and "emptyDir" in v for v in volumes), volumes


def spec_valid(admin: Any, name: str, namespace: str) -> dict[str, Any]:
    found = [c for c in status_of(admin, "InferenceService", name, namespace).get("conditions") or []]
    return next((c for c in found if c["type"] == "SpecValid"), {})


def event_reasons(admin: Any, name: str, namespace: str) -> list[tuple[str, str]]:
    return [
        (event["reason"], event.get("note") or "")
        for event in admin.list("events.k8s.io/v1", "Event", namespace)
        if (event.get("regarding") or {}).get("name") == name
    ]


async def test_a_changed_size_annotation_never_resizes_the_claim_and_the_service_says_so(
    operator: RunningController, full_namespace: str
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    admin.create(model("m"), namespace=ns)
    async with storage_mode(operator, "per-service", ns):
        service = isvc("svc", modelRef="m", replicas=0)
        service["metadata"]["annotations"] = {CACHE_SIZE_ANNOTATION: "1Gi"}
        admin.create(service, namespace=ns)
        await eventually(phase_is(admin, "InferenceService", "svc", ns, "Stopped"), what="svc Stopped")
        first = await eventually(lambda: admin.get_or_none(*CLAIM, "svc-model-cache", ns), what="the claim")
        assert first["spec"]["resources"]["requests"]["storage"] == "1Gi"
        assert spec_valid(admin, "svc", ns).get("status") in (None, "True")  # nothing to say (yet)
        generation = admin.get(API, "InferenceService", "svc", ns)["metadata"]["generation"]
        controller = operator.controllers.inference_services.controller
        await worked_through(controller, ns)
        reconciles = reconcile_log(controller)
        key = ObjectKey(ns, "svc")
        before = reconciles(key)
        settled_claim = admin.get(*CLAIM, "svc-model-cache", ns)

        # A merge patch of the annotation only: no new generation. The watch alone must bring the
        # reconcile (nothing here enqueues the service).
        patched = patch(
            admin,
            API,
            "InferenceService",
            "svc",
            ns,
            {"metadata": {"annotations": {CACHE_SIZE_ANNOTATION: "2Gi"}}},
        )
        assert patched["metadata"]["generation"] == generation

        def says_so() -> dict[str, Any] | None:
            condition = spec_valid(admin, "svc", ns)
            message = condition.get("message") or ""
            told = condition.get("status") == "False" and "never resizes" in message
            return condition if told and "2Gi" in message and "1Gi" in message else None

        condition = await eventually(says_so, what="SpecValid saying the claim is not resized")
        assert reconciles(key) > before
        assert CACHE_SIZE_ANNOTATION in condition["message"]
        notes = await eventually(
            lambda: [note for reason, note in event_reasons(admin, "svc", ns) if reason == CACHE_NOT_RESIZED],
            what="a ModelCacheNotResized Event",
        )
        assert "2Gi" in notes[0] and "1Gi" in notes[0]
        claim = admin.get(*CLAIM, "svc-model-cache", ns)
        # Untouched: so no event of the claim's brought that reconcile, the service's watch did.
        assert claim["metadata"]["resourceVersion"] == settled_claim["metadata"]["resourceVersion"]
        assert claim["metadata"]["uid"] == first["metadata"]["uid"]
        assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"  # never resized
        assert status_of(admin, "InferenceService", "svc", ns)["phase"] == "Stopped"  # still served as it is

        # Asked above the maximum: the service fails, naming both sizes; the claim is still untouched.
        patch(
            admin,
            API,
            "InferenceService",
            "svc",
            ns,
            {"metadata": {"annotations": {CACHE_SIZE_ANNOTATION: "5Gi"}}},
        )
        failed = await eventually(phase_is(admin, "InferenceService", "svc", ns, "Failed"), what="svc Failed")
        messages = [c["message"] for c in failed["conditions"] if c["status"] == "False"]
        assert any("5Gi" in m and MAXIMUM in m for m in messages), messages
        assert admin.get(*CLAIM, "svc-model-cache", ns)["spec"]["resources"]["requests"]["storage"] == "1Gi"

        # What the service says to do: with no pod on it, delete the claim; it is made again at the
        # size asked for, and there is nothing left to say.
        patch(
            admin,
            API,
            "InferenceService",
            "svc",
            ns,
            {"metadata": {"annotations": {CACHE_SIZE_ANNOTATION: "2Gi"}}},
        )
        await eventually(phase_is(admin, "InferenceService", "svc", ns, "Stopped"), what="svc Stopped again")
        admin.delete(*CLAIM, "svc-model-cache", ns)

        def made_again() -> dict[str, Any] | None:
            found = admin.get_or_none(*CLAIM, "svc-model-cache", ns)
            return found if found and found["metadata"]["uid"] != first["metadata"]["uid"] else None

        again = await eventually(made_again, within=90, what="the claim made again")
        assert again["spec"]["resources"]["requests"]["storage"] == "2Gi"
        await eventually(
            lambda: spec_valid(admin, "svc", ns).get("status") in (None, "True"),
            what="SpecValid with nothing to say",
        )


async def test_a_resource_quota_refusing_the_claim_fails_the_service_and_it_recovers_when_lifted(
    operator: RunningController, full_namespace: str
) -> None:
    """The namespace's storage quota is below the claim the service needs: the API server refuses
    the claim (403, exceeded quota), the service fails with that message and an Event, and nothing
    else is written for it; the quota raised, the next retry creates the claim and the service is
    served again, by itself."""
    admin = operator.cluster.admin()
    ns = full_namespace
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "small-storage"},
        "spec": {"hard": {"requests.storage": "1Gi"}},
    }
    # The quota's 403s are shaped like an authorizer's: they are this test's doing, not RBAC's.
    operator.requests.excuse_forbidden_in(ns)
    admin.create(quota, namespace=ns)
    # The quota controller fills in `status.hard` before the admission plugin enforces the quota.
    await eventually(
        lambda: (admin.get("v1", "ResourceQuota", "small-storage", ns).get("status") or {}).get("hard"),
        what="the quota's status",
    )
    admin.create(model("m"), namespace=ns)
    async with storage_mode(operator, "per-service", ns):
        admin.create(isvc("svc", modelRef="m", replicas=0), namespace=ns)
        failed = await eventually(phase_is(admin, "InferenceService", "svc", ns, "Failed"), what="svc Failed")
        messages = [c.get("message") or "" for c in failed["conditions"] if c["type"] != "Ready"]
        told = [m for m in messages if "exceeded quota: small-storage" in m]
        assert told and "svc-model-cache" in told[0], failed["conditions"]
        assert admin.get_or_none(*CLAIM, "svc-model-cache", ns) is None
        assert admin.get_or_none("apps/v1", "Deployment", "svc", ns) is None  # nothing without its claim
        notes = await eventually(
            lambda: [note for _, note in event_reasons(admin, "svc", ns) if "exceeded quota" in note],
            what="an Event with the API server's refusal",
        )
        assert "small-storage" in notes[0]

        patch(
            admin,
            "v1",
            "ResourceQuota",
            "small-storage",
            ns,
            {"spec": {"hard": {"requests.storage": "10Gi"}}},
        )
        await eventually(
            phase_is(admin, "InferenceService", "svc", ns, "Stopped"), within=120, what="svc served again"
        )
        claim = admin.get(*CLAIM, "svc-model-cache", ns)
        assert claim["spec"]["resources"]["requests"]["storage"] == MAXIMUM
        assert deployment_claims(admin, "svc", ns)() == ["svc-model-cache"]
        # Back to the namespace's claim (100Gi by default) as the block ends: no quota for it.
        admin.delete("v1", "ResourceQuota", "small-storage", ns)
