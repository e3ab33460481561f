"""The prefetch step of a downloaded source's plan (`spec.prefetch: true`): the Ready status held
back while the Model's prefetch Job (plan/model/prefetch.py) downloads, Downloading with the Job's
progress, then Ready once the files are in the namespace's cache, or Failed with the downloader's
last words. Jobs of another spec (or of `prefetch: false`, or of a metal Model) are deleted."""

from dataclasses import replace
from datetime import timedelta

from llmkube.api.model import ModelStatus
from llmkube.plan.conditions.standard import find_condition
from llmkube.plan.conditions.summary import READY
from llmkube.plan.model import conditions as cond
from llmkube.plan.model.cache_clear import refilled
from llmkube.plan.model.decision import (
    NO_REQUEUE,
    PREFETCH_PROGRESS_REQUEUE,
    PREFETCH_REFUSED_MAX_REQUEUE,
    PREFETCH_REFUSED_MIN_REQUEUE,
    ModelDecision,
    PrefetchPlan,
    Requeue,
)
from llmkube.plan.model.drift import DriftKind
from llmkube.plan.model.facts import PrefetchJob
from llmkube.plan.model.inputs import PlanInputs
from llmkube.plan.model.phases import PHASE_READY, failed
from llmkube.plan.model.prefetch import prefetch_digest, prefetch_job, prefetch_job_name, prefetch_result
from llmkube.plan.model.remote import RemoteSource
from llmkube.plan.model.size import format_size
from llmkube.plan.model.source import cache_key


def with_prefetch(
    inputs: PlanInputs, decision: ModelDecision, remote: RemoteSource, drift: DriftKind | None
) -> ModelDecision:
    """`decision`, the Ready status of a downloaded source, as the prefetch Job's state has it."""
    spec, config, jobs = inputs.model.spec, inputs.config, inputs.facts.prefetch_jobs
    status = decision.status
    if not (spec.prefetch and config.namespace_cache) or inputs.is_metal:
        if not jobs:
            return decision
        return replace(decision, prefetch=PrefetchPlan(deletes=tuple((job.name, job.uid) for job in jobs)))
    if drift is DriftKind.DRIFTED and spec.refresh_policy == "OnChange" and inputs.facts.probe is not None:
        # The upstream changed and the Model asks to follow it: the new fingerprint is what the
        # next Job fetches (a new Job: its name carries it); SourceDrifted stays True until it did.
        fingerprint = inputs.facts.probe.fingerprint
        if fingerprint is not None:
            status = status.model_copy(
                update={"source_e_tag": fingerprint.etag, "source_content_length": fingerprint.content_length}
            )
    cache_dir_key = status.cache_key or cache_key(inputs.source)
    digest = prefetch_digest(inputs.model, remote, status)
    name = prefetch_job_name(inputs.model.metadata.name or "", digest)
    stale = tuple((job.name, job.uid) for job in jobs if job.name != name)
    job = next((job for job in jobs if job.name == name), None)
    if job is None:
        intent = prefetch_job(inputs.model, remote, digest, cache_dir_key, config)
        progressing = _downloading(inputs, status, cond.PREFETCH_STARTED, cond.msg_prefetch_started(name))
        return ModelDecision(
            status=progressing,
            requeue=Requeue(after=PREFETCH_PROGRESS_REQUEUE),
            prefetch=PrefetchPlan(job=intent, deletes=stale),
        )
    plan = PrefetchPlan(deletes=stale)
    if job.phase == "Running" and job.pod_refusal:
        # Kubernetes says nothing of it in the Job's status: the API server's words, from the
        # Job's FailedCreate Event, are the only account of why nothing downloads.
        message = cond.msg_prefetch_pod_not_created(name, job.pod_refusal)
        waiting = _downloading(inputs, status, cond.PREFETCH_POD_NOT_CREATED, message)
        return ModelDecision(status=waiting, requeue=_refused_requeue(inputs), prefetch=plan)
    if job.phase == "Running":
        message = cond.msg_prefetch_running(name, job.received, job.total)
        progressing = _downloading(inputs, status, cond.PREFETCH_RUNNING, message)
        return ModelDecision(
            status=progressing, requeue=Requeue(after=PREFETCH_PROGRESS_REQUEUE), prefetch=plan
        )
    if job.phase == "Failed":
        message = cond.msg_prefetch_failed(name, job.message)
        return replace(failed(inputs, status, cond.PREFETCH_FAILED, message, NO_REQUEUE), prefetch=plan)
    return replace(decision, status=_prefetched(inputs, status, job), prefetch=plan)


def _refused_requeue(inputs: PlanInputs) -> Requeue:
    """Looked at again after as long as the Model has waited (a backoff without a counter: since
    its written Ready condition turned False), within bounds; never a spin."""
    ready = find_condition(inputs.old.conditions, READY)
    waited = timedelta(0)
    if ready is not None and ready.status == "False":
        waited = inputs.now - ready.last_transition_time
    return Requeue(after=min(max(waited, PREFETCH_REFUSED_MIN_REQUEUE), PREFETCH_REFUSED_MAX_REQUEUE))


def _downloading(inputs: PlanInputs, status: ModelStatus, reason: str, message: str) -> ModelStatus:
    return status.model_copy(
        update={
            "phase": "Downloading",
            "conditions": cond.mark_progressing(
                status.conditions,
                reason=reason,
                message=message,
                clear_degraded=True,
                now=inputs.now,
                generation=inputs.generation,
            ),
        }
    )


def _prefetched(inputs: PlanInputs, status: ModelStatus, job: PrefetchJob) -> ModelStatus:
    result = prefetch_result(job.message)
    conditions = cond.mark_ready(
        status.conditions,
        reason=cond.MODEL_PREFETCHED,
        message=cond.msg_model_prefetched(job.name, job.message),
        superseded_message=cond.MSG_SUPERSEDED_PREFETCHED,
        now=inputs.now,
        generation=inputs.generation,
    )
    drifted = find_condition(conditions, cond.SOURCE_DRIFTED)
    if drifted is not None and drifted.status == "True" and inputs.model.spec.refresh_policy == "OnChange":
        conditions = cond.mark_source_drifted(
            conditions, drifted=False, source=inputs.source, now=inputs.now, generation=inputs.generation
        )
    size = status.size or (format_size(result.bytes) if result is not None and result.bytes else None)
    status = status.model_copy(update={"phase": PHASE_READY, "conditions": conditions, "size": size})
    return refilled(status, inputs.now, job.name)
