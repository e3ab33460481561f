"""The InferenceService controller: read the cache, plan (pure), write only what differs.

Level-triggered: a reconcile reads everything it needs from informer caches and converges, no
matter which event woke it. It applies each planned object with server-side apply (the applier
skips the request when the fields we own already match), deletes only objects this service
controls, writes status only when more than `lastUpdated` changed, and emits the planned events.
"""

from collections.abc import Iterable
from datetime import UTC, datetime

import structlog
from pydantic import ValidationError

from llmkube.api.constants import LABEL_SERVICE
from llmkube.api.inferenceservice import InferenceService, InferenceServiceStatus
from llmkube.api.model import Model
from llmkube.controllers.apply_policies import POLICIES_BY_KIND
from llmkube.controllers.host import ControllerHost
from llmkube.controllers.metrics import ISVC_CONTROLLER, LLMKubeMetrics
from llmkube.controllers.resources import (
    DEPLOYMENTS,
    ENDPOINT_SLICES,
    HORIZONTAL_POD_AUTOSCALERS,
    INFERENCE_SERVICES,
    MANAGED_SELECTOR,
    METAL_SLICES_SELECTOR,
    MODELS,
    PERSISTENT_VOLUME_CLAIMS,
    PODS,
    PRIORITY_CLASSES,
    SERVICE_PODS_SELECTOR,
    SERVICES,
)
from llmkube.kube.client import JSON_PATCH
from llmkube.kube.controller import Controller, Result, TerminalError
from llmkube.kube.errors import AlreadyExists, ApiError, Forbidden, NotFound
from llmkube.kube.handlers import Watch, enqueue_mapped, enqueue_object, enqueue_owner
from llmkube.kube.predicates import annotations_changed, any_of, generation_changed, labels_changed
from llmkube.kube.resource import Resource
from llmkube.kube.store import BY_NAMESPACE, Change, by_field, by_label
from llmkube.kube.types import Obj, ObjectKey
from llmkube.plan.config import OperatorConfig
from llmkube.plan.inferenceservice import InferenceServicePlan, plan_inference_service
from llmkube.plan.names import CACHE_PVC_NAME, service_name
from llmkube.plan.objects import controlled_by
from llmkube.plan.observed import ObservedState
from llmkube.plan.priority import priority_class_name
from llmkube.plan.queue import QueueEntry
from llmkube.plan.status import failed_status, status_changed

log = structlog.get_logger("llmkube.controllers.inferenceservice")

WAITING = "WaitingForGPU"
# Indexes on the InferenceService cache.
BY_MODEL = "modelRef"
BY_SERVICE_NAME = "serviceName"
BY_PRIORITY_CLASS = "priorityClass"
BY_PHASE = "phase"
# Index on pods and metal EndpointSlices.
BY_SERVICE_LABEL = "service"
BY_SLICE_SERVICE = "sliceService"
SLICE_SERVICE_LABEL = "kubernetes.io/service-name"
# The per-namespace model cache claims, and nothing else of the cluster's claims.
CACHE_CLAIM_SELECTOR = f"metadata.name={CACHE_PVC_NAME}"

_APPLY_ORDER: tuple[tuple[str, Resource], ...] = (
    ("deployment", DEPLOYMENTS),
    ("service", SERVICES),
    ("hpa", HORIZONTAL_POD_AUTOSCALERS),
)
_RESOURCES_BY_KIND = {res.kind: res for _, res in _APPLY_ORDER}


def _namespaced(obj: Obj, value: str) -> tuple[str, ...]:
    namespace = (obj.get("metadata") or {}).get("namespace") or ""
    return (f"{namespace}/{value}",)


def _service_name_index(obj: Obj) -> Iterable[str]:
    # EndpointSlices name the Service (dots replaced by dashes); this maps back to every service
    # with that Service name, dots included (decision #14).
    return _namespaced(obj, service_name((obj.get("metadata") or {}).get("name") or ""))


def _priority_class_index(obj: Obj) -> Iterable[str]:
    try:
        spec = InferenceService.model_validate(obj).spec
    except ValidationError:
        return ()
    return (priority_class_name(spec),)


def _phase_index(obj: Obj) -> Iterable[str]:
    phase = (obj.get("status") or {}).get("phase")
    return (phase,) if isinstance(phase, str) else ()


class NotOurs(AlreadyExists):
    """An object with a name we need exists, and something else controls it (decision 10)."""

    def __init__(self, kind: str, namespace: str, name: str) -> None:
        super().__init__(
            409,
            f"{kind} {namespace}/{name}: exists and is not controlled by this InferenceService",
            reason="AlreadyExists",
        )


def _queue_rank(obj: Obj | None) -> tuple[bool, object]:
    status = (obj or {}).get("status") or {}
    waiting = status.get("phase") == WAITING
    return waiting, status.get("effectivePriority") if waiting else None


def queue_rank_changed(change: Change) -> bool:
    """A service entered or left the GPU queue, or its priority changed while it waits: the others'
    positions move (decision 6). Handlers run after the cache holds the change, so the services
    re-planned on it see the new queue; re-planning them right after our own status write would
    read a cache that does not have it yet, and leave their positions stale."""
    if change.initial:
        return False  # a (re)start re-plans every service anyway
    old = None if change.type == "ADDED" else change.old_obj
    new = None if change.type == "DELETED" else change.new
    return _queue_rank(old) != _queue_rank(new)


def _parse_time(text: object) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def queue_entry_of(obj: Obj) -> QueueEntry:
    meta = obj.get("metadata") or {}
    priority = (obj.get("status") or {}).get("effectivePriority")
    return QueueEntry(
        namespace=meta.get("namespace") or "",
        name=meta.get("name") or "",
        priority=priority if isinstance(priority, int) else 0,
        created=_parse_time(meta.get("creationTimestamp")),
    )


def stray_service_ports(desired: Obj, observed: Obj) -> list[Obj]:
    """Ports on the observed Service that are not ours (keyed, as the API keys them, by port and
    protocol)."""

    def key(port: Obj) -> tuple[object, str]:
        return port.get("port"), port.get("protocol") or "TCP"

    wanted = {key(port) for port in (desired.get("spec") or {}).get("ports") or ()}
    return [port for port in (observed.get("spec") or {}).get("ports") or () if key(port) not in wanted]


def namespace_terminating(error: ApiError) -> bool:
    """The API refuses new objects in a namespace being deleted (403 with cause
    NamespaceTerminating): not an RBAC problem, and retrying cannot help."""
    if not isinstance(error, Forbidden):
        return False
    return any(cause.reason == "NamespaceTerminating" for cause in error.causes) or (
        "because it is being terminated" in error.message
    )


def is_deletion(change: Change) -> bool:
    return change.type == "DELETED"


def status_write_needed(
    cached: InferenceServiceStatus | None,
    cached_version: str | None,
    last_write: tuple[str | None, InferenceServiceStatus] | None,
    new: InferenceServiceStatus,
) -> bool:
    """Write when `new` differs (beyond lastUpdated) from the cached status, unless the cache still
    shows the version our last write was based on and `new` is exactly what that write sent: the
    cache has simply not caught up with our own write yet."""
    if not status_changed(cached, new):
        return False
    if last_write is not None and last_write[0] == cached_version:
        return status_changed(last_write[1], new)
    return True


def status_body(isvc: InferenceService, status: InferenceServiceStatus) -> Obj:
    return {
        "metadata": {"name": isvc.metadata.name, "namespace": isvc.metadata.namespace},
        "status": status.model_dump(by_alias=True, exclude_none=True, mode="json"),
    }


class InferenceServiceController:
    def __init__(
        self, host: ControllerHost, config: OperatorConfig, metrics: LLMKubeMetrics, workers: int
    ) -> None:
        self.host = host
        self.config = config
        self.metrics = metrics
        # Per service: the resourceVersion a status write was based on, and what it wrote.
        self._written_status: dict[ObjectKey, tuple[str | None, InferenceServiceStatus]] = {}

        self.services = host.informer(INFERENCE_SERVICES)
        self.services.add_index(BY_MODEL, by_field("spec", "modelRef"))
        self.services.add_index(BY_SERVICE_NAME, _service_name_index)
        self.services.add_index(BY_PRIORITY_CLASS, _priority_class_index)
        self.services.add_index(BY_PHASE, _phase_index)
        self.models = host.informer(MODELS)
        self.deployments = host.informer(DEPLOYMENTS, label_selector=MANAGED_SELECTOR)
        self.k8s_services = host.informer(SERVICES, label_selector=MANAGED_SELECTOR)
        self.hpas = host.informer(HORIZONTAL_POD_AUTOSCALERS, label_selector=MANAGED_SELECTOR)
        self.pods = host.informer(PODS, label_selector=SERVICE_PODS_SELECTOR)
        self.pods.add_index(BY_SERVICE_LABEL, by_label(LABEL_SERVICE))
        self.priority_classes = host.informer(PRIORITY_CLASSES)
        self.cache_claims = host.informer(PERSISTENT_VOLUME_CLAIMS, field_selector=CACHE_CLAIM_SELECTOR)
        self.slices = host.informer(ENDPOINT_SLICES, label_selector=METAL_SLICES_SELECTOR)
        self.slices.add_index(BY_SLICE_SERVICE, by_label(SLICE_SERVICE_LABEL))

        self.controller: Controller = host.add_controller(
            ISVC_CONTROLLER,
            metrics.timed(ISVC_CONTROLLER, self.reconcile),
            workers=workers,
            watches=[
                # Spec changes, and label/annotation edits; never our own status writes.
                Watch(
                    INFERENCE_SERVICES,
                    enqueue_object,
                    predicates=[any_of(generation_changed, labels_changed, annotations_changed)],
                ),
                # Status changes that move the GPU queue re-rank the other waiting services.
                Watch(
                    INFERENCE_SERVICES,
                    enqueue_mapped(self._other_waiting_services),
                    predicates=[queue_rank_changed],
                ),
                Watch(MODELS, enqueue_mapped(self._services_of_model)),
                Watch(DEPLOYMENTS, enqueue_owner(INFERENCE_SERVICES), label_selector=MANAGED_SELECTOR),
                Watch(SERVICES, enqueue_owner(INFERENCE_SERVICES), label_selector=MANAGED_SELECTOR),
                Watch(
                    HORIZONTAL_POD_AUTOSCALERS,
                    enqueue_owner(INFERENCE_SERVICES),
                    label_selector=MANAGED_SELECTOR,
                ),
                Watch(PODS, enqueue_mapped(self._service_of_pod), label_selector=SERVICE_PODS_SELECTOR),
                Watch(PRIORITY_CLASSES, enqueue_mapped(self._services_of_priority_class)),
                # Only deletions matter: a missing cache claim is recreated for the namespace.
                Watch(
                    PERSISTENT_VOLUME_CLAIMS,
                    enqueue_mapped(self._services_in_namespace),
                    predicates=[is_deletion],
                    field_selector=CACHE_CLAIM_SELECTOR,
                ),
                Watch(
                    ENDPOINT_SLICES,
                    enqueue_mapped(self._services_of_slice),
                    label_selector=METAL_SLICES_SELECTOR,
                ),
            ],
        )

    # -- event -> keys --------------------------------------------------------------------------

    def _keys(self, objects: Iterable[Obj]) -> list[ObjectKey]:
        return [ObjectKey.of(obj) for obj in objects]

    def _services_of_model(self, model: Obj) -> list[ObjectKey]:
        meta = model.get("metadata") or {}
        return self._keys(
            self.services.store.by_index(BY_MODEL, f"{meta.get('namespace')}/{meta.get('name')}")
        )

    def _other_waiting_services(self, changed: Obj) -> list[ObjectKey]:
        key = ObjectKey.of(changed)
        return [k for k in self._keys(self.services.store.by_index(BY_PHASE, WAITING)) if k != key]

    def _services_in_namespace(self, obj: Obj) -> list[ObjectKey]:
        namespace = (obj.get("metadata") or {}).get("namespace") or ""
        return self._keys(self.services.store.by_index(BY_NAMESPACE, namespace))

    def _service_of_pod(self, pod: Obj) -> list[ObjectKey]:
        meta = pod.get("metadata") or {}
        name = (meta.get("labels") or {}).get(LABEL_SERVICE)
        return [ObjectKey(meta.get("namespace") or "", name)] if name else []

    def _services_of_priority_class(self, priority_class: Obj) -> list[ObjectKey]:
        name = (priority_class.get("metadata") or {}).get("name") or ""
        return self._keys(self.services.store.by_index(BY_PRIORITY_CLASS, name))

    def _services_of_slice(self, endpoint_slice: Obj) -> list[ObjectKey]:
        meta = endpoint_slice.get("metadata") or {}
        name = (meta.get("labels") or {}).get(SLICE_SERVICE_LABEL)
        if not name:
            return []
        return self._keys(self.services.store.by_index(BY_SERVICE_NAME, f"{meta.get('namespace')}/{name}"))

    # -- reconcile ------------------------------------------------------------------------------

    async def reconcile(self, key: ObjectKey) -> Result | None:
        raw = self.services.store.get_object(key.namespace, key.name)
        if raw is None:
            self.metrics.forget_isvc(key.namespace, key.name)
            self._written_status.pop(key, None)
            self._rerank_queue(key, waiting_now=False)
            return None
        try:
            isvc = InferenceService.model_validate(raw)
        except ValidationError as error:
            # The API server validated it against the same schema; only a schema skew gets here.
            raise TerminalError(f"InferenceService {key} does not match the API types: {error}") from error
        model = self._model(key.namespace, isvc.spec.model_ref)
        now = datetime.now(UTC)
        observed = self._observe(isvc, now)
        plan = plan_inference_service(isvc, model, observed, self.config)

        try:
            await self._converge(isvc, plan, observed)
        except ApiError as error:
            if namespace_terminating(error):
                # Its namespace is going away, and the service with it: nothing to create or report.
                log.info("namespace is terminating; not converging", namespace=key.namespace, name=key.name)
                return None
            # Report it (decision #19: and retry with backoff by re-raising).
            message = error.message if isinstance(error, NotOurs) else _describe(error)
            failed = failed_status(plan.status, message, generation=isvc.metadata.generation, now=now)
            await self._write_status(isvc, raw, failed)
            raise
        for event in plan.events:
            self.host.recorder.event(raw, event.type, event.reason, event.message)
        await self._write_status(isvc, raw, plan.status)
        return Result(requeue_after=plan.requeue_after) if plan.requeue_after else None

    def _model(self, namespace: str, name: str) -> Model | None:
        raw = self.models.store.get_object(namespace, name)
        if raw is None:
            return None
        try:
            return Model.model_validate(raw)
        except ValidationError as error:
            log.warning("model does not match the API types", model=f"{namespace}/{name}", error=str(error))
            return None

    def _observe(self, isvc: InferenceService, now: datetime) -> ObservedState:
        namespace = isvc.metadata.namespace or ""
        name = isvc.metadata.name or ""
        waiting = self.services.store.by_index(BY_PHASE, WAITING)
        return ObservedState(
            now=now,
            deployment=self.deployments.store.get_object(namespace, name),
            service=self.k8s_services.store.get_object(namespace, service_name(name)),
            hpa=self.hpas.store.get_object(namespace, name),
            pods=tuple(self.pods.store.by_index(BY_SERVICE_LABEL, f"{namespace}/{name}")),
            priority_classes={
                (pc.get("metadata") or {}).get("name") or "": int(pc.get("value") or 0)
                for pc in self.priority_classes.store.objects()
            },
            gpu_queue=tuple(queue_entry_of(obj) for obj in waiting),
            # The planner keeps the slices labelled with this service's Service name: hand it just those.
            endpoint_slices=tuple(
                self.slices.store.by_index(BY_SLICE_SERVICE, f"{namespace}/{service_name(name)}")
            ),
        )

    async def _converge(
        self, isvc: InferenceService, plan: InferenceServicePlan, facts: ObservedState
    ) -> None:
        namespace = isvc.metadata.namespace or ""
        if plan.cache_pvc is not None:
            await self._ensure_cache_pvc(namespace, plan.cache_pvc)
        observed = {"deployment": facts.deployment, "service": facts.service, "hpa": facts.hpa}
        for field, resource in _APPLY_ORDER:
            desired: Obj | None = getattr(plan, field)
            if desired is None:
                continue
            current = observed[field]
            if current is None:
                current = await self._refuse_foreign(resource, desired, isvc)
            elif resource is SERVICES and stray_service_ports(desired, current):
                current = await self._reset_service_ports(desired, current)
            result = await self.host.applier.apply(
                resource,
                desired,
                current,
                policy=POLICIES_BY_KIND[resource.kind],
                initial=plan.deployment_initial if resource is DEPLOYMENTS else None,
            )
            if result.changed:
                log.info(
                    f"{resource.kind} {result.outcome.value}",
                    namespace=namespace,
                    name=isvc.metadata.name,
                    fields=result.reasons[:5],
                )
        for ref in plan.deletes:
            resource = _RESOURCES_BY_KIND[ref.kind]
            try:
                await self.host.client.delete(resource, ref.name, ref.namespace, uid=ref.uid)
                log.info(f"{ref.kind} deleted", namespace=ref.namespace, name=ref.name)
            except NotFound:
                pass  # already gone: that is what we wanted

    async def _refuse_foreign(self, resource: Resource, desired: Obj, isvc: InferenceService) -> Obj | None:
        """Before an apply that would create the object: the cache only holds objects with our
        managed-by label, so one made by someone else under the same name is invisible to it, and a
        forced apply would silently take it over (and later delete it). Never take one over.
        Returns the object when it exists and this service controls it (one the reference operator
        created, not yet labelled: the applier adopts its fields), None when there is none."""
        meta = desired.get("metadata") or {}
        try:
            existing = await self.host.client.get(resource, meta.get("name", ""), meta.get("namespace"))
        except NotFound:
            return None
        if not controlled_by(existing, isvc):
            raise NotOurs(resource.kind, meta.get("namespace", ""), meta.get("name", ""))
        return existing

    async def _reset_service_ports(self, desired: Obj, observed: Obj) -> Obj:
        """Someone replaced our port (e.g. `kubectl edit`): their entry is keyed by its own port
        number, so server-side apply would only add ours next to it (and the API rejects two ports
        named `http`). Put back exactly our ports, guarded by the resourceVersion we looked at."""
        meta = observed["metadata"]
        patch = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]},
            {"op": "replace", "path": "/spec/ports", "value": desired["spec"]["ports"]},
        ]
        stored = await self.host.client.patch(
            SERVICES,
            meta["name"],
            patch,
            meta.get("namespace"),
            patch_type=JSON_PATCH,
            field_manager=self.host.applier.field_manager,
        )
        log.info("Service ports restored", namespace=meta.get("namespace"), name=meta["name"])
        return stored

    async def _ensure_cache_pvc(self, namespace: str, pvc: Obj) -> None:
        """Create the shared cache claim when missing; never update or delete it (it is not ours
        alone). Read from a cache of claims with exactly that name, so a converged service costs no
        request, and a claim deleted by hand is recreated by the next reconcile it triggers."""
        name = pvc["metadata"]["name"]
        if self.cache_claims.store.get_object(namespace, name) is not None:
            return
        try:
            await self.host.client.create(PERSISTENT_VOLUME_CLAIMS, pvc, namespace)
            log.info("model cache PVC created", namespace=namespace, name=name)
        except AlreadyExists:
            pass  # created meanwhile (the cache will show it)

    async def _write_status(self, isvc: InferenceService, raw: Obj, status: InferenceServiceStatus) -> None:
        old = isvc.status
        namespace, name = isvc.metadata.namespace or "", isvc.metadata.name or ""
        key = ObjectKey(namespace, name)
        seen_version = (raw.get("metadata") or {}).get("resourceVersion")
        if not status_write_needed(old, seen_version, self._written_status.get(key), status):
            return
        await self.host.applier.apply_status(INFERENCE_SERVICES, status_body(isvc, status), raw)
        self._written_status[key] = (seen_version, status)
        old_phase = old.phase if old else None
        new_phase = status.phase or ""
        self.metrics.set_isvc_phase(namespace, name, new_phase)
        if new_phase == "Ready" and old_phase != "Ready":
            created = isvc.metadata.creation_timestamp
            if created is not None:
                self.metrics.ready_duration.labels(name, namespace).observe(
                    max(0.0, (datetime.now(UTC) - created).total_seconds())
                )
            self.metrics.reconcile_total.labels(ISVC_CONTROLLER, "success").inc()
        if (old_phase == WAITING) != (new_phase == WAITING):
            # Entering or leaving the queue moves everybody behind (decision #6).
            self._rerank_queue(ObjectKey(namespace, name), waiting_now=new_phase == WAITING)
        log.info("status written", namespace=namespace, name=name, phase=new_phase, previous=old_phase)

    def _rerank_queue(self, changed: ObjectKey, *, waiting_now: bool) -> None:
        """Keep the depth gauge current; the other waiting services are re-planned by the
        `queue_rank_changed` watch once the cache holds `changed`'s new phase."""
        others = [
            key
            for key in (ObjectKey.of(obj) for obj in self.services.store.by_index(BY_PHASE, WAITING))
            if key != changed
        ]
        self.metrics.gpu_queue_depth.set(len(others) + (1 if waiting_now else 0))


def _describe(error: ApiError) -> str:
    return f"API request failed: {error}"
