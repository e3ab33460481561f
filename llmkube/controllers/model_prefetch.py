"""A Model's prefetch Jobs, as the Model controller sees and keeps them (plan/model/prefetch.py
plans them): what the cached Jobs say (the planner's PrefetchJob facts), and the plan carried
out (the namespace's model cache claim created when missing, the Job created, stale Jobs deleted
by uid).

Jobs are cached by their component label only (never every Job of the cluster). A Job is never
updated: a new spec gets a Job of a new name (its name carries a digest of what it fetches).
"""

from collections.abc import Callable, Iterable

import structlog

from llmkube.api.constants import LABEL_COMPONENT
from llmkube.controllers.resources import JOBS, PERSISTENT_VOLUME_CLAIMS
from llmkube.kube.cache.store import Store
from llmkube.kube.errors import AlreadyExists, Conflict, NotFound
from llmkube.kube.rest.client import ApiClient
from llmkube.kube.types import Obj
from llmkube.plan.model.decision import PrefetchPlan
from llmkube.plan.model.facts import PrefetchJob, PrefetchPhase
from llmkube.plan.model.prefetch import CACHE_CLAIM, COMPONENT

log = structlog.get_logger("llmkube.controllers.model")

PREFETCH_SELECTOR = f"{LABEL_COMPONENT}={COMPONENT}"
CACHE_CLAIM_SELECTOR = f"metadata.name={CACHE_CLAIM}"


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


def prefetch_jobs_of(jobs: Iterable[Obj], model_uid: str) -> tuple[PrefetchJob, ...]:
    """The cached prefetch Jobs the Model owns (its uid as their controller), by name."""
    owned = [
        job
        for job in jobs
        if any(
            ref.get("uid") == model_uid and ref.get("controller")
            for ref in (job.get("metadata") or {}).get("ownerReferences") or []
        )
    ]
    return tuple(sorted((prefetch_job_fact(job) for job in owned), key=lambda job: job.name))


async def carry_out(
    client: ApiClient,
    plan: PrefetchPlan,
    namespace: str,
    *,
    claims: Store,
    claim_intent: Callable[[str], Obj] | None,
) -> None:
    """Delete the stale Jobs (by uid: never a newer Job of the same name; their pods with them),
    then create the wanted one, after the cache claim it mounts."""
    for name, uid in plan.deletes:
        try:
            await client.delete(JOBS, name, namespace, uid=uid, propagation_policy="Background")
            log.info("prefetch job deleted", namespace=namespace, name=name)
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
        log.info("prefetch job created", namespace=namespace, name=plan.job["metadata"]["name"])
    except AlreadyExists:
        pass  # created by an earlier reconcile; the cache shows it soon
