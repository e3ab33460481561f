"""Keeps the five `llmkube-*` PriorityClasses in place (the reference operator only shipped them as
manifests).

They are cluster-scoped and cannot be owned by a namespaced InferenceService, so they are ensured
by name: at start, and whenever one of them changes or disappears. `value` and
`preemptionPolicy` are immutable, so drift is repaired by delete + create (the applier does that
when the server rejects a change of exactly those fields: PRIORITY_CLASS_POLICY).

Only registered with `--manage-priority-classes` (the default). A class that already holds the
documented values is left alone whoever wrote it, so the installer's field ownership is never
taken over (see `priority_class_drift`).
"""

import structlog

from llmkube.controllers.apply_policies import PRIORITY_CLASS_POLICY
from llmkube.controllers.host import ControllerHost
from llmkube.controllers.resources import PRIORITY_CLASSES
from llmkube.kube.cache import Change
from llmkube.kube.control import Controller, Result, Watch, enqueue_object
from llmkube.kube.types import Obj, ObjectKey
from llmkube.plan.inferenceservice.priority import priority_class_drift, priority_classes

log = structlog.get_logger("llmkube.controllers.priorityclass")

CONTROLLER = "priorityclass"


class PriorityClassController:
    def __init__(self, host: ControllerHost) -> None:
        self.host = host
        self.desired: dict[str, Obj] = {pc["metadata"]["name"]: pc for pc in priority_classes()}
        self.informer = host.informer(PRIORITY_CLASSES)
        self.controller: Controller = host.add_controller(
            CONTROLLER,
            self.reconcile,
            workers=1,
            watches=[Watch(PRIORITY_CLASSES, enqueue_object, predicates=[self._is_ours])],
        )
        host.add_task("priorityclass:ensure-all", self._ensure_all)

    def _is_ours(self, change: Change) -> bool:
        return (change.obj.get("metadata") or {}).get("name") in self.desired

    async def _ensure_all(self) -> None:
        # A class that never existed produces no watch event: ask for each one once at start.
        for name in self.desired:
            self.controller.enqueue(ObjectKey("", name))

    async def reconcile(self, key: ObjectKey) -> Result | None:
        desired = self.desired.get(key.name)
        if desired is None:
            return None
        observed = self.informer.store.get_object(None, key.name)
        if observed is not None and not priority_class_drift(desired, observed):
            return None
        result = await self.host.applier.apply(
            PRIORITY_CLASSES, desired, observed, policy=PRIORITY_CLASS_POLICY
        )
        if result.changed:
            log.info(f"PriorityClass {result.outcome.value}", name=key.name, fields=result.reasons[:5])
        return None
