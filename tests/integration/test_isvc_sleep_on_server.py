"""The controller's half of scale to zero against the real API server (the API tier: no kubelet, so
no pod ever turns ready, which idleness does not need): an InferenceService annotated
`scale-to-zero-after` with autoscaling sleeps once idle (its Deployment at 0 with the mark, its HPA
deleted, Stopped with the reason ScaledToZero, an Event) and then writes nothing; a router's scale
write of the Deployment (0 -> 1, as llmkube.router.waking makes it) wakes it: Waking, an Event, the
HPA back with min 1, the mark gone, and the router's replica kept (no second change of the spec)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from llmkube_testing.controller_harness import controller_running
from llmkube_testing.pytest_plugin import ClusterHandle, apply_manifests
from llmkube_testing.rest import KubeRest

from llmkube.api import constants as c
from llmkube.api.crds import all_crds
from llmkube.controllers.setup import ControllersConfig

HPA = ("autoscaling/v2", "HorizontalPodAutoscaler")


async def _eventually(check: Callable[[], Any], within: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + within
    while True:
        found = await asyncio.to_thread(check)
        if found:
            return found
        assert time.monotonic() < deadline, f"not reached in time: {what}"
        await asyncio.sleep(0.1)


def _condition(admin: KubeRest, namespace: str) -> dict[str, Any] | None:
    status = admin.get(c.API_VERSION, c.ISVC_KIND, "sleepy", namespace).get("status") or {}
    return next((x for x in status.get("conditions") or () if x["type"] == c.CONDITION_SCALED_TO_ZERO), None)


def _events(admin: KubeRest, namespace: str) -> list[str]:
    return [
        e["reason"]
        for e in admin.list("events.k8s.io/v1", "Event", namespace)
        if (e.get("regarding") or {}).get("name") == "sleepy"
    ]


async def test_an_idle_service_sleeps_quietly_and_a_routers_scale_write_wakes_it(
    api_cluster: ClusterHandle, namespace: str
) -> None:
    apply_manifests(api_cluster, all_crds())
    admin: KubeRest = api_cluster.admin()
    admin.create(
        {
            "apiVersion": c.API_VERSION,
            "kind": c.MODEL_KIND,
            "metadata": {"name": "m"},
            "spec": {"source": "org/m"},
        },
        namespace=namespace,
    )
    admin.create(
        {
            "apiVersion": c.API_VERSION,
            "kind": c.ISVC_KIND,
            "metadata": {"name": "sleepy", "annotations": {c.ANNOTATION_SCALE_TO_ZERO_AFTER: "4s"}},
            "spec": {
                "modelRef": "m",
                "skipModelInit": True,
                "autoscaling": {"minReplicas": 1, "maxReplicas": 3},
            },
        },
        namespace=namespace,
    )
    config = ControllersConfig(manage_priority_classes=True, controller_namespace=namespace)
    async with controller_running(api_cluster.kubeconfig, config, namespace=namespace) as controller:
        await _eventually(lambda: admin.get_or_none(*HPA, "sleepy", namespace), what="the HPA")
        awake = await _eventually(lambda: _condition(admin, namespace), what="the ScaledToZero condition")
        assert (awake["status"], awake["reason"]) == ("False", "Awake")

        # Idle for 4 s (no router wrote a request): asleep.
        def asleep() -> dict[str, Any] | None:
            found = _condition(admin, namespace)
            return found if found is not None and found["status"] == "True" else None

        slept = await _eventually(asleep, what="asleep")
        assert slept["reason"] == "Idle" and "no request for 4s" in slept["message"]
        status = admin.get(c.API_VERSION, c.ISVC_KIND, "sleepy", namespace)["status"]
        assert status["phase"] == "Stopped" and status["schedulingStatus"] == "ScaledToZero"
        deployment = admin.get("apps/v1", "Deployment", "sleepy", namespace)
        assert deployment["spec"]["replicas"] == 0
        assert c.ANNOTATION_SCALED_TO_ZERO in deployment["metadata"]["annotations"]
        await _eventually(lambda: admin.get_or_none(*HPA, "sleepy", namespace) is None, what="the HPA gone")
        await _eventually(lambda: "ScaledToZero" in _events(admin, namespace), what="the ScaledToZero Event")

        # Quiet while it sleeps: no write at all.
        await asyncio.sleep(1.0)
        writes = controller.requests.mutating_requests(namespace)
        versions = (
            admin.get(c.API_VERSION, c.ISVC_KIND, "sleepy", namespace)["metadata"]["resourceVersion"],
            admin.get("apps/v1", "Deployment", "sleepy", namespace)["metadata"]["resourceVersion"],
        )
        await asyncio.sleep(3.0)
        assert controller.requests.mutating_requests(namespace) == writes
        assert versions == (
            admin.get(c.API_VERSION, c.ISVC_KIND, "sleepy", namespace)["metadata"]["resourceVersion"],
            admin.get("apps/v1", "Deployment", "sleepy", namespace)["metadata"]["resourceVersion"],
        )

        # A router wakes it: the Deployment's scale from 0 to 1.
        generation = int(admin.get("apps/v1", "Deployment", "sleepy", namespace)["metadata"]["generation"])
        admin.request(
            "PATCH",
            admin.path_for("apps/v1", "Deployment", namespace, "sleepy") + "/scale",
            {"spec": {"replicas": 1}},
            content_type="application/merge-patch+json",
            query={"fieldManager": "llmkube-router"},
        )

        def waking() -> dict[str, Any] | None:
            found = _condition(admin, namespace)
            return found if found is not None and found["reason"] == "Waking" else None

        woke = await _eventually(waking, what="waking")
        assert woke["status"] == "False" and "a router scaled it to one replica" in woke["message"]
        hpa = await _eventually(lambda: admin.get_or_none(*HPA, "sleepy", namespace), what="the HPA back")
        assert hpa["spec"]["minReplicas"] == 1
        await _eventually(lambda: "Waking" in _events(admin, namespace), what="the Waking Event")

        def unmarked() -> dict[str, Any] | None:
            found = admin.get("apps/v1", "Deployment", "sleepy", namespace)
            marked = c.ANNOTATION_SCALED_TO_ZERO in (found["metadata"].get("annotations") or {})
            return None if marked else found

        deployment = await _eventually(unmarked, what="the mark gone")
        assert deployment["spec"]["replicas"] == 1
        # Two changes since it slept: the router's 0 -> 1, and the controller's apply that takes the
        # mark off (a Deployment's generation counts its annotations too); no replica count of ours.
        assert int(deployment["metadata"]["generation"]) == generation + 2
        status = admin.get(c.API_VERSION, c.ISVC_KIND, "sleepy", namespace)["status"]
        assert status["phase"] != "Stopped" and status["desiredReplicas"] == 1
