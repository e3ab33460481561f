"""A Model's prefetch Jobs, as the Model controller sees and keeps them (plan/model/prefetch.py
plans them): what the cached Jobs say (the planner's PrefetchJob facts), and the plan carried
out (the namespace's model cache claim created when missing, the Job created, stale Jobs deleted
by uid).

Jobs are cached by their component label only (never every Job of the cluster). A Job is never
updated: a new spec gets a Job of a new name (its name carries a digest of what it fetches).
"""

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace

import structlog

from llmkube.api.constants import LABEL_COMPONENT
from llmkube.controllers.resources import JOBS, PERSISTENT_VOLUME_CLAIMS
from llmkube.kube.cache import Store
from llmkube.kube.errors import AlreadyExists, Conflict, NotFound
from llmkube.kube.rest import ApiClient
from llmkube.kube.types import Obj
from llmkube.plan.model.cache_clear import COMPONENT as CLEAR_COMPONENT
from llmkube.plan.model.decision import PrefetchPlan
from llmkube.plan.model.facts import PrefetchJob, PrefetchPhase
from llmkube.plan.model.prefetch import (
    CACHE_CLAIM,
    COMPONENT,
    FAILED_CREATE,
    LABEL_PREFETCH,
    awaits_its_pod,
    downloader_words,
    pod_refusal,
    progress_of,
    running_downloader,
)

log = structlog.get_logger("llmkube.controllers.model")

# Prefetch Jobs and cache-clear Jobs (plan/model/cache_clear.py), in one cache.
PREFETCH_SELECTOR = f"{LABEL_COMPONENT} in ({COMPONENT},{CLEAR_COMPONENT})"
CACHE_CLAIM_SELECTOR = f"metadata.name={CACHE_CLAIM}"
#: The Job's pods carry its digest label (the template's); the Job controller adds the Job's name.
PREFETCH_PODS_SELECTOR = LABEL_PREFETCH
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


def _condition(job: Obj, kind: str) -> Obj | None:
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind and condition.get("status") == "True":
            return dict(condition)
    return None


def prefetch_job_fact(job: Obj) -> PrefetchJob:
    """Succeeded once the Job is Complete, Failed once it Failed (with the Job controller's reason
    and message: BackoffLimitExceeded, or the podFailurePolicy rule a permanent failure matched),
    else Running."""
    metadata = job.get("metadata") or {}
    phase: PrefetchPhase = "Running"
    message = ""
    if _condition(job, "Complete") is not None:
        phase = "Succeeded"
    elif (failed := _condition(job, "Failed")) is not None:
        phase = "Failed"
        message = ": ".join(str(part) for part in (failed.get("reason"), failed.get("message")) if part)
    return PrefetchJob(
        name=str(metadata.get("name") or ""), uid=str(metadata.get("uid") or ""), phase=phase, message=message
    )


LogReader = Callable[[str, str], Awaitable[str | None]]  # (namespace, pod) -> the log's last lines
#: (namespace, field selector) -> the Events (events.k8s.io/v1) it selects
EventReader = Callable[[str, str], Awaitable[list[Obj]]]


def refusals_selector(job_uid: str) -> str:
    """The Job controller's FailedCreate Events about one Job (the server selects: by uid and reason)."""
    return f"regarding.uid={job_uid},reason={FAILED_CREATE}"


def _component(job: Obj) -> str:
    return str(((job.get("metadata") or {}).get("labels") or {}).get(LABEL_COMPONENT) or "")


def _owned_by(job: Obj, model_uid: str) -> bool:
    refs = (job.get("metadata") or {}).get("ownerReferences") or []
    return any(ref.get("uid") == model_uid and ref.get("controller") for ref in refs)


def clear_jobs_of(jobs: Iterable[Obj], model_uid: str) -> tuple[PrefetchJob, ...]:
    """The cached cache-clear Jobs the Model owns, as facts (their Job conditions)."""
    found = [
        prefetch_job_fact(job)
        for job in jobs
        if _component(job) == CLEAR_COMPONENT and _owned_by(job, model_uid)
    ]
    return tuple(sorted(found, key=lambda job: job.name))


async def prefetch_jobs_of(
    jobs: Iterable[Obj],
    pods: Iterable[Obj],
    model_uid: str,
    read_log: LogReader,
    read_events: EventReader | None = None,
) -> tuple[PrefetchJob, ...]:
    """The cached prefetch Jobs the Model owns (its uid as their controller), by name, with what
    their pods say: a finished downloader's last words (its termination message, from the pod
    cache: the server's own refusal, a checksum mismatch, `done: ...`), while one runs, the
    bytes its last progress line counted (one short log read), and while a running Job has no
    pod, why not: the API server's refusal from the Job's FailedCreate Events (one list)."""
    pods = list(pods)
    found = []
    for job in jobs:
        metadata = job.get("metadata") or {}
        if _component(job) == CLEAR_COMPONENT or not _owned_by(job, model_uid):
            continue  # a cache clear's Job (clear_jobs_of), or another Model's
        fact = prefetch_job_fact(job)
        own = [
            p
            for p in pods
            if ((p.get("metadata") or {}).get("labels") or {}).get(JOB_NAME_LABEL) == fact.name
        ]
        if fact.phase != "Running":
            words = downloader_words(own)
            found.append(replace(fact, message=words or fact.message))
            continue
        running = running_downloader(own)
        if running is None:
            if read_events is not None and awaits_its_pod(job, own):
                namespace = str(metadata.get("namespace") or "")
                events = await read_events(namespace, refusals_selector(fact.uid))
                fact = replace(fact, pod_refusal=pod_refusal(job, own, events))
            found.append(fact)
            continue
        received, total = progress_of(await read_log(str(metadata.get("namespace") or ""), running))
        found.append(replace(fact, received=received, total=total))
    return tuple(sorted(found, key=lambda job: job.name))


async def carry_out(
    client: ApiClient,
    plan: PrefetchPlan,
    namespace: str,
    *,
    claims: Store,
    claim_intent: Callable[[str], Obj] | None,
    what: str = "prefetch",
) -> None:
    """Delete the stale Jobs (by uid: never a newer Job of the same name; their pods with them),
    then create the wanted one, after the cache claim it mounts."""
    propagation = "Foreground" if plan.foreground else "Background"
    for name, uid in plan.deletes:
        try:
            await client.delete(JOBS, name, namespace, uid=uid, propagation_policy=propagation)
            log.info(f"{what} job deleted", namespace=namespace, name=name)
        except (NotFound, Conflict):
            pass  # gone already, or another Job of that name now
    if plan.job is None:
        return
    if claim_intent is not None and claims.get_object(namespace, CACHE_CLAIM) is None:
        try:
            await client.create(PERSISTENT_VOLUME_CLAIMS, claim_intent(namespace), namespace)
            log.info("model cache PVC created", namespace=namespace, name=CACHE_CLAIM)
        except AlreadyExists:
            pass
    try:
        await client.create(JOBS, plan.job, namespace)
        log.info(f"{what} job created", namespace=namespace, name=plan.job["metadata"]["name"])
    except AlreadyExists:
        pass  # created by an earlier reconcile; the cache shows it soon
