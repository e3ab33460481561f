"""A restarted controller does not announce again what it already announced.

Services with every kind of warning the planner reports (an invalid spec, an ignored setting, a
missing memory request, a HuggingFace source given to the init container) get their Events once.
A freshly started controller (its own client, caches and queues, as after a restart) reconciles
them all and makes no mutating request at all: no status write and no Event.
"""

import asyncio
from typing import Any

from e2e_support import (
    RunningController,
    delete_services_and_wait,
    eventually,
    hf_model,
    isvc,
    model,
    poll,
    reconcile_log,
    settled,
    status_of,
    writes_quiesce,
)
from test_quiet import start_second_controller, stop

from llmkube.kube.types import ObjectKey

EVENTS = "events.k8s.io/v1"
# name -> (spec, the Event reason it gets)
WARNED: dict[str, tuple[dict[str, Any], str]] = {
    "invalid": ({"modelRef": "hf", "skipModelInit": True, "resources": {"cpu": "two"}}, "InvalidSpec"),
    "ignored": (
        {"modelRef": "hf", "skipModelInit": True, "contextSize": 4096, "runtime": "vllm"},
        "IgnoredSetting",
    ),
    "memory": ({"modelRef": "hf", "skipModelInit": True, "moeCPUOffload": True}, "MissingMemoryRequest"),
    "hf-init": ({"modelRef": "hf"}, "MissingSkipModelInit"),
    "two": (
        {"modelRef": "hf", "skipModelInit": True, "jinja": True, "runtime": "tgi", "noKvOffload": True},
        "IgnoredSetting",
    ),
}


def reasons_by_service(admin: Any, namespace: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for event in admin.list(EVENTS, "Event", namespace):
        regarding = event.get("regarding") or {}
        if regarding.get("kind") == "InferenceService":
            found.setdefault(regarding["name"], set()).add(event["reason"])
    return found


async def test_a_restart_does_not_announce_the_warnings_again(
    operator: RunningController, full_namespace: str
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    admin.create(hf_model("hf"), namespace=ns)
    admin.create(model("unused"), namespace=ns)
    for name, (spec, _) in WARNED.items():
        admin.create(isvc(name, **spec), namespace=ns)
    try:
        await eventually(
            lambda: all(
                reason in reasons_by_service(admin, ns).get(name, set())
                for name, (_, reason) in WARNED.items()
            ),
            within=90,
            what="every warning announced",
        )
        await eventually(
            lambda: all(status_of(admin, "InferenceService", name, ns).get("phase") for name in WARNED),
            what="every service has a status",
        )
        await settled(operator.controllers.inference_services.controller)
        await writes_quiesce(operator)
        await operator.manager.recorder.drain()

        manager, controllers = await start_second_controller(operator, ns)
        try:
            logs = reconcile_log(controllers.inference_services.controller)
            keys = [ObjectKey(ns, name) for name in WARNED]
            await poll(lambda: all(logs(key) >= 1 for key in keys), what="every service reconciled once")
            for controller in (controllers.inference_services.controller, controllers.models.controller):
                await settled(controller)
            await asyncio.sleep(1.0)
            await manager.recorder.drain()
            assert manager.client.mutating_requests() == 0, sorted(manager.client.request_counts.items())
        finally:
            await stop(manager)
    finally:
        await delete_services_and_wait(operator, ns, pods_too=True)
