"""The InferenceService controller: read the cache, plan (pure), write only what differs.

Level-triggered: a reconcile reads everything it needs from informer caches and converges, no
matter which event woke it. It applies each planned object with server-side apply (the applier
skips the request when the fields we own already match), deletes only objects this service
controls, writes status only when more than `lastUpdated` changed, and emits the planned events.

This module is the glue; each job it relies on lives in a module named after it: the caches'
indexes (`isvc_indexes`), the GPU queue (`gpu_queue`), and, knowing nothing about LLMs,
`llmkube.kube.control.status_writer`, `.ownership` (never take over a foreign object) and `.service_ports`.
"""

import asyncio
from dataclasses import replace
from datetime import UTC, datetime

import structlog
from pydantic import ValidationError

from llmkube.api.constants import LABEL_SERVICE
from llmkube.api.inferenceservice import InferenceService, InferenceServiceStatus
from llmkube.api.model import Model
from llmkube.controllers.apply_policies import POLICIES_BY_KIND
from llmkube.controllers.cache_transforms import (
    POD_CACHE,
    PREEMPTION_EVENT_CACHE,
    deployment_cache,
    service_cache,
)
from llmkube.controllers.gpu_queue import CachedGpuQueue
from llmkube.controllers.host import ControllerHost
from llmkube.controllers.isvc_indexes import (
    BY_DRAFT_MODEL,
    BY_GPUS_NEVER_FIT,
    BY_MODEL,
    BY_PRIORITY_CLASS,
    BY_RUNTIME_CLASS,
    BY_SERVICE_LABEL,
    BY_SERVICE_NAME,
    BY_SLICE_SERVICE,
    CACHE_CLAIM_SELECTOR,
    NEVER_FIT,
    SLICE_SERVICE_LABEL,
    gpus_never_fit_index,
    model_ref_index,
    priority_class_index,
    runtime_class_index,
    service_name_index,
)
from llmkube.controllers.isvc_write_failures import WriteFailed, describe_write_failure, writing
from llmkube.controllers.metrics import ISVC_CONTROLLER, LLMKubeMetrics
from llmkube.controllers.model_wait import ModelWait
from llmkube.controllers.node_gpus import LargestGpuNodes
from llmkube.controllers.preemptions import (
    BY_POD_UID,
    BY_REGARDING_UID,
    PREEMPTED_EVENTS,
    PreemptionTracker,
    regarding_uid_index,
    uid_index,
)
from llmkube.controllers.quota_gate import QuotaGate
from llmkube.controllers.resources import (
    DEPLOYMENTS,
    ENDPOINT_SLICES,
    GPU_QUOTAS,
    HORIZONTAL_POD_AUTOSCALERS,
    INFERENCE_SERVICES,
    MANAGED_SELECTOR,
    METAL_SLICES_SELECTOR,
    MODELS,
    NAMESPACE_CACHE_TRANSFORM,
    NAMESPACES,
    NODE_CACHE_TRANSFORM,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PODS,
    PRIORITY_CLASSES,
    RUNTIME_CLASSES,
    SERVICE_PODS_SELECTOR,
    SERVICES,
)
from llmkube.controllers.server_key_master import MasterKeyUnusable, ServerKeyMaster
from llmkube.kube.apply import ApplyResult, refuse_foreign, restore_service_ports, stray_service_ports
from llmkube.kube.cache import BY_NAMESPACE, Change, by_field, by_label, keep_only
from llmkube.kube.control import (
    Controller,
    Result,
    StatusWriter,
    TerminalError,
    Watch,
    annotations_changed,
    any_of,
    deleted,
    enqueue_mapped,
    enqueue_object,
    enqueue_owner,
    generation_changed,
    labels_changed,
)
from llmkube.kube.errors import AlreadyExists, ApiError, NotFound, TooManyRequests, namespace_terminating
from llmkube.kube.resource import EVENTS, SECRETS, Resource
from llmkube.kube.rest import RequestTimeout, TransportError
from llmkube.kube.types import Obj, ObjectKey
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.download import downloading_pod
from llmkube.plan.inferenceservice.gpu import gpu_resource_name, is_metal
from llmkube.plan.inferenceservice.names import service_name
from llmkube.plan.inferenceservice.objects import controlled_by
from llmkube.plan.inferenceservice.observed import ObservedState
from llmkube.plan.inferenceservice.planner import InferenceServicePlan, plan_inference_service
from llmkube.plan.inferenceservice.priority import effective_priority, priority_class_name
from llmkube.plan.inferenceservice.rollout import rollout_of
from llmkube.plan.inferenceservice.server_key import ANNOTATION as SERVER_KEY_ANNOTATION
from llmkube.plan.inferenceservice.service_cache import SERVICE_CACHE_SELECTOR, service_cache_claim_name
from llmkube.plan.inferenceservice.status import (
    failed_status,
    gpu_queue_wait_seconds,
    status_changed,
    with_rollout,
)
from llmkube.plan.inferenceservice.storage import INIT_CONTAINER_NAME
from llmkube.plan.tenancy import namespace_policy

log = structlog.get_logger("llmkube.controllers.inferenceservice")

_APPLY_ORDER: tuple[tuple[str, Resource], ...] = (
    ("deployment", DEPLOYMENTS),
    ("service", SERVICES),
    ("hpa", HORIZONTAL_POD_AUTOSCALERS),
)
_RESOURCES_BY_KIND = {res.kind: res for _, res in _APPLY_ORDER}


_LOG_TIMEOUT = RequestTimeout(total=5.0, connect=3.0)

# Namespaces already logged as terminating (a bound: forgotten ones are only logged again).
_REMEMBERED_NAMESPACES = 1024


def encode_status(status: InferenceServiceStatus) -> Obj:
    return status.model_dump(by_alias=True, exclude_none=True, mode="json")


class InferenceServiceController:
    def __init__(
        self, host: ControllerHost, config: OperatorConfig, metrics: LLMKubeMetrics, workers: int
    ) -> None:
        self.host = host
        self.config = config
        self.metrics = metrics
        self.status_writer = StatusWriter(
            host.applier, INFERENCE_SERVICES, differs=status_changed, encode=encode_status
        )

        self.server_keys = ServerKeyMaster(
            host.client, host.own_namespace, field_manager=host.applier.field_manager
        )
        self.gpu_queue = CachedGpuQueue()
        self.gpu_nodes = LargestGpuNodes()
        self.model_wait = ModelWait()
        self._terminating_namespaces: set[str] = set()
        # Each kept as JSON bytes (kube/cache/store.py): parsed on read, a quarter of the memory.
        self.services = host.informer(INFERENCE_SERVICES, compact=True)
        self.services.add_index(BY_MODEL, model_ref_index)
        self.services.add_index(BY_DRAFT_MODEL, by_field("spec", "speculativeDecoding", "draftModelRef"))
        self.services.add_index(BY_SERVICE_NAME, service_name_index)
        self.services.add_index(BY_PRIORITY_CLASS, priority_class_index)
        self.services.add_index(BY_RUNTIME_CLASS, runtime_class_index)
        self.services.add_index(BY_GPUS_NEVER_FIT, gpus_never_fit_index)
        self.status_writer.follow(self.services)
        self.models = host.informer(MODELS, compact=True)
        manager = host.applier.field_manager
        # Trimmed to what is owned or read first (cache_transforms.py).
        self.deployments = host.informer(
            DEPLOYMENTS, label_selector=MANAGED_SELECTOR, transform=deployment_cache(manager), compact=True
        )
        self.k8s_services = host.informer(
            SERVICES, label_selector=MANAGED_SELECTOR, transform=service_cache(manager), compact=True
        )
        self.hpas = host.informer(HORIZONTAL_POD_AUTOSCALERS, label_selector=MANAGED_SELECTOR)
        self.pods = host.informer(PODS, label_selector=SERVICE_PODS_SELECTOR, transform=POD_CACHE)
        self.pods.add_index(BY_SERVICE_LABEL, by_label(LABEL_SERVICE))
        self.pods.add_index(BY_POD_UID, uid_index)
        # The scheduler's Preempted Events only: who preempted one of our pods.
        self.preemption_events = host.informer(
            EVENTS, field_selector=PREEMPTED_EVENTS, transform=PREEMPTION_EVENT_CACHE
        )
        self.preemption_events.add_index(BY_REGARDING_UID, regarding_uid_index)
        self.preemptions = PreemptionTracker(self.pods.store, self.preemption_events.store)
        self.priority_classes = host.informer(PRIORITY_CLASSES)
        # Only their names: whether a service's runtimeClassName exists.
        self.runtime_classes = host.informer(RUNTIME_CLASSES, transform=keep_only())
        self.cache_claims = host.informer(PERSISTENT_VOLUME_CLAIMS, field_selector=CACHE_CLAIM_SELECTOR)
        # The services' own cache claims (per-service storage), by their labels.
        self.service_claims = host.informer(PERSISTENT_VOLUME_CLAIMS, label_selector=SERVICE_CACHE_SELECTOR)
        self.slices = host.informer(ENDPOINT_SLICES, label_selector=METAL_SLICES_SELECTOR)
        self.slices.add_index(BY_SLICE_SERVICE, by_label(SLICE_SERVICE_LABEL))
        # GPU counts (a service asking more than any node has is not queued) and, for the memory-fit
        # check, GPU memory (a label change shows at the next reconcile).
        self.nodes = host.informer(NODES, transform=NODE_CACHE_TRANSFORM)
        # What each namespace allows (Pod Security level, local sources, priority ceiling).
        self.namespaces = host.informer(NAMESPACES, transform=NAMESPACE_CACHE_TRANSFORM)

        # GPUQuotas: the GPU queue admits replicas within them (quota_gate.py).
        self.quotas = host.informer(GPU_QUOTAS)
        self.quota_gate = QuotaGate(
            quotas=self.quotas.store,
            services=self.services.store,
            models=self.models.store,
            deployments=self.deployments.store,
            hpas=self.hpas.store,
            nodes=self.nodes.store,
            namespaces=self.namespaces.store,
            gpu_resource=lambda model: gpu_resource_name(model, config),
        )

        host.add_task("inferenceservice:state-metrics", self._publish_state_metrics)
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
                # The GPU queue follows the cache; the services whose position moved are re-planned.
                Watch(INFERENCE_SERVICES, self.gpu_queue.follow),
                # The GPU quotas: a service deleted, a workload shrunk, a quota changed let waiters in.
                Watch(INFERENCE_SERVICES, self.quota_gate.follow_service),
                Watch(GPU_QUOTAS, self.quota_gate.follow_quota, predicates=[generation_changed]),
                Watch(DEPLOYMENTS, self.quota_gate.follow_workload, label_selector=MANAGED_SELECTOR),
                Watch(
                    HORIZONTAL_POD_AUTOSCALERS,
                    self.quota_gate.follow_workload,
                    label_selector=MANAGED_SELECTOR,
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
                # A preemption is noted while the cache still shows the pod (it is deleted at once).
                Watch(PODS, self.preemptions.follow_pod, label_selector=SERVICE_PODS_SELECTOR),
                Watch(EVENTS, self.preemptions.follow_event, field_selector=PREEMPTED_EVENTS),
                Watch(PRIORITY_CLASSES, enqueue_mapped(self._services_of_priority_class)),
                Watch(RUNTIME_CLASSES, enqueue_mapped(self._services_of_runtime_class)),
                # Only the most GPUs a node has matters (never a heartbeat): who never fits, who waits.
                Watch(NODES, self._services_judged_by_gpu_nodes),
                # Only deletions matter: a missing cache claim is recreated for the namespace.
                Watch(
                    PERSISTENT_VOLUME_CLAIMS,
                    enqueue_mapped(self._services_in_namespace),
                    predicates=[deleted],
                    field_selector=CACHE_CLAIM_SELECTOR,
                ),
                # A service's own claim: created (so its size is known), changed, or deleted by hand.
                Watch(
                    PERSISTENT_VOLUME_CLAIMS,
                    enqueue_owner(INFERENCE_SERVICES),
                    label_selector=SERVICE_CACHE_SELECTOR,
                ),
                Watch(
                    ENDPOINT_SLICES,
                    enqueue_mapped(self._services_of_slice),
                    label_selector=METAL_SLICES_SELECTOR,
                ),
                # The cache keeps only the policy labels: any label change is a policy change.
                Watch(NAMESPACES, enqueue_mapped(self._services_of_namespace), predicates=[labels_changed]),
            ],
        )

    # -- event -> keys --------------------------------------------------------------------------

    def _keys(self, index: str, value: str) -> list[ObjectKey]:
        # The index's keys, not its objects: a mapping parses none of the (compact) services.
        return [ObjectKey.parse(key) for key in self.services.store.keys_by_index(index, value)]

    def _services_of_model(self, model: Obj) -> list[ObjectKey]:
        meta = model.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        return [*self._keys(BY_MODEL, key), *self._keys(BY_DRAFT_MODEL, key)]

    def _services_in_namespace(self, obj: Obj) -> list[ObjectKey]:
        namespace = (obj.get("metadata") or {}).get("namespace") or ""
        return self._keys(BY_NAMESPACE, namespace)

    def _services_of_namespace(self, namespace: Obj) -> list[ObjectKey]:
        return self._keys(BY_NAMESPACE, (namespace.get("metadata") or {}).get("name") or "")

    def _service_of_pod(self, pod: Obj) -> list[ObjectKey]:
        meta = pod.get("metadata") or {}
        name = (meta.get("labels") or {}).get(LABEL_SERVICE)
        return [ObjectKey(meta.get("namespace") or "", name)] if name else []

    def _services_of_priority_class(self, priority_class: Obj) -> list[ObjectKey]:
        name = (priority_class.get("metadata") or {}).get("name") or ""
        return self._keys(BY_PRIORITY_CLASS, name)

    def _services_of_runtime_class(self, runtime_class: Obj) -> list[ObjectKey]:
        name = (runtime_class.get("metadata") or {}).get("name") or ""
        return self._keys(BY_RUNTIME_CLASS, name)

    def _services_judged_by_gpu_nodes(self, change: Change) -> list[ObjectKey]:
        """When the largest GPU node changes, the services that no node could hold may now fit (and
        wait in the queue), and waiting ones may no longer fit anywhere."""
        if not self.gpu_nodes.follow(change):
            return []
        waiting = [ObjectKey(namespace, name) for namespace, name in self.gpu_queue.identities()]
        return [*self._keys(BY_GPUS_NEVER_FIT, NEVER_FIT), *waiting]

    def _services_of_slice(self, endpoint_slice: Obj) -> list[ObjectKey]:
        meta = endpoint_slice.get("metadata") or {}
        name = (meta.get("labels") or {}).get(SLICE_SERVICE_LABEL)
        if not name:
            return []
        return self._keys(BY_SERVICE_NAME, f"{meta.get('namespace')}/{name}")

    # -- reconcile ------------------------------------------------------------------------------

    async def reconcile(self, key: ObjectKey) -> Result | None:
        raw = self.services.store.get_object(key.namespace, key.name)
        if raw is None:
            for waiter in self.quota_gate.waiters(self.quota_gate.forget((key.namespace, key.name))):
                self.controller.enqueue(waiter)
            self.metrics.forget_isvc(key.namespace, key.name)
            self.status_writer.forget(key)
            self.model_wait.forget(key)
            self.preemptions.forget(key)
            return None
        try:
            isvc = InferenceService.model_validate(raw)
        except ValidationError as error:
            # The API server validated it against the same schema; only a schema skew gets here.
            raise TerminalError(f"InferenceService {key} does not match the API types: {error}") from error
        # Plan from the status as it is now, our own last write included (kube/control/status_writer.py).
        isvc = isvc.model_copy(update={"status": self.status_writer.current(raw, isvc.status)})
        model = self._model(key.namespace, isvc.spec.model_ref)
        now = datetime.now(UTC)
        if (wait := self.model_wait.hold(key, model, now)) is not None:
            return Result(requeue_after=wait)  # the Model's first status write wakes us sooner
        observed = self._observe(isvc, now)
        if model is not None and is_metal(model):
            # Its host servers ask for a key of its own (server_key.py); an error is retried.
            try:
                observed = replace(observed, server_key_master=await self.server_keys.get())
            except MasterKeyUnusable as unusable:
                # An admin's to mend: said in status and an Event, and retried with backoff.
                message = str(unusable)
                self.host.recorder.event(raw, "Warning", SERVER_KEY_UNUSABLE, message)
                base = isvc.status or InferenceServiceStatus()
                failed = failed_status(
                    base,
                    message,
                    previous=isvc.status,
                    generation=isvc.metadata.generation,
                    now=now,
                    reason=SERVER_KEY_UNUSABLE,
                )
                await self._write_status(isvc, raw, failed)
                raise
        downloading = downloading_pod(observed.pods)
        if downloading:
            observed = replace(observed, download_log=await self._download_log(key.namespace, downloading))
        # The quota decision, the plan and the ledger's record with no await between them: no other
        # worker decides in the meantime (quota_gate.py).
        grant, claim = None, None
        if model is not None and model.status is not None and model.status.phase == "Ready":
            grant, claim = self.quota_gate.decide(
                isvc, model, _priority_of(isvc, observed), dict(observed.priority_classes)
            )
            observed = replace(observed, quota=grant)
        plan = plan_inference_service(isvc, model, observed, self.config)
        woken = self.quota_gate.record((key.namespace, key.name), claim, applied=plan.deployment is not None)
        for waiter in self.quota_gate.waiters(woken, skip=(key.namespace, key.name)):
            self.controller.enqueue(waiter)

        # Announced whether or not the objects can be written: the status says the same either way.
        for event in plan.events:
            self.host.recorder.event(raw, event.type, event.reason, event.message)
        try:
            applied_deployment = await self._converge(isvc, plan, observed)
        except WriteFailed as failed_write:
            if namespace_terminating(failed_write.error):
                # Its namespace is going away, and the service with it: nothing to create or report.
                # Said once per namespace: each of its services (and each retry) would repeat it.
                if key.namespace not in self._terminating_namespaces:
                    if len(self._terminating_namespaces) >= _REMEMBERED_NAMESPACES:
                        self._terminating_namespaces.clear()
                    self._terminating_namespaces.add(key.namespace)
                    log.info(
                        "namespace is terminating: its services are not converged", namespace=key.namespace
                    )
                return None
            # Report it, in the service's terms, once in status and in an Event series, and retry
            # with backoff by re-raising (the reference operator never retried a failed create).
            failure = describe_write_failure(isvc, failed_write)
            self.host.recorder.event(raw, "Warning", failure.event_reason, failure.message)
            failed = failed_status(
                plan.status,
                failure.message,
                previous=isvc.status,
                generation=isvc.metadata.generation,
                now=now,
                reason=failure.reason,
            )
            await self._write_status(isvc, raw, failed)
            raise failed_write.error from None
        status = plan.status
        if applied_deployment is not None:  # a rollout the plan, made from the cache, cannot know of
            status = with_rollout(
                status, rollout_of(applied_deployment), generation=isvc.metadata.generation, now=now
            )
        await self._write_status(isvc, raw, status)
        if observed.preemption is not None:
            self.preemptions.reported(key, observed.preemption)
        return Result(requeue_after=plan.requeue_after) if plan.requeue_after else None

    async def _download_log(self, namespace: str, pod: str) -> str | None:
        """The last lines the model-downloader printed (its progress), or None: the figures are a
        courtesy, and a slow or refused read must not hold up the reconcile."""
        path = PODS.object_path(pod, namespace, "log")
        params: dict[str, str | int | bool | None] = {"container": INIT_CONTAINER_NAME, "tailLines": 3}
        try:
            async with self.host.client.open(
                "GET", path, params=params, request_timeout=_LOG_TIMEOUT
            ) as answer:
                return (await answer.read()).decode(errors="replace")
        except (ApiError, TransportError) as error:
            log.debug("download progress unavailable", namespace=namespace, pod=pod, error=str(error))
            return None

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
            gpu_queue=self.gpu_queue.queue,
            # The planner keeps the slices labelled with this service's Service name: hand it just those.
            endpoint_slices=tuple(
                self.slices.store.by_index(BY_SLICE_SERVICE, f"{namespace}/{service_name(name)}")
            ),
            runtime_classes=frozenset(
                (rc.get("metadata") or {}).get("name") or "" for rc in self.runtime_classes.store.objects()
            ),
            nodes=tuple(self.nodes.store.objects()),
            namespace=namespace_policy(self.namespaces.store.get_object(None, namespace)),
            gpu_nodes=self.gpu_nodes.largest() if self.nodes.has_synced() else None,
            preemption=self.preemptions.pending(ObjectKey(namespace, name)),
            service_cache_claim=self.service_claims.store.get_object(
                namespace, service_cache_claim_name(name)
            ),
            draft_model=self._model(namespace, draft) if (draft := _draft_model_ref(isvc)) else None,
        )

    async def _converge(
        self, isvc: InferenceService, plan: InferenceServicePlan, facts: ObservedState
    ) -> Obj | None:
        """Apply and delete what the plan says; returns the Deployment when this changed it. A failed
        write is raised as WriteFailed, naming the object."""
        namespace = isvc.metadata.namespace or ""
        changed_deployment: Obj | None = None
        if plan.cache_pvc is not None:
            with writing("PersistentVolumeClaim", plan.cache_pvc):
                await self._ensure_cache_pvc(namespace, plan.cache_pvc)
        if plan.service_cache is not None:
            with writing("PersistentVolumeClaim", plan.service_cache):
                await self._create_service_cache(isvc, plan.service_cache)
        if plan.server_key is not None and _recorded_key(facts.service) != _recorded_key(plan.service):
            with writing("Secret", plan.server_key):
                await self._create_server_key(plan.server_key)
        observed = {"deployment": facts.deployment, "service": facts.service, "hpa": facts.hpa}
        for field, resource in _APPLY_ORDER:
            desired: Obj | None = getattr(plan, field)
            if desired is None:
                continue
            with writing(resource.kind, desired):
                result = await self._apply(isvc, plan, resource, desired, observed[field])
            if result.changed:
                log.info(
                    f"{resource.kind} {result.outcome.value}",
                    namespace=namespace,
                    name=isvc.metadata.name,
                    fields=result.reasons[:5],
                )
                if resource is DEPLOYMENTS:
                    changed_deployment = result.object
        for ref in plan.deletes:
            resource = _RESOURCES_BY_KIND[ref.kind]
            with writing(ref.kind, None):
                try:
                    await self.host.client.delete(resource, ref.name, ref.namespace, uid=ref.uid)
                    log.info(f"{ref.kind} deleted", namespace=ref.namespace, name=ref.name)
                except NotFound:
                    pass  # already gone: that is what we wanted
                self.host.applier.forget(resource, ref.name, ref.namespace)
        for pod_name in plan.evictions:
            await self._evict(namespace, pod_name)
        return changed_deployment

    async def _evict(self, namespace: str, name: str) -> None:
        """Evict a pod past its lifetime (plan/inferenceservice/lifetime.py). A PodDisruptionBudget
        that forbids it now (429) or a pod already gone is not an error: the next look tries again."""
        eviction = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        with writing("Pod", None):
            try:
                await self.host.client.request(
                    "POST", PODS.object_path(name, namespace, "eviction"), body=eviction
                )
                log.info("pod evicted", namespace=namespace, name=name, reason="maxPodLifetimeSeconds")
            except NotFound:
                pass
            except TooManyRequests:
                log.info("eviction refused for now", namespace=namespace, name=name)

    async def _apply(
        self,
        isvc: InferenceService,
        plan: InferenceServicePlan,
        resource: Resource,
        desired: Obj,
        current: Obj | None,
    ) -> ApplyResult:
        if current is None:
            # The cache only holds objects with our managed-by label: one made by someone else
            # under this name is invisible to it. Never take one over.
            current = await refuse_foreign(
                self.host.client,
                resource,
                desired,
                lambda existing: controlled_by(existing, isvc),
                owner="InferenceService",
            )
        elif resource is SERVICES and stray_service_ports(desired, current):
            current = await restore_service_ports(
                self.host.client, desired, current, self.host.applier.field_manager
            )
        return await self.host.applier.apply(
            resource,
            desired,
            current,
            policy=POLICIES_BY_KIND[resource.kind],
            initial=plan.deployment_initial if resource is DEPLOYMENTS else None,
        )

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

    async def _create_service_cache(self, isvc: InferenceService, pvc: Obj) -> None:
        """Create the service's own claim; never change it (the plan has one only while the cache
        has none). A claim of that name that the service does not control is never taken over
        (NotOurs: the service fails naming it). Created, not applied: an apply of a claim the cache
        has not seen yet would resize it, which the controller never does."""
        meta = pvc["metadata"]
        existing = await refuse_foreign(
            self.host.client,
            PERSISTENT_VOLUME_CLAIMS,
            pvc,
            lambda found: controlled_by(found, isvc),
            owner="InferenceService",
        )
        if existing is not None:
            return  # ours already: the cache will show it
        try:
            manager = self.host.applier.field_manager
            await self.host.client.create(PERSISTENT_VOLUME_CLAIMS, pvc, field_manager=manager)
            log.info("service model cache PVC created", namespace=meta["namespace"], name=meta["name"])
        except AlreadyExists:
            pass  # created meanwhile (the cache will show it)

    async def _create_server_key(self, secret: Obj) -> None:
        """Create a metal service's key Secret (server_key.py) before the Service records it. The
        controller cannot read Secrets, so one of that name that is already there is either this
        service's predecessor's, being deleted with it, or somebody else's: it is said, and the
        reconcile retried with backoff (the predecessor's goes; somebody else's must be deleted)."""
        meta = secret["metadata"]
        try:
            await self.host.client.create(
                SECRETS, secret, meta["namespace"], field_manager=self.host.applier.field_manager
            )
        except AlreadyExists:
            raise AlreadyExists(
                409,
                f"Secret {meta['namespace']}/{meta['name']} already exists, and the controller cannot tell "
                "whether it holds this service's server key: if the service was just made again under its "
                "name, the old one is deleted with its old owner in a moment; else delete it, and the "
                "controller writes the key there (docs/agent.md#server-keys)",
                reason="AlreadyExists",
            ) from None
        log.info("server key created", namespace=meta["namespace"], name=meta["name"])

    async def _write_status(self, isvc: InferenceService, raw: Obj, status: InferenceServiceStatus) -> None:
        old = isvc.status
        namespace, name = isvc.metadata.namespace or "", isvc.metadata.name or ""
        if await self.status_writer.write(raw, old, status) is None:
            return
        old_phase = old.phase if old else None
        new_phase = status.phase or ""
        now = datetime.now(UTC)
        if new_phase == "Ready" and old_phase != "Ready":
            created = isvc.metadata.creation_timestamp
            if created is not None:
                self.metrics.ready_duration.labels(name, namespace).observe(
                    max(0.0, (now - created).total_seconds())
                )
        waited = gpu_queue_wait_seconds(old, status, now)
        if waited is not None:
            self.metrics.gpu_queue_wait.labels(name, namespace).observe(waited)
        log.info("status written", namespace=namespace, name=name, phase=new_phase, previous=old_phase)

    async def _publish_state_metrics(self) -> None:
        """While the controllers run (the leader), the per-service and queue gauges report this cache."""
        withdraw = self.metrics.state.publish_services(
            self.services.store, self.gpu_queue.identities, self.models.store
        )
        try:
            await asyncio.Event().wait()
        finally:
            withdraw()


#: the master key's Secret is there but holds no usable key
SERVER_KEY_UNUSABLE = "ServerKeyUnusable"


def _recorded_key(service: Obj | None) -> str | None:
    """The server key a metal service's Service says the controller wrote (server_key.py)."""
    annotations = ((service or {}).get("metadata") or {}).get("annotations") or {}
    value = annotations.get(SERVER_KEY_ANNOTATION)
    return value if isinstance(value, str) else None


def _priority_of(isvc: InferenceService, observed: ObservedState) -> int | None:
    """The service's effective priority (the value of the PriorityClass its pods use)."""
    return effective_priority(priority_class_name(isvc.spec), observed.priority_classes)


def _draft_model_ref(isvc: InferenceService) -> str:
    decoding = isvc.spec.speculative_decoding
    return decoding.draft_model_ref or "" if decoding is not None else ""
