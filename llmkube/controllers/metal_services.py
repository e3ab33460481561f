"""Keeps the ConfigMap of metal Services (`llmkube-metal-services` in the controller's namespace):
the parameter of the admission policy that holds the host agents to the EndpointSlices of those
Services (plan/inferenceservice/metal_services.py says which, and why).

One key, the ConfigMap. It is reconciled when a Service without a selector changes (the cache of
the controller's Services is shared with the InferenceService controller, indexed here by that),
when an InferenceService is created, deleted or starts being deleted, and when the ConfigMap itself
changes or goes (an edit is undone, a deletion repaired), and once at start. The whole list is
planned from the caches each time (the index keeps that to the metal Services) and applied only when
it differs from what the ConfigMap holds: a converged cluster, or a restart against one, sends no
write.
"""

import structlog

from llmkube.controllers.apply_policies import METAL_SERVICES_POLICY
from llmkube.controllers.cache_transforms import service_cache
from llmkube.controllers.host import ControllerHost
from llmkube.controllers.resources import INFERENCE_SERVICES, MANAGED_SELECTOR, SERVICES
from llmkube.kube.cache import Change
from llmkube.kube.control import Controller, Result, Watch
from llmkube.kube.resource import CONFIG_MAPS
from llmkube.kube.types import Obj, ObjectKey
from llmkube.plan.inferenceservice.metal_services import (
    METAL_SERVICES_CONFIGMAP,
    controlling_inference_service,
    metal_services,
    metal_services_configmap,
    selectorless,
)

log = structlog.get_logger("llmkube.controllers.metal_services")

CONTROLLER = "metal-services"
#: the cached Services without a selector: the only ones that can be listed
BY_SELECTORLESS = "selectorless"
_YES = "true"


def selectorless_index(service: Obj) -> list[str]:
    return [_YES] if selectorless(service) else []


def _selectorless_change(change: Change) -> bool:
    """Only a Service that is, or was, without a selector can change the list."""
    return selectorless(change.new) or selectorless(change.old_obj)


def _created_deleted_or_deleting(change: Change) -> bool:
    """An InferenceService changes the list only by coming, going, or starting to go (a Service's
    owner must exist and not be deleted); its spec and status writes do not."""
    if change.type != "MODIFIED":
        return True
    before = (change.old_obj or {}).get("metadata") or {}
    after = (change.new or {}).get("metadata") or {}
    return before.get("deletionTimestamp") != after.get("deletionTimestamp")


class MetalServicesController:
    def __init__(self, host: ControllerHost, namespace: str) -> None:
        self.host = host
        self.key = ObjectKey(namespace, METAL_SERVICES_CONFIGMAP)
        # The InferenceService controller's informers (shared: same resource, selector, transform).
        self.services = host.informer(
            SERVICES,
            label_selector=MANAGED_SELECTOR,
            transform=service_cache(host.applier.field_manager),
            compact=True,
        )
        self.services.add_index(BY_SELECTORLESS, selectorless_index)
        self.inference_services = host.informer(INFERENCE_SERVICES, compact=True)
        by_name = f"metadata.name={METAL_SERVICES_CONFIGMAP}"
        self.configmaps = host.informer(CONFIG_MAPS, namespace=namespace, field_selector=by_name)
        self.controller: Controller = host.add_controller(
            CONTROLLER,
            self.reconcile,
            workers=1,
            watches=[
                Watch(CONFIG_MAPS, self._the_key, namespace=namespace, field_selector=by_name),
                Watch(
                    SERVICES,
                    self._the_key,
                    predicates=[_selectorless_change],
                    label_selector=MANAGED_SELECTOR,
                ),
                Watch(INFERENCE_SERVICES, self._the_key, predicates=[_created_deleted_or_deleting]),
            ],
        )
        host.add_task("metal-services:start", self._start)

    def _the_key(self, change: Change) -> list[ObjectKey]:
        return [self.key]

    async def _start(self) -> None:
        # With no metal service and no ConfigMap no event ever comes: look once at start.
        self.controller.enqueue(self.key)

    async def reconcile(self, key: ObjectKey) -> Result | None:
        services = self.services.store.by_index(BY_SELECTORLESS, _YES)
        owners: dict[tuple[str, str], Obj] = {}
        for service in services:
            owner = controlling_inference_service(service)
            namespace = (service.get("metadata") or {}).get("namespace") or ""
            if owner is not None and (found := self.inference_services.store.get_object(namespace, owner[0])):
                owners[(namespace, owner[0])] = found
        entries = metal_services(services, owners)
        observed = self.configmaps.store.get_object(key.namespace, key.name)
        desired = metal_services_configmap(key.namespace, entries, exists=observed is not None)
        if desired is None:
            return None
        result = await self.host.applier.apply(CONFIG_MAPS, desired, observed, policy=METAL_SERVICES_POLICY)
        if result.changed:
            log.info(
                f"metal Services ConfigMap {result.outcome.value}",
                configmap=str(key),
                services=len(entries),
                fields=result.reasons[:5],
            )
        return None
