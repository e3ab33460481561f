"""What the router watches (list + watch through the project's informers; nothing is polled): its
own ModelRouter (one object, by field selector: a new spec takes effect without a restart), the
EndpointSlices of each InferenceService backend's Service (by the `kubernetes.io/service-name`
label; an informer per Service, started and stopped as the spec's backends change), and each
InferenceService backend itself (by name: whether it sleeps, and the last request time the routers
share; plan/router/wake.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog

from llmkube.api import constants as c
from llmkube.kube.cache import Change, Informer, keep_only
from llmkube.kube.resource import ENDPOINT_SLICES, Resource
from llmkube.kube.rest import ApiClient
from llmkube.plan.router import RouterConfig, endpoint_names, ready_endpoints, serving_mode, sleeper_of
from llmkube.router.state import RouterState
from llmkube.router.waking import INFERENCE_SERVICES

__all__ = ["MODEL_ROUTERS", "SERVICE_NAME_LABEL", "RouterWatches"]

log = structlog.get_logger("llmkube.router.watches")

MODEL_ROUTERS = Resource(c.GROUP, c.VERSION, c.ROUTER_PLURAL, c.ROUTER_KIND)
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
#: what the router reads of a slice (plan/router/endpoints.py): its addresses and ports, and the
#: labels, which carry the serving mode of its Service (embeddings and rerank are routed by it)
SLICE_CACHE = keep_only(("metadata", "labels"), ("addressType",), ("ports",), ("endpoints",))
#: what the router reads of an InferenceService backend: whether it sleeps (scale to zero)
SLEEPER_CACHE = keep_only(("metadata", "annotations"), ("status", "conditions"))


class RouterWatches:
    def __init__(self, client: ApiClient, state: RouterState, *, read_timeout: float = 90.0) -> None:
        self.client = client
        self.state = state
        self.read_timeout = read_timeout
        self.spec = Informer(
            client,
            MODEL_ROUTERS,
            namespace=state.namespace,
            field_selector=f"metadata.name={state.name}",
            read_timeout=read_timeout,
        )
        self.spec.add_handler(self._spec_changed)
        self.slices: dict[str, Informer] = {}
        #: per InferenceService backend (by name, a metadata.name field selector: the Role names it)
        self.sleepers: dict[str, Informer] = {}
        self._stopping: set[asyncio.Task[None]] = set()
        state.listeners.append(self._follow)

    def start(self) -> None:
        self.spec.start()

    def synced(self) -> bool:
        return self.spec.has_synced() and all(informer.has_synced() for informer in self.slices.values())

    def problems(self, tolerance: float) -> list[str]:
        found = []
        for informer in (self.spec, *self.slices.values(), *self.sleepers.values()):
            where = f"{informer.resource} ({informer.field_selector or informer.label_selector})"
            if not informer.has_synced():
                found.append(f"not synced yet: {where}")
            elif informer.failing_for() > tolerance:
                found.append(f"watch failing for {informer.failing_for():.0f}s: {where}")
        return found

    def _spec_changed(self, change: Change) -> None:
        if change.new is None:
            log.warning("the ModelRouter is gone: nothing is routed", router=self.state.name)
            self.state.gone()
            return
        loaded = self.state.load(change.new)
        for issue in loaded.issues:
            log.warning(
                "spec refused" if loaded.refused else "spec warning",
                field=issue.field,
                problem=issue.message,
                generation=loaded.generation,
            )
        if not loaded.refused:
            log.info("spec loaded", generation=loaded.generation)

    def _follow(self, config: RouterConfig) -> None:
        wanted = config.services()
        for service in sorted(set(self.slices) - wanted):
            informer = self.slices.pop(service)
            self.state.drop_service(service)
            task = asyncio.get_running_loop().create_task(informer.stop())
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)
        for service in sorted(wanted - set(self.slices)):
            informer = Informer(
                self.client,
                ENDPOINT_SLICES,
                namespace=self.state.namespace,
                label_selector=f"{SERVICE_NAME_LABEL}={service}",
                transform=SLICE_CACHE,
                read_timeout=self.read_timeout,
            )
            informer.add_handler(self._slice_handler(service, informer))
            self.slices[service] = informer
            informer.start()
        self._follow_sleepers(config)

    def _follow_sleepers(self, config: RouterConfig) -> None:
        wanted = {b.inference_service for b in config.backends.values() if b.inference_service}
        for isvc in sorted(set(self.sleepers) - wanted):
            informer = self.sleepers.pop(isvc)
            self.state.set_sleeper(isvc, None)
            task = asyncio.get_running_loop().create_task(informer.stop())
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)
        for isvc in sorted(wanted - set(self.sleepers)):
            informer = Informer(
                self.client,
                INFERENCE_SERVICES,
                namespace=self.state.namespace,
                field_selector=f"metadata.name={isvc}",
                transform=SLEEPER_CACHE,
                read_timeout=self.read_timeout,
            )
            informer.add_handler(self._sleeper_handler(isvc, informer))
            self.sleepers[isvc] = informer
            informer.start()

    def _sleeper_handler(self, isvc: str, informer: Informer) -> Callable[[Change], None]:
        def changed(change: Change) -> None:
            if self.sleepers.get(isvc) is not informer:
                return
            sleeper = sleeper_of(change.new) if change.new is not None else None
            before = self.state.sleepers.get(isvc)
            if sleeper is not None and (before is None or before.asleep != sleeper.asleep):
                log.info("asleep" if sleeper.asleep else "awake", service=isvc, scale_to_zero=sleeper.marked)
            self.state.set_sleeper(isvc, sleeper)

        return changed

    def _slice_handler(self, service: str, informer: Informer) -> Callable[[Change], None]:
        return lambda _change: self._slices_changed(service, informer)

    def _slices_changed(self, service: str, informer: Informer) -> None:
        if self.slices.get(service) is not informer:
            return  # an informer being stopped
        slices = informer.store.objects()
        endpoints = ready_endpoints(slices)
        if endpoints != self.state.endpoints.get(service):
            log.info("endpoints", service=service, ready=len(endpoints))
        self.state.set_endpoints(service, endpoints, names=endpoint_names(slices), mode=serving_mode(slices))

    async def stop(self) -> None:
        await asyncio.gather(
            self.spec.stop(),
            *(informer.stop() for informer in (*self.slices.values(), *self.sleepers.values())),
            *self._stopping,
        )
