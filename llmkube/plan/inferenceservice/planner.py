"""Plan an InferenceService: (service, Model, observed facts, operator config) -> desired objects,
deletions, status, events and requeue, decided in the reference operator's order: the Model gate,
the cache claim, the metal path, warnings, the Deployment, the Service, the HPA, then the status.

The controller applies every non-None intent with server-side apply, deletes exactly the objects in
`deletes` (with their uid as a precondition), writes `status` when `status_changed` says so, emits
`events`, and requeues after `requeue_after` seconds when it is set. An intent of None means "do not
apply": the object is either not wanted (and listed in `deletes` if we own one) or left untouched.
"""

from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from llmkube.api.base import KubeObject
from llmkube.api.enums import Phase
from llmkube.api.inferenceservice import InferenceService, InferenceServiceStatus
from llmkube.api.meta import Condition
from llmkube.api.model import Model
from llmkube.plan.conditions.standard import find_condition, remove_condition, set_condition
from llmkube.plan.events import IGNORED_SETTING, INVALID_SPEC, PlannedEvent, announced
from llmkube.plan.inferenceservice.advice import missing_memory_request, missing_skip_model_init
from llmkube.plan.inferenceservice.agent_verdict import (
    ACCEPTED,
    accepted_conditions,
    refused_conditions,
)
from llmkube.plan.inferenceservice.cache_pvc import cache_pvc_intent
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.current_model import describes_current_spec, stale_status_message
from llmkube.plan.inferenceservice.deployment import (
    WorkloadInputs,
    container_port,
    deployment_intent,
    recreates,
)
from llmkube.plan.inferenceservice.download import (
    DOWNLOAD_REQUEUE_SECONDS,
    download_progress,
    downloading_pod,
)
from llmkube.plan.inferenceservice.drain import (
    Strategy,
    drain_conditions,
    drain_hook,
    drain_policy,
    holds_service,
)
from llmkube.plan.inferenceservice.gpu import (
    effective_gpu_count,
    gpu_resource_claims,
    gpu_resource_name,
    gpu_toleration_key,
    is_metal,
)
from llmkube.plan.inferenceservice.hpa import hpa_intent, initial_replicas
from llmkube.plan.inferenceservice.images import default_image
from llmkube.plan.inferenceservice.lifetime import RECYCLED, recycling
from llmkube.plan.inferenceservice.memory_fit import (
    INSUFFICIENT_MEMORY,
    MEMORY_FIT,
    enforced,
    judge_memory_fit,
    memory_fit_conditions,
    node_gpu_memory,
)
from llmkube.plan.inferenceservice.metal import metal_readiness
from llmkube.plan.inferenceservice.names import selector_labels, service_name
from llmkube.plan.inferenceservice.object_checks import object_issues
from llmkube.plan.inferenceservice.objects import ObjectRef, controlled_by, object_ref
from llmkube.plan.inferenceservice.observed import ObservedState
from llmkube.plan.inferenceservice.pod_failures import FAILED_CREATE, diagnose_pod_failure, replica_failure
from llmkube.plan.inferenceservice.policy import (
    extra_volume_issues,
    host_path_issues,
    placement_issues,
    pod_security_issues,
    priority_issues,
    service_type_issues,
)
from llmkube.plan.inferenceservice.preemption import preempted_conditions, serving_again
from llmkube.plan.inferenceservice.priority import effective_priority, priority_class_name
from llmkube.plan.inferenceservice.queue import QueueEntry, queue_position
from llmkube.plan.inferenceservice.queue_writes import held_position
from llmkube.plan.inferenceservice.rollout import rollout_of
from llmkube.plan.inferenceservice.runtimes import (
    RuntimeDefaults,
    resolve_runtime,
    runtime_defaults,
    server_process,
)
from llmkube.plan.inferenceservice.runtimes.vllm import speculative_missing_model
from llmkube.plan.inferenceservice.scale_to_zero import (
    CONDITION as SCALE_TO_ZERO_CONDITION,
)
from llmkube.plan.inferenceservice.scale_to_zero import (
    SCALE_TO_ZERO_ANNOTATION,
    SCALED_TO_ZERO,
    SLEEPING_ANNOTATION,
    Sleep,
    decide,
    idle_setting,
    last_request,
    stamp,
)
from llmkube.plan.inferenceservice.scheduling import SchedulingInfo, diagnose_scheduling, running_pod_count
from llmkube.plan.inferenceservice.server_key import ANNOTATION as SERVER_KEY_ANNOTATION
from llmkube.plan.inferenceservice.server_key import annotation_value
from llmkube.plan.inferenceservice.server_key import secret_intent as server_key_secret
from llmkube.plan.inferenceservice.service import endpoint_url, service_intent
from llmkube.plan.inferenceservice.service_cache import (
    CacheProblem,
    ServiceCache,
    plan_service_cache,
    service_cache_intent,
)
from llmkube.plan.inferenceservice.serving_mode import resolve_mode
from llmkube.plan.inferenceservice.speculative import NO_DRAFT, DraftWeights, plan_draft
from llmkube.plan.inferenceservice.status import (
    DEGRADED,
    FAILED_REASON,
    GPU_AVAILABLE,
    IGNORED_SETTINGS_REASON,
    INVALID_SPEC_REASON,
    MODEL_NOT_FOUND_REASON,
    SPEC_VALID,
    WAITING_FOR_MODEL,
    WAITING_FOR_MODEL_REASON,
    StatusFacts,
    build_status,
    determine_phase,
    spec_conditions,
    status_changed,
)
from llmkube.plan.inferenceservice.storage import NO_STORAGE, ModelStorage, StorageProblem, plan_storage
from llmkube.plan.inferenceservice.validation import Issue, ValidationInputs, validate
from llmkube.plan.model.hub_resolution import with_resolved_files
from llmkube.plan.quota.decision import BELOW_QUOTA_PRIORITY, QUOTA_EXCEEDED
from llmkube.plan.tenancy import POLICY_VIOLATION, PolicyIssue

#: where a pod's server listens unless spec.bindAddress says (every IPv4 interface, as before v0.9)
DEFAULT_BIND_ADDRESS = "0.0.0.0"
# After deleting a Deployment whose selector changed (the `{app}` selector of the reference operator
# before 0.8), the new one can only be created once the old one is gone.
SELECTOR_MIGRATION_REQUEUE_SECONDS = 2.0


@dataclass(frozen=True)
class InferenceServicePlan:
    status: InferenceServiceStatus
    deployment: KubeObject | None = None
    # Fields the Deployment gets only when it is created (its first replica count under an HPA).
    deployment_initial: KubeObject | None = None
    service: KubeObject | None = None
    hpa: KubeObject | None = None
    cache_pvc: KubeObject | None = None  # not owned: shared by the namespace, never deleted
    # The service's own cache claim (per-service storage): only to create it, never to change it.
    service_cache: KubeObject | None = None
    # A metal service's server key (server_key.py): created before the Service that records it.
    server_key: KubeObject | None = None
    deletes: tuple[ObjectRef, ...] = ()
    events: tuple[PlannedEvent, ...] = ()
    requeue_after: float | None = None
    #: pods to evict (by name, in the service's namespace): v0.9 maxPodLifetimeSeconds (lifetime.py)
    evictions: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Context:
    isvc: InferenceService
    observed: ObservedState
    config: OperatorConfig
    name: str
    namespace: str
    generation: int | None
    priority_class: str
    priority: int | None
    running: int


def plan_inference_service(
    isvc: InferenceService, model: Model | None, observed: ObservedState, config: OperatorConfig
) -> InferenceServicePlan:
    class_name = priority_class_name(isvc.spec)
    ctx = _Context(
        isvc=isvc,
        observed=observed,
        config=config,
        name=isvc.metadata.name or "",
        namespace=isvc.metadata.namespace or "",
        generation=isvc.metadata.generation,
        priority_class=class_name,
        priority=effective_priority(class_name, observed.priority_classes),
        running=running_pod_count(observed.pods),
    )
    # The Model gate: nothing is applied or deleted until the Model is Ready.
    if model is None:
        missing = f'Model "{isvc.spec.model_ref}" not found in namespace "{ctx.namespace}"'
        return _model_gate(ctx, "Failed", MODEL_NOT_FOUND_REASON, missing)
    if model.status is None or model.status.phase != "Ready":
        return _withdraw_forbidden(
            ctx, _model_gate(ctx, "Pending", WAITING_FOR_MODEL_REASON, WAITING_FOR_MODEL)
        )
    if not describes_current_spec(model):
        # A status of the Model's previous spec says nothing about what the new one names (a path, a
        # claim): nothing is planned from it until the Model controller has judged the new spec.
        gate = _model_gate(ctx, "Pending", WAITING_FOR_MODEL_REASON, stale_status_message(model))
        return _withdraw_forbidden(ctx, gate)
    # A repository named with a quantization: the files the Model controller chose for it.
    plan = _withdraw_forbidden(ctx, _plan_with_model(ctx, with_resolved_files(model)))
    # Announce what changed, not what the stored status already says (plan/events.py).
    return replace(plan, events=announced(plan.events, _previous_conditions(ctx), plan.status.conditions))


def _withdraw_forbidden(ctx: _Context, plan: InferenceServicePlan) -> InferenceServicePlan:
    """A Deployment of ours that keeps creating pods the admin does not allow (a host path outside
    what is allowed, a pod above --max-pod-security: made by an earlier version, or allowed before
    the admin changed the rules) is deleted when the plan does not replace it. A namespace's own
    Pod Security level is the API server's to enforce: it refuses the pods, the status says why."""
    live = ctx.observed.deployment
    if plan.deployment is not None or live is None or not _owned(ctx, live):
        return plan
    ref = object_ref(live)
    if ref in plan.deletes:
        return plan
    template = (live.get("spec") or {}).get("template") or {}
    policy = ctx.config.tenancy
    issues = [
        *host_path_issues(template, ctx.namespace, policy, ctx.observed.namespace),
        # Against the cluster's maximum only (the namespace's level is left to the API server).
        *pod_security_issues(
            live, ctx.isvc.spec, ctx.namespace, policy, replace(ctx.observed.namespace, enforce=None)
        ),
    ]
    if not issues:
        return plan
    message = (
        f"Deployment {ctx.namespace}/{ctx.name} deleted: its pods are not allowed any more: "
        + "; ".join(issue.text() for issue in issues)
    )
    event = PlannedEvent("Warning", POLICY_VIOLATION, message)
    return replace(plan, deletes=(*plan.deletes, ref), events=(*plan.events, event))


def _model_gate(ctx: _Context, phase: Phase, reason: str, message: str) -> InferenceServicePlan:
    """Without a Ready Model nothing is applied or deleted. Replicas that already run keep serving:
    then the status says so (phase, replicas, endpoint) and names what the Model lacks, rather
    than reporting 0 ready replicas of a service that answers requests."""
    deployment = ctx.observed.deployment
    ready = _int_at(deployment, "status", "readyReplicas") if _owned(ctx, deployment) else 0
    if ready > 0:
        desired = _int_at(deployment, "spec", "replicas", default=ready)
        serving = "the running replicas keep serving, but no new one can start"
        facts = StatusFacts(
            phase=determine_phase(ready, desired, None),
            ready=ready,
            desired=desired,
            running=ctx.running,
            endpoint=endpoint_url(ctx.isvc),
            model_ready=False,
            effective_priority=ctx.priority,
            model_problem=(reason, f"{message}: {serving}"),
        )
    else:
        facts = StatusFacts(
            phase=phase,
            ready=0,
            desired=0,
            running=ctx.running,
            endpoint="",
            model_ready=False,
            effective_priority=ctx.priority,
            failure_reason=reason,
            failure_message=message,
        )
    return InferenceServicePlan(status=_status(ctx, _previous_conditions(ctx), facts))


def _plan_with_model(ctx: _Context, model: Model) -> InferenceServicePlan:
    spec = ctx.isvc.spec
    runtime = runtime_defaults(resolve_runtime(spec))
    gpu_count = effective_gpu_count(spec, model)
    metal = is_metal(model)
    storage = (
        NO_STORAGE
        if metal
        else plan_storage(
            namespace=ctx.namespace,
            spec=spec,
            model=model,
            config=ctx.config,
            needs_model_init=runtime.needs_model_init,
            service=ctx.name,
        )
    )
    issues = _policy_issues(ctx)
    issues += validate(
        ValidationInputs(
            isvc=ctx.isvc,
            runtime=runtime,
            gpu_count=gpu_count,
            metal=metal,
            priority_class_name=ctx.priority_class,
            priority_class_exists=ctx.priority is not None,
            uses_cache_pvc=isinstance(storage, ModelStorage) and storage.uses_cache_pvc,
            config=ctx.config,
            runtime_classes=ctx.observed.runtime_classes,
        )
    )
    if isinstance(storage, StorageProblem):
        issues.append(Issue(storage.field, storage.message, "error"))
    draft: DraftWeights | StorageProblem = NO_DRAFT
    if isinstance(storage, ModelStorage) and not metal:
        draft = plan_draft(
            spec=spec,
            runtime=runtime.name,
            model=model,
            storage=storage,
            draft_model=ctx.observed.draft_model,
            namespace=ctx.namespace,
            config=ctx.config,
            service=ctx.name,
        )
        if isinstance(draft, StorageProblem):
            issues.append(Issue(draft.field, draft.message, "error"))
        else:
            storage = replace(
                storage,
                init_containers=(*storage.init_containers, *draft.init_containers),
                volumes=(*storage.volumes, *draft.volumes),
            )
    cache: ServiceCache | None = None
    if isinstance(storage, ModelStorage) and storage.uses_service_cache:
        planned = plan_service_cache(ctx.isvc, model, ctx.config, ctx.observed.service_cache_claim)
        if isinstance(planned, CacheProblem):
            issues.append(Issue(planned.field, planned.message, "error"))
        else:
            cache = planned
            issues += [Issue(w.field, w.message, "warning", w.reason) for w in planned.warnings]
    issues += _ownership_conflicts(ctx, metal=metal, service_cache=cache is not None)
    idle = idle_setting(ctx.isvc.metadata.annotations)
    if idle.problem is not None:
        issues.append(Issue(f"metadata.annotations[{SCALE_TO_ZERO_ANNOTATION}]", idle.problem, "warning"))
    errors = [i.text() for i in issues if i.severity == "error"]
    # A spec asking for more than the admin allows is a policy violation first, whatever else is wrong.
    error_reason = next(
        (i.reason for i in issues if i.severity == "error" and i.reason == POLICY_VIOLATION),
        INVALID_SPEC_REASON,
    )
    ignored = [i.text() for i in issues if i.severity == "warning"]
    advice = [
        event
        for event in (
            missing_memory_request(spec),
            missing_skip_model_init(spec, model, runtime.needs_model_init and not metal),
        )
        if event is not None
    ]
    events = [
        *advice,
        *(
            PlannedEvent("Warning", i.reason or INVALID_SPEC, i.text(), DEGRADED)
            if i.severity == "error"
            else PlannedEvent("Warning", i.reason or IGNORED_SETTING, i.text(), SPEC_VALID)
            for i in issues
        ),
    ]
    conditions = spec_conditions(
        _previous_conditions(ctx),
        runtime=runtime.name,
        spec=spec,
        speculative_missing_model=speculative_missing_model(spec),
        warnings=[*ignored, *(event.message for event in advice)],
        warning_reason=IGNORED_SETTINGS_REASON if ignored or not advice else advice[0].reason,
        generation=ctx.generation,
        now=ctx.observed.now,
    )
    fit = None
    if not metal:
        conditions = remove_condition(conditions, ACCEPTED)  # the host agents' verdict: metal only
        fit = judge_memory_fit(
            model,
            spec,
            runtime=runtime.name,
            gpu_count=gpu_count,
            node_gpu_memory=node_gpu_memory(ctx.observed.nodes, gpu_resource_name(model, ctx.config)),
        )
    conditions = memory_fit_conditions(conditions, fit, generation=ctx.generation, now=ctx.observed.now)
    if fit is not None and fit.blocks:
        events.append(PlannedEvent("Warning", INSUFFICIENT_MEMORY, fit.message, MEMORY_FIT))
    if errors or not isinstance(storage, ModelStorage):
        return _invalid(ctx, conditions, errors, events, reason=error_reason, metal=metal)
    if fit is not None and fit.blocks and enforced(ctx.isvc.metadata.annotations):
        # The user asked not to start what cannot fit: Failed, and nothing applied or deleted.
        message = f"{fit.message} (not started: the memory-fit annotation says enforce)"
        return _invalid(ctx, conditions, [message], events, reason=INSUFFICIENT_MEMORY, metal=metal)
    if metal:
        return _metal_plan(ctx, conditions, events)
    draft_path = draft.path if isinstance(draft, DraftWeights) else ""
    plan = _workload_plan(ctx, model, runtime, storage, gpu_count, conditions, events, draft_path)
    if cache is not None and cache.create:
        plan = replace(plan, service_cache=service_cache_intent(ctx.isvc, cache, ctx.config))
    # What the API server would refuse in the objects themselves, named by the service's fields.
    refused = object_issues(ctx.isvc.spec, plan.deployment)
    if refused:
        events += [PlannedEvent("Warning", INVALID_SPEC, issue.text(), DEGRADED) for issue in refused]
        return _invalid(ctx, conditions, [issue.text() for issue in refused], events)
    # The last step, whatever route built the pod: what the admin allows its pods to be.
    forbidden = _pod_policy_issues(ctx, plan.deployment)
    if forbidden:
        events += [PlannedEvent("Warning", POLICY_VIOLATION, issue.text(), DEGRADED) for issue in forbidden]
        return _invalid(
            ctx, conditions, [issue.text() for issue in forbidden], events, reason=POLICY_VIOLATION
        )
    return plan


def _policy_issues(ctx: _Context) -> list[Issue]:
    """What the spec itself asks for beyond what the admin allows (the pod is checked once built)."""
    spec, policy = ctx.isvc.spec, ctx.config.tenancy
    found: list[PolicyIssue] = [
        *priority_issues(
            spec, ctx.priority_class, ctx.priority, ctx.namespace, policy, ctx.observed.namespace
        ),
        *service_type_issues(spec, policy),
        *extra_volume_issues(spec, policy),
        *placement_issues(spec, policy),
    ]
    return [Issue(issue.field, issue.message, "error", POLICY_VIOLATION) for issue in found]


def _pod_policy_issues(ctx: _Context, deployment: KubeObject | None) -> list[PolicyIssue]:
    if deployment is None:
        return []
    template = (deployment.get("spec") or {}).get("template") or {}
    policy, ns = ctx.config.tenancy, ctx.observed.namespace
    return [
        *host_path_issues(template, ctx.namespace, policy, ns),
        *pod_security_issues(deployment, ctx.isvc.spec, ctx.namespace, policy, ns),
    ]


def _invalid(
    ctx: _Context,
    conditions: list[Condition],
    errors: list[str],
    events: list[PlannedEvent],
    *,
    reason: str = INVALID_SPEC_REASON,
    metal: bool = False,
) -> InferenceServicePlan:
    """Failed, naming every problem; the running workload (if any) is left untouched (a metal
    service's host agents read the refusal from the Accepted condition, agent_verdict.py)."""
    if metal:
        conditions = refused_conditions(
            conditions,
            reason=reason,
            message="; ".join(errors),
            generation=ctx.generation,
            now=ctx.observed.now,
        )
    deployment = ctx.observed.deployment
    ready = _int_at(deployment, "status", "readyReplicas") if _owned(ctx, deployment) else 0
    facts = StatusFacts(
        phase="Failed",
        ready=ready,
        desired=_spec_replicas(ctx),
        running=ctx.running,
        endpoint="",
        model_ready=True,
        effective_priority=ctx.priority,
        failure_reason=reason,
        failure_message="; ".join(errors),
    )
    return InferenceServicePlan(status=_status(ctx, conditions, facts), events=tuple(events))


def _metal_plan(
    ctx: _Context, conditions: list[Condition], events: list[PlannedEvent]
) -> InferenceServicePlan:
    """A host agent serves the model (metal.py): no Deployment or HPA of ours may exist; the Service
    is ours, without a selector, and the agents' EndpointSlices are its endpoints. What they
    report on those slices is the status. The spec is accepted: its agents may serve it."""
    conditions = accepted_conditions(conditions, generation=ctx.generation, now=ctx.observed.now)
    readiness = metal_readiness(
        ctx.observed.endpoint_slices,
        ctx.namespace,
        service_name(ctx.name),
        ctx.observed.now,
        timedelta(seconds=ctx.config.metal_heartbeat_timeout_seconds),
    )
    desired = _spec_replicas(ctx)
    failure = readiness.failure if desired > 0 else None
    phase: Phase = "Failed" if failure is not None else determine_phase(readiness.ready, desired, None)
    scheduling = readiness.info
    if scheduling is None and (progress := readiness.progress) is not None:
        scheduling = SchedulingInfo(progress.reason, progress.text())
    facts = StatusFacts(
        phase=phase,
        ready=readiness.ready,
        desired=desired,
        running=readiness.registered,
        endpoint=endpoint_url(ctx.isvc) if failure is None else "",
        model_ready=True,
        effective_priority=ctx.priority,
        scheduling=scheduling if phase == "Creating" else None,
        failure_reason=failure.reason if failure is not None else FAILED_REASON,
        failure_message=failure.text() if failure is not None else "",
    )
    owned = (ctx.observed.deployment, ctx.observed.hpa)
    service = service_intent(ctx.isvc, selector=False)
    master = ctx.observed.server_key_master
    if master is not None:
        service["metadata"]["annotations"] = {SERVER_KEY_ANNOTATION: annotation_value(ctx.isvc, master)}
    return InferenceServicePlan(
        status=_status(ctx, conditions, facts),
        service=service,
        server_key=server_key_secret(ctx.isvc, master) if master is not None else None,
        deletes=tuple(object_ref(obj) for obj in owned if obj is not None and _owned(ctx, obj)),
        events=tuple(events),
        requeue_after=readiness.expires_in,
    )


def _workload_plan(
    ctx: _Context,
    model: Model,
    runtime: RuntimeDefaults,
    storage: ModelStorage,
    gpu_count: int,
    conditions: list[Condition],
    events: list[PlannedEvent],
    draft_model_path: str = "",
) -> InferenceServicePlan:
    isvc, observed = ctx.isvc, ctx.observed
    spec = isvc.spec
    grant = observed.quota
    if grant is not None and grant.refused:
        # Below a covering GPUQuota's minPriority: refused, and what runs is left as it is (the
        # quota counts it), as for any refused spec.
        events.append(PlannedEvent("Warning", BELOW_QUOTA_PRIORITY, grant.message, DEGRADED))
        return _invalid(ctx, conditions, [grant.message], events, reason=BELOW_QUOTA_PRIORITY)
    # spec.suspend (v0.9): scaled to 0 and no HPA, spec.replicas kept for when it resumes.
    suspended = bool(spec.suspend)
    autoscaling = None if suspended else spec.autoscaling
    replicas = 0 if suspended else _spec_replicas(ctx)
    sleep = _sleep(ctx, replicas)
    if sleep.asleep:  # scaled to zero by idleness: no HPA to fight the router that wakes it
        autoscaling, replicas = None, 0
    # The GPU quotas (plan/quota/decision.py) admit replicas one by one: the Deployment gets those
    # admitted, an HPA a maxReplicas no higher (so it never scales past them), and none before one is.
    admitted = replicas if grant is None else min(replicas, grant.replicas)
    if autoscaling is not None and grant is not None and replicas > 0:
        if grant.replicas <= 0:
            autoscaling = None
        elif grant.replicas < autoscaling.max_replicas:
            autoscaling = autoscaling.model_copy(
                update={
                    "max_replicas": grant.replicas,
                    "min_replicas": min(autoscaling.min_replicas or 1, grant.replicas),
                }
            )
    # replicas: 0 stops the service even with autoscaling (an HPA leaves a zero-replica target alone).
    hpa_owns_replicas = autoscaling is not None and replicas > 0
    quota_wait = grant is not None and grant.waiting and replicas > 0
    port = container_port(spec, runtime)
    process = server_process(
        runtime.name,
        spec,
        model,
        model_path=storage.model_path,
        port=port,
        gpu_count=gpu_count,
        mmproj_path=storage.mmproj_path,
        host=spec.bind_address or DEFAULT_BIND_ADDRESS,
        draft_model_path=draft_model_path,
    )
    strategy: Strategy = "Recreate" if recreates(gpu_count) else "RollingUpdate"
    drain = drain_hook(
        drain_policy(isvc.metadata.annotations, spec.rollout_policy),
        strategy,
        port,
        runtime.in_flight_metrics,
    )
    gpu_resource = gpu_resource_name(model, ctx.config)
    deployment = deployment_intent(
        WorkloadInputs(
            isvc=isvc,
            runtime=runtime,
            process=process,
            storage=storage,
            port=port,
            gpu_count=gpu_count,
            gpu_resource=gpu_resource,
            image=spec.image or default_image(runtime.name, model, gpu_count, ctx.config.runtime_images),
            priority_class_name=ctx.priority_class,
            replicas=None if hpa_owns_replicas else admitted,
            config=ctx.config,
            drain=drain,
            toleration_key=gpu_toleration_key(model, gpu_resource),
            resource_claims=tuple(gpu_resource_claims(model)),
        )
    )
    live = observed.deployment
    if sleep.asleep and sleep.slept_at is not None:
        deployment["metadata"]["annotations"] = {SLEEPING_ANNOTATION: stamp(sleep.slept_at)}
    deletes: list[ObjectRef] = []
    # The selector is immutable: a Deployment from before 0.8 (selector {app}) is replaced, which the
    # reference operator learnt from a hot loop: https://github.com/defilantech/LLMKube/issues/606.
    migrate = live is not None and _selector(live) != selector_labels(ctx.name)
    if live is not None and migrate:
        deletes.append(object_ref(live))
    # Without autoscaling, suspended, or no replica admitted by the quota yet (then none was before).
    if autoscaling is None and observed.hpa is not None and _owned(ctx, observed.hpa):
        deletes.append(object_ref(observed.hpa))
    current = None if migrate else live
    ready = _int_at(current, "status", "readyReplicas")
    initial: KubeObject | None = None
    if hpa_owns_replicas and autoscaling is not None:
        first = initial_replicas(replicas, autoscaling)
        initial = {"spec": {"replicas": first}}
        # The HPA's choice, as carried by the Deployment, is what "all ready" means (so a scale-out
        # is Ready once its replicas are, not Progressing for ever).
        desired = _int_at(current, "spec", "replicas", default=first)
        if desired == 0 and sleep.condition is not None:
            # Woken from zero without a router's scale write (its request seen first): an HPA never
            # scales a target at 0, so the first replica is ours to ask for.
            desired = first
            deployment["spec"]["replicas"] = first
    elif quota_wait and spec.autoscaling is not None:
        desired = initial_replicas(replicas, spec.autoscaling)  # none admitted yet: what it starts with
    else:
        desired = replicas
    scheduling = failure = None
    quota_info = (
        SchedulingInfo(QUOTA_EXCEEDED, grant.message, f"{gpu_resource}: {gpu_count}")
        if quota_wait and grant is not None
        else None
    )
    if quota_info is not None and (admitted == 0 or (ready > 0 and not hpa_owns_replicas)):
        # No pod for the next replica exists to diagnose: the quota is why it waits (under an HPA,
        # only while none is admitted: within its capped maxReplicas the HPA decides).
        scheduling = quota_info
        events.append(PlannedEvent("Normal", QUOTA_EXCEEDED, quota_info.message, GPU_AVAILABLE))
    elif ready == 0 and desired > 0:
        scheduling = diagnose_scheduling(
            observed.pods,
            ctx.config.known_gpu_resources(),
            gpu_count,
            gpu_resource=gpu_resource_name(model, ctx.config),
            largest=observed.gpu_nodes,
        )
        # Scheduled pods that cannot run (image, crash, download): the kubelet backs off, so do we.
        failure = diagnose_pod_failure(observed.pods) if scheduling is None else None
        if failure is None and scheduling is None:
            # No pod to diagnose: an admission plugin may refuse to create them at all.
            failure = replica_failure(current)
            if failure is not None:
                events.append(PlannedEvent("Warning", FAILED_CREATE, failure.message, DEGRADED))
    phase: Phase = "Failed" if failure else determine_phase(ready, desired, scheduling)
    if suspended and not failure:
        phase = "Suspended"
    if sleep.asleep and not failure:
        phase = "Stopped"
    downloading = downloading_pod(observed.pods) if phase == "Creating" else None
    download = download_progress(downloading, observed.download_log) if downloading else None
    entry = QueueEntry(ctx.namespace, ctx.name, ctx.priority or 0, isvc.metadata.creation_timestamp)
    waiting = phase == "WaitingForGPU"
    position = queue_position(observed.gpu_queue, entry, waiting_now=waiting)
    shown, hold = held_position(isvc.status, position, waiting=waiting, now=observed.now)
    facts = StatusFacts(
        phase=phase,
        ready=ready,
        desired=desired,
        running=ctx.running,
        endpoint=endpoint_url(isvc),
        model_ready=True,
        effective_priority=ctx.priority,
        scheduling=(
            scheduling
            if phase in ("Creating", "WaitingForGPU") or (scheduling is quota_info and phase == "Progressing")
            else None
        ),
        queue_position=shown,
        failure_reason=failure.reason if failure else FAILED_REASON,
        failure_message=failure.message if failure else "",
        rollout=rollout_of(current),
        download=download.message() if download is not None else "",
        mode=resolve_mode(spec),
        stopped=(SCALED_TO_ZERO, sleep.message) if sleep.asleep else None,
    )
    conditions = _sleep_conditions(ctx, conditions, sleep)
    if sleep.event is not None:
        events.append(sleep.event)
    conditions = preempted_conditions(
        conditions,
        observed.preemption,
        phase=phase,
        recovered=serving_again(observed.pods, desired),
        generation=ctx.generation,
        now=observed.now,
    )
    drained = drain_conditions(
        conditions, drain, strategy, observed.pods, generation=ctx.generation, now=observed.now
    )
    conditions = drained.conditions
    events += drained.events
    recycle = recycling(
        observed.pods, spec.max_pod_lifetime_seconds, ready=ready, desired=desired, now=observed.now
    )
    if recycle.evict:
        events.append(PlannedEvent("Normal", RECYCLED, recycle.message))
    status = _status(ctx, conditions, facts)
    if hold is not None and status_changed(isvc.status, status):  # written anyway: with the newest
        status, hold = _status(ctx, conditions, replace(facts, queue_position=position)), None
    return InferenceServicePlan(
        status=status,
        deployment=deployment,
        deployment_initial=initial,
        service=service_intent(isvc, hold=holds_service(drain, strategy, observed.pods)),
        hpa=hpa_intent(isvc, autoscaling, runtime.hpa_metric) if autoscaling is not None else None,
        cache_pvc=cache_pvc_intent(ctx.namespace, ctx.config) if storage.uses_cache_pvc else None,
        deletes=tuple(deletes),
        events=tuple(events),
        requeue_after=(
            SELECTOR_MIGRATION_REQUEUE_SECONDS
            if migrate
            else DOWNLOAD_REQUEUE_SECONDS
            if download is not None
            else _sooner(hold, drained.requeue_after, recycle.requeue_after, sleep.requeue_after)
        ),
        evictions=(recycle.evict,) if recycle.evict else (),
    )


def _sleep(ctx: _Context, replicas: int) -> Sleep:
    """Scale to zero's decision (scale_to_zero.py): only for a service that asks for replicas."""
    annotations = ctx.isvc.metadata.annotations
    setting = idle_setting(annotations)
    live = ctx.observed.deployment if _owned(ctx, ctx.observed.deployment) else None
    marked = SLEEPING_ANNOTATION in ((live or {}).get("metadata", {}).get("annotations") or {})
    return decide(
        setting.after if replicas > 0 else None,
        find_condition(_previous_conditions(ctx), SCALE_TO_ZERO_CONDITION),
        request=last_request(annotations),
        marked=marked,
        deployment_replicas=_int_at(live, "spec", "replicas"),
        ready=_int_at(live, "status", "readyReplicas"),
        now=ctx.observed.now,
    )


def _sleep_conditions(ctx: _Context, conditions: list[Condition], sleep: Sleep) -> list[Condition]:
    if sleep.condition is None:
        return remove_condition(conditions, SCALE_TO_ZERO_CONDITION)
    status, reason, message = sleep.condition
    return set_condition(
        conditions,
        type_=SCALE_TO_ZERO_CONDITION,
        status=status,
        reason=reason,
        message=message,
        now=ctx.observed.now,
        observed_generation=ctx.generation,
    )


def _ownership_conflicts(ctx: _Context, *, metal: bool, service_cache: bool = False) -> list[Issue]:
    """An object with our name that another owner controls is never taken over. A metal
    service has only its Service."""
    hpa = ctx.observed.hpa if ctx.isvc.spec.autoscaling is not None else None
    wanted = [("Service", ctx.observed.service)]
    if not metal:
        wanted = [("Deployment", ctx.observed.deployment), *wanted, ("HorizontalPodAutoscaler", hpa)]
    if service_cache:
        wanted.append(("PersistentVolumeClaim", ctx.observed.service_cache_claim))
    return [
        Issue(
            f"{kind} {ctx.namespace}/{obj.get('metadata', {}).get('name', '')}",
            "exists and is not controlled by this InferenceService",
            "error",
        )
        for kind, obj in wanted
        if obj is not None and not _owned(ctx, obj)
    ]


def _owned(ctx: _Context, obj: KubeObject | None) -> bool:
    return obj is not None and controlled_by(obj, ctx.isvc)


def _selector(deployment: KubeObject) -> Any:
    return (deployment.get("spec", {}).get("selector") or {}).get("matchLabels")


def _int_at(obj: KubeObject | None, section: str, key: str, default: int = 0) -> int:
    value = (obj or {}).get(section, {}).get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _spec_replicas(ctx: _Context) -> int:
    replicas = ctx.isvc.spec.replicas
    return replicas if replicas is not None else 1


def _sooner(*delays: float | None) -> float | None:
    given = [delay for delay in delays if delay is not None]
    return min(given) if given else None


def _previous_conditions(ctx: _Context) -> list[Condition]:
    status = ctx.isvc.status
    return list(status.conditions or ()) if status else []


def _status(ctx: _Context, conditions: list[Condition], facts: StatusFacts) -> InferenceServiceStatus:
    return build_status(conditions, facts, generation=ctx.generation, now=ctx.observed.now)
