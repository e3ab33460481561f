"""`llmkube cache clear MODEL`: the files of a Model removed from its namespace's model cache claim
by a Job, without exec'ing into any pod, and the Model's status saying so (pure).

The request is an annotation on the Model, `inference.llmkube.dev/clear-cache: <request id>` (the
command sets a new id each time; `kubectl annotate` works as well), with
`inference.llmkube.dev/clear-cache-force: "true"` to clear it while services use it. The
controller answers each id once, in `status.cacheClear`:

  Refused   a service names the Model and the request is not forced, or nothing of the Model is
            in the namespace cache (a pvc:// source, a repository the runtime downloads itself)
  Clearing  the Job runs (after any prefetch Job of the Model has been deleted: none writes then)
  Cleared   the Job completed: `<claim>/<cacheKey>/` is gone; the next pod downloads again
  Refilled  a prefetch (spec.prefetch still true) downloaded the files again since
  Failed    the Job failed (its pod's log says why)

The Job is hardened as the prefetch Job is (same user, Pod Security restricted, no token), mounts
the same claim at the same place and removes one directory whose name is the cache key (16 hex
digits: the script refuses anything else). It is owned by the Model; a completed one is deleted
by the reconcile that records Cleared, a failed one stays with its log until the next request.
"""

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from llmkube.api import constants as c
from llmkube.api.base import KubeObject
from llmkube.api.model import CacheClearStatus, Model, ModelStatus
from llmkube.plan.model.decision import (
    PREFETCH_PROGRESS_REQUEUE,
    ActionKind,
    ModelDecision,
    ModelPlanConfig,
    PrefetchPlan,
    Requeue,
)
from llmkube.plan.model.downloader import MODELS_MOUNT, RESOURCES
from llmkube.plan.model.facts import ClearFacts, PrefetchJob
from llmkube.plan.model.inputs import PlanInputs
from llmkube.plan.model.prefetch import CACHE_CLAIM, CONTAINER_SECURITY, model_job
from llmkube.plan.model.source import SourceKind, classify_source

CLEAR_ANNOTATION = f"{c.GROUP}/clear-cache"
FORCE_ANNOTATION = f"{c.GROUP}/clear-cache-force"
COMPONENT = "model-cache-clear"
CONTAINER = "cache-clear"
EXIT_REFUSED = 3  # the script's answer to a directory that is no cache key's: not retried
_SUFFIX = "-cache-clear-"
_MAX_JOB_NAME = 63
_DIGEST = 8
_KEY = re.compile(r"^[0-9a-f]{16}$")
FINAL = frozenset({"Cleared", "Refilled", "Refused", "Failed"})

# Counts what it removes (a line for the Job's log), then removes it. `rm -rf` of a directory that
# is not there is a success: a cache that never held the files is cleared too.
CLEAR_SCRIPT = r"""set -eu
say() { echo "llmkube-cache-clear: $1" | tee "${TERMINATION_LOG:-/dev/termination-log}"; }
case "$CACHE_KEY" in
  *[!0-9a-f]*|'') say "refused: \"$CACHE_KEY\" is not a cache key"; exit 3 ;;
esac
[ "${#CACHE_KEY}" -eq 16 ] || { say "refused: \"$CACHE_KEY\" is not a cache key"; exit 3; }
dir="$MODELS_DIR/$CACHE_KEY"
if [ ! -e "$dir" ]; then
  say "done: 0 files, 0 bytes ($dir held nothing)"
  exit 0
fi
files=$(find "$dir" -type f | wc -l | tr -d ' ')
bytes=$(find "$dir" -type f -exec stat -c %s {} + | awk '{ s += $1 } END { printf "%d", s }')
rm -rf -- "$dir"
say "done: $files files, $bytes bytes removed from $dir"
"""


@dataclass(frozen=True)
class ClearRequest:
    request: str
    force: bool


def clear_request(annotations: Mapping[str, str] | None) -> ClearRequest | None:
    value = (annotations or {}).get(CLEAR_ANNOTATION, "").strip()
    if not value:
        return None
    force = (annotations or {}).get(FORCE_ANNOTATION, "").strip().lower() == "true"
    return ClearRequest(value, force)


def unanswered(annotations: Mapping[str, str] | None, record: CacheClearStatus | None) -> ClearRequest | None:
    """The request the Model's status has not given its final answer to yet, or None."""
    request = clear_request(annotations)
    if request is None or (
        record is not None and record.request == request.request and record.phase in FINAL
    ):
        return None
    return request


def services_to_confirm(
    annotations: Mapping[str, str] | None, record: CacheClearStatus | None, cached: Sequence[str]
) -> bool:
    """Whether the services the controller's cache says name the Model must be read again from the
    API server before a refusal. A refusal is final for its request, and that cache may lag: a
    service deleted just before the request (delete it, then `cache clear`) can still
    be in it, while a read made after the request was seen shows the deletion. Only a pending,
    unforced request that the cache would refuse needs the read."""
    request = unanswered(annotations, record)
    return bool(cached) and request is not None and not request.force


def clear_job_name(model_name: str, request: str, key: str) -> str:
    digest = hashlib.sha256(f"{request}\0{key}".encode()).hexdigest()[:_DIGEST]
    stem = model_name[: _MAX_JOB_NAME - len(_SUFFIX) - _DIGEST].rstrip("-.")
    return f"{stem}{_SUFFIX}{digest}"


def clear_job(model: Model, name: str, key: str, config: ModelPlanConfig) -> KubeObject:
    """The Job that removes `<claim>/<key>/`, hardened as the prefetch Job."""
    container: KubeObject = {
        "name": CONTAINER,
        "image": config.downloader_image,
        "command": ["sh", "-c", CLEAR_SCRIPT],
        "env": [{"name": "MODELS_DIR", "value": MODELS_MOUNT}, {"name": "CACHE_KEY", "value": key}],
        "volumeMounts": [{"name": "model-cache", "mountPath": MODELS_MOUNT}],
        "securityContext": dict(CONTAINER_SECURITY),
        "resources": RESOURCES,
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    labels = {
        c.LABEL_NAME: "llmkube",
        c.LABEL_COMPONENT: COMPONENT,
        c.LABEL_MANAGED_BY: c.MANAGED_BY_VALUE,
    }
    return model_job(
        model,
        name=name,
        labels=labels,
        pod_labels={c.LABEL_COMPONENT: COMPONENT},
        container=container,
        volumes=[{"name": "model-cache", "persistentVolumeClaim": {"claimName": CACHE_CLAIM}}],
        permanent_exit=EXIT_REFUSED,
        config=config,
    )


@dataclass(frozen=True)
class ClearDecision:
    status: ModelStatus
    jobs: PrefetchPlan  # the clear Job to create, stale ones to delete
    #: a clear is under way: no prefetch Job may run (the planner deletes the Model's and makes none)
    holds_prefetch: bool = False


def refusal(model: Model, status: ModelStatus, facts: ClearFacts, request: ClearRequest) -> str | None:
    """Why this request is not carried out, or None."""
    kind = classify_source(model.spec.source)
    if kind is SourceKind.PVC:
        return "a pvc:// Model's files stay in its own claim: nothing of it is in the model cache"
    hardware = model.spec.hardware
    if hardware is not None and hardware.accelerator == "metal":
        return "a metal Model's files are on its host: nothing of it is in the model cache"
    if not _KEY.match(status.cache_key or ""):
        return "the runtime downloads this Model itself: nothing of it is in the model cache"
    if facts.services and not request.force:
        names = ", ".join(facts.services)
        return f"InferenceServices use it ({names}): clear it with --force, or delete them first"
    return None


def plan_cache_clear(
    model: Model,
    status: ModelStatus,
    facts: ClearFacts,
    prefetch_jobs: Sequence[PrefetchJob],
    now: datetime,
    config: ModelPlanConfig,
) -> ClearDecision:
    record = status.cache_clear
    name_of = model.metadata.name or ""
    request = unanswered(model.metadata.annotations, record)
    if request is None:
        # Nothing (more) to do: only a failed Job of the answered request stays, for its log.
        asked = clear_request(model.metadata.annotations) is not None
        keep = record.job if record is not None and record.phase == "Failed" and asked else None
        stale = tuple((job.name, job.uid) for job in facts.jobs if job.name != keep)
        return ClearDecision(status, PrefetchPlan(deletes=stale))
    key = status.cache_key or ""

    def answered(phase: str, message: str, job: str | None = None) -> ModelStatus:
        update = CacheClearStatus(
            request=request.request, phase=phase, cache_key=key or None, job=job, message=message, time=now
        )
        if record is not None and record.request == request.request and record.phase == phase:
            update = update.model_copy(update={"time": record.time})  # still the same: no new write
        return status.model_copy(update={"cache_clear": update})

    others = tuple((job.name, job.uid) for job in facts.jobs)
    refused = refusal(model, status, facts, request)
    if refused is not None:
        return ClearDecision(answered("Refused", refused), PrefetchPlan(deletes=others))
    if not config.namespace_cache or not facts.claim_exists:
        message = f'the namespace has no model cache claim ("{CACHE_CLAIM}"): nothing was cached'
        return ClearDecision(answered("Cleared", message), PrefetchPlan(deletes=others))
    name = clear_job_name(name_of, request.request, key)
    stale = tuple((job.name, job.uid) for job in facts.jobs if job.name != name)
    if prefetch_jobs:
        waiting = ", ".join(job.name for job in prefetch_jobs)
        message = f"waiting for the prefetch Job {waiting} to be deleted before the files are removed"
        return ClearDecision(answered("Clearing", message), PrefetchPlan(deletes=stale), holds_prefetch=True)
    job = next((job for job in facts.jobs if job.name == name), None)
    if job is None or job.phase == "Running":
        intent = clear_job(model, name, key, config) if job is None else None
        message = f'Job {name} removes the files of cache key {key} from claim "{CACHE_CLAIM}"'
        plan = PrefetchPlan(job=intent, deletes=stale)
        return ClearDecision(answered("Clearing", message, name), plan, holds_prefetch=True)
    if job.phase == "Failed":
        message = f"Job {name} failed: {job.message or 'see its pod log'}"
        return ClearDecision(answered("Failed", message, name), PrefetchPlan(deletes=stale))
    message = (
        f'the files of cache key {key} were removed from claim "{CACHE_CLAIM}" (Job {name}); '
        "the next pod that needs them downloads them again"
    )
    # Done: the Job goes in this same reconcile. The controller writes the status before it
    # carries out the plan (a failed write raises first), so the answer is recorded before the Job
    # is deleted. No later reconcile may be counted on: nothing of the Job changes after Complete,
    # a status write wakes no reconcile, and the Model's next requeue is its revalidation.
    return ClearDecision(answered("Cleared", message, name), PrefetchPlan(deletes=others))


def with_cache_clear(decision: ModelDecision, inputs: PlanInputs) -> ModelDecision:
    """The source's own decision with the cache clear's part, once that decision is made: its
    record in the status, its Job, and no prefetch Job while the files are being removed."""
    if decision.action.kind is not ActionKind.NONE or decision.waiting:
        return decision
    jobs = inputs.facts.prefetch_jobs
    clear = plan_cache_clear(
        inputs.model, decision.status, inputs.facts.clear, jobs, inputs.now, inputs.config
    )
    if clear.status is decision.status and not clear.jobs.deletes and clear.jobs.job is None:
        return decision
    prefetch, requeue = decision.prefetch, decision.requeue
    if clear.holds_prefetch:
        prefetch = PrefetchPlan(deletes=tuple((job.name, job.uid) for job in jobs), foreground=True)
        if requeue.backoff or requeue.after is None or requeue.after > PREFETCH_PROGRESS_REQUEUE:
            requeue = Requeue(after=PREFETCH_PROGRESS_REQUEUE)
    return replace(decision, status=clear.status, prefetch=prefetch, cache_clear=clear.jobs, requeue=requeue)


def refilled(status: ModelStatus, now: datetime, job: str) -> ModelStatus:
    """A prefetch completed after the cache was cleared: the files are there again."""
    record = status.cache_clear
    if record is None or record.phase != "Cleared" or record.cache_key != status.cache_key:
        return status
    update = record.model_copy(
        update={"phase": "Refilled", "message": f"prefetch Job {job} downloaded the files again", "time": now}
    )
    return status.model_copy(update={"cache_clear": update})
