"""The Model controller: observe (cache, claim, nodes, cache directory) -> plan (pure) -> act
(copy, verify, probe) -> plan again -> status. The loop itself is
`modelsource.drive_model_plan`; this module feeds it facts and persists what it decides.

Actions run in the background (modelsource/background.py): a reconcile starts one and ends, and
the action's result is a fact of the next reconcile. Every http(s) request goes through the
egress policy (llmkube/sources: cluster_addresses.py, egress.py). A status the API server refuses is
replaced by a small one that says so (`StatusRejected`), never left unwritten.
"""

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import aiohttp
import orjson
import structlog
from pydantic import ValidationError

from llmkube.api.model import Model, ModelStatus
from llmkube.controllers.host import ControllerHost
from llmkube.controllers.isvc_indexes import BY_MODEL, model_ref_index
from llmkube.controllers.metrics import MODEL_CONTROLLER, LLMKubeMetrics
from llmkube.controllers.model_prefetch import (
    CACHE_CLAIM_SELECTOR,
    PREFETCH_PODS_SELECTOR,
    PREFETCH_SELECTOR,
    carry_out,
    clear_jobs_of,
    prefetch_jobs_of,
)
from llmkube.controllers.modelsource import ModelSourceIO, drive_model_plan
from llmkube.controllers.modelsource.background import BackgroundActions, SlotPools
from llmkube.controllers.modelsource.executor import ActionPerformer
from llmkube.controllers.modelsource.hublisting import ListingCache
from llmkube.controllers.resources import (
    INFERENCE_SERVICES,
    JOBS,
    MODELS,
    NAMESPACE_CACHE_TRANSFORM,
    NAMESPACES,
    NODE_CACHE_TRANSFORM,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PODS,
    namespace_being_deleted,
)
from llmkube.kube.apply import ApplyResult
from llmkube.kube.blocking import StopFlag
from llmkube.kube.cache import BY_NAMESPACE, Change
from llmkube.kube.control import (
    Controller,
    Result,
    StatusWriter,
    TerminalError,
    Watch,
    any_of,
    enqueue_mapped,
    enqueue_object,
    enqueue_owner,
    generation_changed,
    labels_changed,
)
from llmkube.kube.errors import ApiError, NotFound
from llmkube.kube.resource import EVENTS
from llmkube.kube.rest import RequestTimeout, TransportError
from llmkube.kube.types import Obj, ObjectKey
from llmkube.plan.model import (
    MAX_STATUS_BYTES,
    ActionKind,
    ClearFacts,
    ModelAction,
    ModelFacts,
    ModelPlanConfig,
    is_refused_status,
    model_events,
    status_after_refusal,
    status_changed,
)
from llmkube.plan.model.cache_clear import CLEAR_ANNOTATION, FORCE_ANNOTATION, services_to_confirm
from llmkube.plan.model.downloader import NAME as DOWNLOADER
from llmkube.plan.model.egress import EgressConfig
from llmkube.plan.model.prefetch import CACHE_CLAIM
from llmkube.plan.model.source import REMOTE_KINDS, SourceKind, classify_source, parse_pvc_source
from llmkube.plan.tenancy import namespace_policy
from llmkube.sources import ClusterAddresses, GuardedResolver

log = structlog.get_logger("llmkube.controllers.model")
_LOG_TIMEOUT = RequestTimeout(total=5.0, connect=3.0)

_GPU_ACCELERATORS = ("cuda", "rocm", "vulkan", "intel")


def gpu_capacity(nodes: Iterable[Obj]) -> dict[str, int]:
    """Summed node capacity per extended resource (only the ones with a `/` in their name)."""
    total: dict[str, int] = {}
    for node in nodes:
        capacity = (node.get("status") or {}).get("capacity") or {}
        for resource, value in capacity.items():
            if "/" not in resource:
                continue
            try:
                total[resource] = total.get(resource, 0) + int(str(value))
            except ValueError:
                continue
    return total


def _extended_capacity(node: Obj | None) -> dict[str, int]:
    return gpu_capacity([node]) if node is not None else {}


def node_capacity_changed(change: Change) -> bool:
    """Node heartbeats rewrite status every few seconds: only a change of extended-resource
    capacity (GPUs added or removed) matters to Models."""
    if change.type != "MODIFIED":
        return True
    return _extended_capacity(change.old_obj) != _extended_capacity(change.new)


def clear_requested(change: Change) -> bool:
    """A cache clear asked for (or its force flag): annotations, which bump no generation."""
    if change.type != "MODIFIED":
        return True

    def wanted(obj: Obj | None) -> tuple[str | None, str | None]:
        annotations = ((obj or {}).get("metadata") or {}).get("annotations") or {}
        return annotations.get(CLEAR_ANNOTATION), annotations.get(FORCE_ANNOTATION)

    return wanted(change.old_obj) != wanted(change.new)


def services_naming(services: Iterable[Obj], model: str) -> tuple[str, ...]:
    """The InferenceServices (of the Model's namespace) whose modelRef names it, by name."""
    return tuple(
        sorted(
            str((s.get("metadata") or {}).get("name") or "")
            for s in services
            if (s.get("spec") or {}).get("modelRef") == model
        )
    )


def encode_status(status: ModelStatus) -> Obj:
    return status.model_dump(by_alias=True, exclude_none=True, mode="json")


@dataclass(frozen=True)
class TimedCopies:
    """Performs the plan's actions, timing the ones that copy the model into the cache."""

    io: ActionPerformer
    observe: Callable[[float], None]

    async def perform(self, action: ModelAction, facts: ModelFacts) -> ModelFacts | None:
        if action.kind not in (ActionKind.COPY_LOCAL, ActionKind.REFETCH):
            return await self.io.perform(action, facts)
        started = time.perf_counter()
        performed = await self.io.perform(action, facts)
        self.observe(time.perf_counter() - started)  # a copy that was stopped has no duration
        return performed


class ModelController:
    def __init__(
        self,
        host: ControllerHost,
        config: ModelPlanConfig,
        metrics: LLMKubeMetrics,
        workers: int,
        *,
        copy_bytes_per_second: float | None = None,
        egress: EgressConfig | None = None,
        cache_claim: Callable[[str], Obj] | None = None,
    ) -> None:
        self.host = host
        self.config = config
        self.metrics = metrics
        self.status_writer = StatusWriter(host.applier, MODELS, differs=status_changed, encode=encode_status)
        self.models = host.informer(MODELS, compact=True)  # as the InferenceService controller asks
        self.status_writer.follow(self.models)
        self.nodes = host.informer(NODES, transform=NODE_CACHE_TRANSFORM)
        self.namespaces = host.informer(NAMESPACES, transform=NAMESPACE_CACHE_TRANSFORM)
        # Prefetch Jobs (by their label only), and the namespace cache claims they mount, which
        # `cache_claim(namespace)` plans (None: the claim is left to whoever made it).
        self.jobs = host.informer(JOBS, label_selector=PREFETCH_SELECTOR)
        self.cache_claims = host.informer(PERSISTENT_VOLUME_CLAIMS, field_selector=CACHE_CLAIM_SELECTOR)
        self.prefetch_pods = host.informer(PODS, label_selector=PREFETCH_PODS_SELECTOR)
        # The services that name a Model (a cache clear is refused while one does): the
        # InferenceService controller's own cache, shared.
        self.services = host.informer(INFERENCE_SERVICES, compact=True)
        # Which services name a Model, by their keys: a Model's reconcile parses none of them.
        self.services.add_index(BY_MODEL, model_ref_index)
        self._cache_claim = cache_claim
        self._session: aiohttp.ClientSession | None = None
        self._listings = ListingCache()  # the Hub's file lists (modelsource/hublisting.py)
        self._copy_bytes_per_second = copy_bytes_per_second
        # Set when the host stops the controllers: every copy and hash in flight stops within a
        # chunk and removes its partial file (the next leader copies afresh).
        self._stop_io = StopFlag()
        self.addresses = ClusterAddresses(
            egress or EgressConfig(),
            host.client,
            self.nodes.store.objects,
            cluster_wide=self.models.namespace is None,
        )
        self.controller: Controller = host.add_controller(
            MODEL_CONTROLLER,
            metrics.timed(MODEL_CONTROLLER, self.reconcile),
            workers=workers,
            watches=[
                Watch(MODELS, enqueue_object, predicates=[any_of(generation_changed, clear_requested)]),
                Watch(NODES, enqueue_mapped(self._gpu_models), predicates=[node_capacity_changed]),
                # Whether a namespace may use local sources (the cache keeps only the policy labels).
                Watch(NAMESPACES, enqueue_mapped(self._local_models), predicates=[labels_changed]),
                # A prefetch Job's progress and end (its status), or its deletion, come back to the Model.
                Watch(JOBS, enqueue_owner(MODELS)),
            ],
        )
        # Copies and hashes share the disk as the Model workers once did (at most that many at once).
        self.actions = BackgroundActions(self._perform, self.controller.enqueue, SlotPools.sized(workers))
        host.add_task("model:io", self._own_io)
        host.add_task("model:egress", self.addresses.discover)
        host.add_task("model:state-metrics", self._publish_state_metrics)

    def _gpu_models(self, _node: Obj) -> list[ObjectKey]:
        keys = []
        for model in self.models.store.objects():
            accelerator = ((model.get("spec") or {}).get("hardware") or {}).get("accelerator")
            if accelerator in _GPU_ACCELERATORS:
                keys.append(ObjectKey.of(model))
        return keys

    def _local_models(self, namespace: Obj) -> list[ObjectKey]:
        name = (namespace.get("metadata") or {}).get("name") or ""
        return [
            ObjectKey.of(model)
            for model in self.models.store.by_index(BY_NAMESPACE, name)
            if classify_source(str((model.get("spec") or {}).get("source") or "")) is SourceKind.LOCAL
        ]

    async def _publish_state_metrics(self) -> None:
        """While the controllers run (the leader), the Model status gauge reports this cache."""
        withdraw = self.metrics.state.publish_models(self.models.store)
        try:
            await asyncio.Event().wait()
        finally:
            withdraw()

    async def _own_io(self) -> None:
        """Runs while the controllers do (tasks start with them and are the first thing a
        shutdown cancels): then stops the copies in flight and closes the HTTP session for model
        sources (HEAD, Range reads)."""
        try:
            await asyncio.Event().wait()
        finally:
            self._stop_io.set()
            await self.actions.close()
            if self._session is not None:
                await self._session.close()

    def _io(self) -> ModelSourceIO:
        if self._session is None or self._session.closed:
            # Every connection's addresses come from the guarded resolver (no second lookup).
            connector = aiohttp.TCPConnector(resolver=GuardedResolver(self.addresses.policy))
            self._session = aiohttp.ClientSession(
                connector=connector, headers={"User-Agent": "llmkube-controller"}
            )
        return ModelSourceIO(
            session=self._session,
            stop=self._stop_io,
            copy_bytes_per_second=self._copy_bytes_per_second,
            local_roots=self.config.local_source_roots,
            policy=self.addresses.policy,
            listings=self._listings,
        )

    async def _perform(self, key: ObjectKey, action: ModelAction, facts: ModelFacts) -> ModelFacts | None:
        """One action, in its background task; copies are timed for the download metric."""
        if action.source_kind in REMOTE_KINDS or action.kind is ActionKind.LIST_REPOSITORY:
            await self.addresses.ready()

        def copied(seconds: float) -> None:
            # The series appears with the first copy: Models that are never copied add none.
            self.metrics.download_duration.labels(key.name, key.namespace, "local").observe(seconds)

        return await TimedCopies(self._io(), copied).perform(action, facts)

    async def reconcile(self, key: ObjectKey) -> Result | None:
        raw = self.models.store.get_object(key.namespace, key.name)
        if raw is None:
            self.metrics.forget_model(key.namespace, key.name)
            self.status_writer.forget(key)
            self.actions.forget(key)
            return None
        try:
            model = Model.model_validate(raw)
        except ValidationError as error:
            raise TerminalError(f"Model {key} does not match the API types: {error}") from error
        # Plan from the status as it is now, our own last writes included (kube/control/status_writer.py).
        model = model.model_copy(update={"status": self.status_writer.current(raw, model.status)})

        observed = ModelFacts(
            pvc_phase=await self._pvc_phase(model),
            gpu_capacity=gpu_capacity(self.nodes.store.objects()) if self.nodes.has_synced() else None,
            cached_file=await self._io().observe_cached_file(model, self.config),
            local_sources_allowed=namespace_policy(
                self.namespaces.store.get_object(None, key.namespace)
            ).local_sources_allowed,
            prefetch_jobs=await prefetch_jobs_of(
                self.jobs.store.by_index(BY_NAMESPACE, key.namespace),
                self.prefetch_pods.store.by_index(BY_NAMESPACE, key.namespace),
                model.metadata.uid or "",
                self._downloader_log,
                self._events,
            ),
            clear=ClearFacts(
                jobs=clear_jobs_of(
                    self.jobs.store.by_index(BY_NAMESPACE, key.namespace), model.metadata.uid or ""
                ),
                services=await self._services_naming(model),
                claim_exists=self.cache_claims.store.get_object(key.namespace, CACHE_CLAIM) is not None,
            ),
        )
        facts, results = self.actions.facts_for(key, observed)
        stored = {"raw": raw}

        async def write_status(current: Model, status: ModelStatus) -> Model:
            result = await self._write_status(
                key, stored["raw"], current.status, status, current.metadata.generation
            )
            if result is None:
                return current
            stored["raw"] = result.object
            written = Model.model_validate(result.object)
            for event in model_events(current.status, written.status or status):
                self.host.recorder.event(result.object, event.type, event.reason, event.message)
            return written

        decision = await drive_model_plan(
            model, facts, self.config, self.actions.performer(key), write_status
        )
        self.actions.consumed(key, results)
        if namespace_being_deleted(self.namespaces.store.get_object(None, key.namespace)):
            # Its Jobs are being deleted with it and nothing new can be created there: a Job
            # created again for each deletion would only be refused.
            return None
        if decision.prefetch is not None:
            await carry_out(
                self.host.client,
                decision.prefetch,
                key.namespace,
                claims=self.cache_claims.store,
                claim_intent=self._cache_claim,
            )
        if decision.cache_clear is not None:
            await carry_out(
                self.host.client,
                decision.cache_clear,
                key.namespace,
                claims=self.cache_claims.store,
                claim_intent=None,
                what="cache clear",
            )
        if decision.waiting:
            return None  # the action's end queues the Model again
        if decision.requeue.backoff:
            # The failure is in status already; retry through the per-item rate limiter.
            log.warning("model not ready, retrying with backoff", error=decision.error)
            return Result(requeue=True)
        if decision.requeue.after is not None:
            return Result(requeue_after=max(1.0, decision.requeue.after / timedelta(seconds=1)))
        return None

    async def _write_status(
        self,
        key: ObjectKey,
        raw: Obj,
        cached: ModelStatus | None,
        status: ModelStatus,
        generation: int | None,
    ) -> ApplyResult | None:
        """Write `status`; if the API server refuses it (too large, invalid), write the small
        status that says so instead: a Model is never left without one. Anything else, and a
        refusal of that status too, is raised (and retried with backoff, from the same facts)."""
        size = len(orjson.dumps(encode_status(status)))
        try:
            if size > MAX_STATUS_BYTES:
                raise ApiError(
                    413, f"a status of {size} bytes (at most {MAX_STATUS_BYTES} are sent)", reason="NotSent"
                )
            result = await self.status_writer.write(raw, cached, status)
        except ApiError as error:
            if not is_refused_status(error.status):
                raise
            log.warning(
                "status refused, writing a smaller one",
                namespace=key.namespace,
                name=key.name,
                code=error.status,
                reason=error.reason,
            )
            status = status_after_refusal(
                status,
                cached,
                code=error.status,
                reason=error.reason,
                detail=error.message,
                now=datetime.now(UTC),
                generation=generation,
            )
            result = await self.status_writer.write(raw, cached, status)
        if result is not None:
            log.info("status written", namespace=key.namespace, name=key.name, phase=status.phase)
        return result

    async def _services_naming(self, model: Model) -> tuple[str, ...]:
        """The services that name the Model, from the cache; read again from the API server when
        a pending clear request would be refused on the cache's word (services_to_confirm)."""
        namespace, name = model.metadata.namespace or "", model.metadata.name or ""
        keys = self.services.store.keys_by_index(BY_MODEL, f"{namespace}/{name}")
        cached = tuple(sorted(ObjectKey.parse(key).name for key in keys))
        record = model.status.cache_clear if model.status is not None else None
        if not services_to_confirm(model.metadata.annotations, record, cached):
            return cached
        live = services_naming(await self.host.client.list_all(INFERENCE_SERVICES, namespace), name)
        if live != cached:
            log.info(
                "services read again for a cache clear",
                namespace=namespace,
                name=name,
                cached=cached,
                live=live,
            )
        return live

    async def _downloader_log(self, namespace: str, pod: str) -> str | None:
        """The last lines a prefetch pod's downloader printed (its progress), or None: the figures
        are a courtesy, and a slow or refused read must not hold up the reconcile."""
        params: dict[str, str | int | bool | None] = {"container": DOWNLOADER, "tailLines": 3}
        try:
            async with self.host.client.open(
                "GET", PODS.object_path(pod, namespace, "log"), params=params, request_timeout=_LOG_TIMEOUT
            ) as answer:
                return (await answer.read()).decode(errors="replace")
        except (ApiError, TransportError) as error:
            log.debug("prefetch progress unavailable", namespace=namespace, pod=pod, error=str(error))
            return None

    async def _events(self, namespace: str, field_selector: str) -> list[Obj]:
        """The Events a field selector picks in a namespace (a prefetch Job's FailedCreate ones),
        or none: a slow or refused read leaves the status as it was and must not hold up the
        reconcile."""
        try:
            page = await self.host.client.list_page(
                EVENTS, namespace, field_selector=field_selector, request_timeout=_LOG_TIMEOUT
            )
        except (ApiError, TransportError) as error:
            log.debug("prefetch job events unavailable", namespace=namespace, error=str(error))
            return []
        return list(page.get("items") or [])

    async def _pvc_phase(self, model: Model) -> str | None:
        if classify_source(model.spec.source) is not SourceKind.PVC:
            return None
        source = parse_pvc_source(model.spec.source)
        if source is None:
            return None
        try:
            claim = await self.host.client.get(
                PERSISTENT_VOLUME_CLAIMS, source.claim, model.metadata.namespace
            )
        except NotFound:
            return None
        phase = (claim.get("status") or {}).get("phase")
        return phase if isinstance(phase, str) else "Pending"
