"""Builders for InferenceService planning tests: small documents in the wire (camelCase) form, so a
test reads like the YAML a user would write."""

from datetime import UTC, datetime, timedelta
from typing import Any

from llmkube.api.base import KubeObject
from llmkube.api.inferenceservice import InferenceService
from llmkube.api.model import Model
from llmkube.plan.inferenceservice.observed import ObservedState

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
CREATED = NOW - timedelta(hours=1)
UID = "5b1c9c2e-0000-4000-8000-000000000001"
CACHE_KEY = "0123456789abcdef"


def make_isvc(
    spec: dict[str, Any] | None = None,
    *,
    name: str = "demo",
    namespace: str = "ai",
    generation: int = 3,
    status: dict[str, Any] | None = None,
    created: datetime | None = CREATED,
) -> InferenceService:
    document: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": UID,
            "generation": generation,
            "creationTimestamp": created,
        },
        "spec": {"modelRef": "tiny", **(spec or {})},
    }
    if status is not None:
        document["status"] = status
    return InferenceService.model_validate(document)


def make_model(
    source: str = "https://host/x.gguf",
    *,
    name: str = "tiny",
    phase: str | None = "Ready",
    cache_key: str | None = CACHE_KEY,
    hardware: dict[str, Any] | None = None,
    refresh_policy: str | None = None,
    status: dict[str, Any] | None = None,
    generation: int = 1,
    **spec_fields: Any,
) -> Model:
    spec: dict[str, Any] = {"source": source, **spec_fields}
    if hardware is not None:
        spec["hardware"] = hardware
    if refresh_policy is not None:
        spec["refreshPolicy"] = refresh_policy
    # A status of this very spec (plan/inferenceservice/current_model.py), unless the test says otherwise.
    model_status: dict[str, Any] = {"phase": phase, "observedGeneration": generation, **(status or {})}
    if cache_key is not None:
        model_status["cacheKey"] = cache_key
    return Model.model_validate(
        {
            "metadata": {"name": name, "namespace": "ai", "generation": generation},
            "spec": spec,
            "status": model_status,
        }
    )


def gpu_model(count: int = 1, **gpu: Any) -> Model:
    return make_model(hardware={"accelerator": "cuda", "gpu": {"count": count, **gpu}})


def owner_refs(uid: str = UID, name: str = "demo") -> list[KubeObject]:
    return [
        {
            "apiVersion": "inference.llmkube.dev/v1alpha1",
            "kind": "InferenceService",
            "name": name,
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": False,
        }
    ]


def live_deployment(
    *,
    ready: int | None = 0,
    replicas: int | None = 1,
    selector: dict[str, str] | None = None,
    uid: str = UID,
    name: str = "demo",
    generation: int = 2,
    observed_generation: int | None = 2,
    updated: int | None = None,
    pods: int | None = None,
) -> KubeObject:
    """A Deployment as the cache holds it. By default its rollout is done: the Deployment controller
    has observed its template and every pod (`ready` of them) runs it; `observed_generation`,
    `updated` and `pods` (all pods, older templates included) describe a rollout in progress."""
    spec: dict[str, Any] = {
        "selector": {"matchLabels": selector or {"app": name, "inference.llmkube.dev/service": name}}
    }
    if replicas is not None:
        spec["replicas"] = replicas
    status: dict[str, Any] = {}
    if ready is not None:
        status["readyReplicas"] = ready
        status["updatedReplicas"] = ready if updated is None else updated
        status["replicas"] = max(ready, status["updatedReplicas"]) if pods is None else pods
    if observed_generation is not None:
        status["observedGeneration"] = observed_generation
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": "ai",
            "uid": "dep-uid",
            "generation": generation,
            "ownerReferences": owner_refs(uid, name),
        },
        "spec": spec,
        "status": status,
    }


def live_object(api_version: str, kind: str, name: str = "demo", *, uid: str = UID) -> KubeObject:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": "ai",
            "uid": f"{kind}-uid",
            "ownerReferences": owner_refs(uid),
        },
    }


def pod(
    name: str,
    phase: str = "Running",
    *,
    unschedulable: str | None = None,
    reason: str = "Unschedulable",
    deleting: bool = False,
) -> KubeObject:
    status: dict[str, Any] = {"phase": phase}
    if unschedulable is not None:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": reason, "message": unschedulable}
        ]
    metadata: dict[str, Any] = {"name": name, "namespace": "ai"}
    if deleting:
        metadata["deletionTimestamp"] = "2026-03-01T11:59:00Z"
    return {"metadata": metadata, "status": status}


def observe(**facts: Any) -> ObservedState:
    return ObservedState(now=facts.pop("now", NOW), **facts)
