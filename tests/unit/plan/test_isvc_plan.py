"""The planner as a whole: what it applies, what it deletes, when it requeues, on the metal path
too: only owned objects deleted, the cache claim only when mounted, names with dots."""

from datetime import timedelta
from typing import Any

import pytest
from isvc_factories import CACHE_KEY, NOW, UID, live_deployment, live_object, make_isvc, make_model, observe
from isvc_planning import plan

from llmkube.plan.inferenceservice.metal import METAL_REQUEUE_SECONDS
from llmkube.plan.inferenceservice.objects import ObjectRef
from llmkube.plan.inferenceservice.planner import SELECTOR_MIGRATION_REQUEUE_SECONDS

OUR_HPA = live_object("autoscaling/v2", "HorizontalPodAutoscaler")
FOREIGN_HPA = live_object("autoscaling/v2", "HorizontalPodAutoscaler", uid="someone-else")


def test_owned_hpa_is_deleted_when_autoscaling_is_removed() -> None:
    result = plan(observed=observe(hpa=OUR_HPA))
    assert result.hpa is None
    assert result.deletes == (
        ObjectRef("autoscaling/v2", "HorizontalPodAutoscaler", "ai", "demo", "HorizontalPodAutoscaler-uid"),
    )


def test_foreign_hpa_is_never_deleted() -> None:
    result = plan(observed=observe(hpa=FOREIGN_HPA))
    assert result.deletes == () and result.status.phase == "Creating"


def test_foreign_object_with_our_name_is_never_taken_over() -> None:
    for facts, kind in [
        ({"deployment": live_deployment(uid="other-owner")}, "Deployment ai/demo"),
        ({"service": live_object("v1", "Service", uid="other-owner")}, "Service ai/demo"),
        ({"hpa": FOREIGN_HPA}, "HorizontalPodAutoscaler ai/demo"),
    ]:
        result = plan({"autoscaling": {"maxReplicas": 3}}, observed=observe(**facts))
        assert result.status.phase == "Failed"
        assert any(kind in (c.message or "") for c in result.status.conditions or [] if c.type == "Degraded")
        assert (result.deployment, result.service, result.hpa, result.deletes) == (None, None, None, ())


def test_an_object_without_owner_references_is_foreign() -> None:
    unowned = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "demo", "namespace": "ai"}}
    assert plan(observed=observe(service=unowned)).status.phase == "Failed"


@pytest.mark.parametrize(
    "ref_change",
    [
        {"controller": False},
        {"kind": "Model"},
        {"apiVersion": "other.group/v1"},
        {"name": "other"},
    ],
)
def test_owner_reference_must_be_ours_in_every_field(ref_change: dict[str, Any]) -> None:
    live = live_deployment()
    live["metadata"]["ownerReferences"][0].update(ref_change)
    assert plan(observed=observe(deployment=live)).status.phase == "Failed"


def test_our_own_objects_are_simply_re_applied() -> None:
    facts = observe(deployment=live_deployment(), service=live_object("v1", "Service"), hpa=OUR_HPA)
    result = plan({"autoscaling": {"maxReplicas": 3}}, observed=facts)
    assert result.status.phase == "Creating" and result.deletes == ()
    assert result.deployment and result.service and result.hpa


def test_selector_migration_from_before_0_8() -> None:
    old = live_deployment(ready=1, selector={"app": "demo"})
    result = plan(observed=observe(deployment=old))
    assert result.deletes == (ObjectRef("apps/v1", "Deployment", "ai", "demo", "dep-uid"),)
    assert result.deployment is not None  # re-created once the old one is gone
    assert result.requeue_after == SELECTOR_MIGRATION_REQUEUE_SECONDS
    assert result.status.ready_replicas == 0 and result.status.phase == "Creating"


def test_no_requeue_in_the_steady_state() -> None:
    assert plan(observed=observe(deployment=live_deployment(ready=1))).requeue_after is None


def test_names_with_dots_work_end_to_end() -> None:
    result = plan(isvc=make_isvc(name="llama.3.2"))
    assert result.service is not None and result.service["metadata"]["name"] == "llama-3-2"
    assert result.status.endpoint == "http://llama-3-2.ai.svc.cluster.local:8080/v1/chat/completions"


def test_eviction_protection_has_no_effect_on_the_plan() -> None:
    # It is read by the metal-agent's eviction watchdog only.
    assert plan({"evictionProtection": True}) == plan({"evictionProtection": False}) == plan()


def test_gpu_memory_has_no_effect_on_the_workload_when_valid() -> None:
    with_memory = plan({"resources": {"gpu": 1, "gpuMemory": "24Gi"}})
    without = plan({"resources": {"gpu": 1}})
    assert with_memory.deployment == without.deployment and with_memory.status == without.status


METAL = make_model(hardware={"accelerator": "metal"})  # with a cacheKey: still no cache PVC


def slice_(heartbeat_age: timedelta | None, ready: bool = True, service: str = "demo") -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": f"{service}-x",
        "namespace": "ai",
        "labels": {"kubernetes.io/service-name": service},
    }
    if heartbeat_age is not None:
        stamp = (NOW - heartbeat_age).isoformat()
        metadata["annotations"] = {"llmkube.ai/agent-heartbeat": stamp}
    return {
        "metadata": metadata,
        "endpoints": [{"addresses": ["192.168.1.5"], "conditions": {"ready": ready}}],
    }


def test_metal_plans_no_objects_and_no_cache_pvc() -> None:
    result = plan(model=METAL)
    assert (result.deployment, result.service, result.hpa, result.cache_pvc) == (None, None, None, None)
    assert result.status.phase == "Creating"
    assert result.status.scheduling_status == "WaitingForMetalAgent"
    assert result.status.endpoint == "http://demo.ai.svc.cluster.local:8080/v1/chat/completions"
    assert result.requeue_after is None


def test_metal_deletes_only_our_leftover_objects() -> None:
    facts = observe(
        deployment=live_deployment(),
        service=live_object("v1", "Service", uid="someone-else"),
        hpa=OUR_HPA,
    )
    result = plan(model=METAL, observed=facts)
    assert {(r.kind, r.name) for r in result.deletes} == {
        ("Deployment", "demo"),
        ("HorizontalPodAutoscaler", "demo"),
    }


@pytest.mark.parametrize(
    ("slices", "spec", "phase", "ready", "scheduling", "requeue"),
    [
        ([slice_(timedelta(seconds=20))], {}, "Ready", 1, "", METAL_REQUEUE_SECONDS),
        ([slice_(timedelta(minutes=5))], {}, "Creating", 0, "AgentHeartbeatStale", METAL_REQUEUE_SECONDS),
        ([slice_(None)], {}, "Ready", 1, "", None),  # legacy agent: no expiry, no heartbeat requeue
        ([slice_(None, ready=False)], {}, "Creating", 0, "", None),
        ([slice_(timedelta(seconds=20))], {"replicas": 2}, "Progressing", 1, "", METAL_REQUEUE_SECONDS),
        ([], {"replicas": 0}, "Stopped", 0, "", None),
        ([slice_(None, service="llama-3b")], {}, "Creating", 0, "WaitingForMetalAgent", None),
    ],
)
def test_metal_readiness_drives_the_status(
    slices: list[dict[str, Any]],
    spec: dict[str, Any],
    phase: str,
    ready: int,
    scheduling: str,
    requeue: float | None,
) -> None:
    result = plan(spec, METAL, observed=observe(endpoint_slices=tuple(slices)))
    status = result.status
    assert (status.phase, status.ready_replicas, status.scheduling_status) == (phase, ready, scheduling)
    assert result.requeue_after == requeue


def test_metal_service_with_dots_finds_its_slices() -> None:
    result = plan(
        isvc=make_isvc(name="llama.3b"),
        model=METAL,
        observed=observe(endpoint_slices=(slice_(None, service="llama-3b"),)),
    )
    assert result.status.phase == "Ready"


def test_metal_still_validates_the_spec() -> None:
    result = plan({"resources": {"cpu": "x"}}, METAL)
    assert result.status.phase == "Failed"


def test_metal_ignores_the_image_requirement() -> None:
    assert plan({"runtime": "generic"}, METAL).status.phase == "Creating"


def test_owner_uid_comes_from_the_service() -> None:
    result = plan()
    assert result.deployment is not None
    assert result.deployment["metadata"]["ownerReferences"][0]["uid"] == UID
    assert CACHE_KEY in result.deployment["spec"]["template"]["spec"]["initContainers"][0]["env"][1]["value"]
