"""Phase and status of an InferenceService: the reference operator's phases, reasons and messages.

Conditions describe the present: `Available` is True only while replicas serve, `Progressing` is
False once settled, `Degraded` turns False and `GPUAvailable` True when their cause is gone (never
removed: the rule is in plan/conditions/standard.py), and Stopped says so. `Ready` (True only when every
replica serves the current spec), `Reconciling` and `Stalled` summarize them for tools
(plan/conditions/summary.py). They are written with standard semantics: lastTransitionTime moves only on a
status flip, so planning an unchanged service yields an identical status, and `status_changed`
tells the controller there is nothing to write.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from llmkube.api.enums import Phase
from llmkube.api.inferenceservice import InferenceServiceSpec, InferenceServiceStatus
from llmkube.api.meta import Condition, ConditionStatus
from llmkube.plan.conditions.standard import (
    find_condition,
    remove_condition,
    set_condition,
    update_condition_if_present,
)
from llmkube.plan.conditions.summary import (
    READY,
    READY_REASON,
    RECONCILING,
    STALLED,
    Summary,
    message_of,
    reason_of,
    summarize,
)
from llmkube.plan.inferenceservice.rollout import ROLLING_OUT, Rollout
from llmkube.plan.inferenceservice.scheduling import INSUFFICIENT_GPU, SchedulingInfo
from llmkube.plan.quota.decision import QUOTA_EXCEEDED

AVAILABLE, PROGRESSING, DEGRADED, GPU_AVAILABLE = "Available", "Progressing", "Degraded", "GPUAvailable"
VLLM_SPEC_VALID, SPEC_VALID = "VLLMSpecValid", "SpecValid"
#: the conditions `phase_conditions` decides from the phase
PHASE_CONDITIONS = frozenset({AVAILABLE, PROGRESSING, DEGRADED, GPU_AVAILABLE})
SUMMARY_CONDITIONS = frozenset({READY, RECONCILING, STALLED})

READY_MESSAGE = "Inference service is ready and serving requests"
WAITING_FOR_MODEL = "Waiting for Model to be Ready"
FAILED_REASON, INVALID_SPEC_REASON = "Failed", "InvalidSpec"
IGNORED_SETTINGS_REASON = "IgnoredSettings"
MODEL_NOT_FOUND_REASON, WAITING_FOR_MODEL_REASON = "ModelNotFound", "WaitingForModel"
RECOVERED_REASON, NOT_WAITING_FOR_GPU = "Recovered", "NotWaitingForGPU"
SPECULATIVE_MISSING_MODEL = (
    "speculative.enabled is true but speculative.model is empty, "
    "so the speculative decoding flags are skipped"
)


@dataclass(frozen=True)
class StatusFacts:
    phase: Phase
    ready: int
    desired: int
    running: int
    endpoint: str
    model_ready: bool
    effective_priority: int | None
    scheduling: SchedulingInfo | None = None
    queue_position: int = 0
    failure_reason: str = FAILED_REASON
    failure_message: str = ""
    #: the rollout of the Deployment that serves the service (None: no Deployment of ours)
    rollout: Rollout | None = None
    # Replicas serve, but their Model is missing or not Ready: (reason, message). Degraded says so
    # for a missing Model, Progressing for one being fetched again; Available follows the replicas.
    model_problem: tuple[str, str] | None = None
    # A pod is still fetching the model (plan/inferenceservice/download.py): how far it got.
    download: str = ""
    #: the serving mode in effect (v0.9 status.mode: chat, embedding or rerank); "" leaves it out
    mode: str = ""
    #: why a `Stopped` service is stopped when it is not its spec.replicas: (reason, message)
    #: (scale to zero after an idle period: plan/inferenceservice/scale_to_zero.py)
    stopped: tuple[str, str] | None = None


def reason_column(facts: StatusFacts) -> str:
    """`status.schedulingStatus`, shown as REASON by `kubectl get isvc -o wide`: the scheduler's
    diagnosis while pods wait, why a service failed or waits for its Model, or what its serving
    replicas lack."""
    if facts.scheduling is not None:
        return facts.scheduling.status
    if facts.phase in ("Failed", "Pending"):
        return facts.failure_reason
    if facts.phase == "Stopped" and facts.stopped is not None:
        return facts.stopped[0]
    return facts.model_problem[0] if facts.model_problem else ""


def determine_phase(ready: int, desired: int, scheduling: SchedulingInfo | None) -> Phase:
    """The reference operator's precedence. Pending and Failed are decided before (model gate,
    validation)."""
    if ready == desired and ready > 0:
        return "Ready"
    if ready > 0:
        return "Progressing"
    if desired == 0:
        return "Stopped"
    if scheduling is not None and scheduling.status in (INSUFFICIENT_GPU, QUOTA_EXCEEDED):
        return "WaitingForGPU"
    return "Creating"


def build_status(
    previous: Sequence[Condition] | None, facts: StatusFacts, *, generation: int | None, now: datetime
) -> InferenceServiceStatus:
    info = facts.scheduling
    conditions = phase_conditions(previous, facts, generation=generation, now=now)
    summary = isvc_summary(facts.phase, conditions, facts.desired, facts.rollout)
    # Only a service in the GPU queue has a position: QUEUE is blank, not 0, for the others (the
    # field is left out rather than set to null, so the object reads the same wherever it goes).
    queued = {"queue_position": facts.queue_position} if facts.phase == "WaitingForGPU" else {}
    texts = {
        "endpoint": facts.endpoint,
        "scheduling_status": reason_column(facts),
        "scheduling_message": info.message if info else "",
        "waiting_for": info.waiting_for if info else "",
    }
    return InferenceServiceStatus(
        **queued,
        **({"mode": facts.mode} if facts.mode else {}),
        **{field: text for field, text in texts.items() if text},  # nothing to say: left out
        phase=facts.phase,
        conditions=summarize(conditions, summary, generation=generation, now=now),
        replicas=facts.running,
        ready_replicas=facts.ready,
        desired_replicas=facts.desired,
        model_ready=facts.model_ready,
        effective_priority=facts.effective_priority,
        last_updated=now,
    )


def phase_conditions(
    previous: Sequence[Condition] | None, facts: StatusFacts, *, generation: int | None, now: datetime
) -> list[Condition]:
    conditions = list(previous or ())

    def put(type_: str, status: ConditionStatus, reason: str, message: str) -> None:
        nonlocal conditions
        conditions = set_condition(
            conditions,
            type_=type_,
            status=status,
            reason=reason,
            message=message,
            now=now,
            observed_generation=generation,
        )

    phase, ready, desired = facts.phase, facts.ready, facts.desired
    progress = f"Creating inference service ({ready}/{desired} replicas ready)"
    if phase == "Ready":
        put(AVAILABLE, "True", "InferenceReady", READY_MESSAGE)
        put(PROGRESSING, "False", "Ready", f"All {ready} replicas are ready")
    elif phase == "Progressing":
        put(AVAILABLE, "True", "PartiallyReady", f"Serving with {ready}/{desired} replicas ready")
        put(PROGRESSING, "True", "Creating", progress)
    elif phase == "Creating":
        info = facts.scheduling
        if info is not None:
            put(AVAILABLE, "False", info.status, info.message or info.status)
            if info.gpus_never_fit:  # more GPUs than any node has: not a wait in the queue
                put(GPU_AVAILABLE, "False", info.status, info.message)
        elif facts.download:
            put(AVAILABLE, "False", "Downloading", facts.download)
        else:
            put(AVAILABLE, "False", "Creating", f"No replica is ready yet (0/{desired})")
        put(PROGRESSING, "True", "Creating", progress)
    elif phase == "WaitingForGPU":
        waiting_for = facts.scheduling.waiting_for if facts.scheduling else ""
        put(AVAILABLE, "False", "WaitingForGPU", "No replica is ready: waiting for GPU resources")
        if facts.scheduling is not None and facts.scheduling.status == QUOTA_EXCEEDED:
            # Held back by a GPUQuota (plan/quota/decision.py): the message names it and the need.
            quota = facts.scheduling.message
            put(PROGRESSING, "True", "WaitingForGPU", f"Queued at position {facts.queue_position}: {quota}")
            put(GPU_AVAILABLE, "False", QUOTA_EXCEEDED, quota)
        else:
            put(
                PROGRESSING,
                "True",
                "WaitingForGPU",
                f"Queued at position {facts.queue_position} waiting for GPU",
            )
            put(GPU_AVAILABLE, "False", "InsufficientGPU", f"Waiting for GPU resources: {waiting_for}")
    elif phase == "Suspended":
        message = "Suspended: spec.suspend is true (spec.replicas is kept for when it resumes)"
        put(AVAILABLE, "False", "Suspended", message)
        put(PROGRESSING, "False", "Suspended", message)
    elif phase == "Stopped":
        reason, message = facts.stopped or ("Stopped", "Scaled to zero: spec.replicas is 0")
        put(AVAILABLE, "False", reason, message)
        put(PROGRESSING, "False", reason, message)
    elif phase == "Pending":
        put(AVAILABLE, "False", "Pending", WAITING_FOR_MODEL)
        put(PROGRESSING, "True", "Pending", WAITING_FOR_MODEL)
    else:  # Failed
        put(AVAILABLE, "False", facts.failure_reason, facts.failure_message)
        put(PROGRESSING, "False", facts.failure_reason, facts.failure_message)
        put(DEGRADED, "True", facts.failure_reason, facts.failure_message)
    # Causes that are gone: the conditions say so and stay (plan/conditions/standard.py has the rule).
    if phase != "Failed":
        conditions = update_condition_if_present(
            conditions,
            type_=DEGRADED,
            status="False",
            reason=RECOVERED_REASON,
            message=f"No longer failing: the service is {phase}",
            now=now,
            observed_generation=generation,
        )
    never_fit = facts.scheduling is not None and facts.scheduling.gpus_never_fit
    if phase != "WaitingForGPU" and not never_fit:
        conditions = update_condition_if_present(
            conditions,
            type_=GPU_AVAILABLE,
            status="True",
            reason=NOT_WAITING_FOR_GPU,
            message="Not waiting for GPU resources",
            now=now,
            observed_generation=generation,
        )
    if facts.model_problem is not None:
        reason, message = facts.model_problem
        put(DEGRADED if reason == MODEL_NOT_FOUND_REASON else PROGRESSING, "True", reason, message)
    return conditions


def isvc_summary(
    phase: Phase, conditions: Sequence[Condition] | None, desired: int, rollout: Rollout | None
) -> Summary:
    """Ready only when the phase is Ready and, when a Deployment serves the service, it has rolled
    the current template out to every replica, or when it is Stopped as its spec asks; otherwise
    why not, from the other conditions."""
    if phase in ("Ready", "Progressing") and rollout is not None and not rollout.complete(desired):
        return Summary(ready=False, reason=ROLLING_OUT, message=rollout.describe(desired))
    if phase == "Ready":
        return Summary(ready=True, reason=READY_REASON, message=READY_MESSAGE)
    if phase == "Failed":
        message = message_of(conditions, DEGRADED)
        return Summary(
            ready=False, reason=reason_of(conditions, DEGRADED, FAILED_REASON), message=message, stalled=True
        )
    if phase in ("Stopped", "Suspended"):  # scaled to zero, as asked: nothing left to do
        return Summary(ready=True, reason=phase, message=message_of(conditions, AVAILABLE))
    # Pending, Creating, WaitingForGPU, Progressing: the condition that tells what is under way.
    detail = (AVAILABLE, PROGRESSING) if phase == "Creating" else (PROGRESSING, AVAILABLE)
    return Summary(ready=False, reason=phase, message=message_of(conditions, *detail))


def with_rollout(
    status: InferenceServiceStatus, rollout: Rollout | None, *, generation: int | None, now: datetime
) -> InferenceServiceStatus:
    """The planned status, summarized again for the Deployment this reconcile applied (a changed
    template is a rollout the planned status, made from the cache, could not know about)."""
    summary = isvc_summary(
        status.phase or "Pending", status.conditions, status.desired_replicas or 0, rollout
    )
    conditions = summarize(status.conditions, summary, generation=generation, now=now)
    return status.model_copy(update={"conditions": conditions})


def _put_if_true_or_existing(
    conditions: list[Condition],
    type_: str,
    problems: Sequence[str],
    *,
    false_reason: str,
    true_reason: str,
    true_message: str,
    generation: int | None,
    now: datetime,
) -> list[Condition]:
    """False with the problems; once problems are gone, True only if the condition existed (a spec that
    was always fine never gets one, as in the reference's VLLMSpecValid)."""
    if problems:
        return set_condition(
            conditions,
            type_=type_,
            status="False",
            reason=false_reason,
            message="; ".join(problems),
            now=now,
            observed_generation=generation,
        )
    return update_condition_if_present(
        conditions,
        type_=type_,
        status="True",
        reason=true_reason,
        message=true_message,
        now=now,
        observed_generation=generation,
    )


def spec_conditions(
    previous: Sequence[Condition] | None,
    *,
    runtime: str,
    spec: InferenceServiceSpec,
    speculative_missing_model: bool,
    warnings: Sequence[str],
    warning_reason: str = IGNORED_SETTINGS_REASON,
    generation: int | None,
    now: datetime,
) -> list[Condition]:
    """VLLMSpecValid and SpecValid: False with every setting that has no effect
    (IgnoredSettings) and every piece of advice about the spec (MissingMemoryRequest,
    MissingSkipModelInit; the reason names the first kind)."""
    conditions = list(previous or ())
    if runtime != "vllm":
        conditions = remove_condition(conditions, VLLM_SPEC_VALID)  # about a runtime it does not use
    else:
        problems = [SPECULATIVE_MISSING_MODEL] if speculative_missing_model else []
        conditions = _put_if_true_or_existing(
            conditions,
            VLLM_SPEC_VALID,
            problems,
            false_reason="SpeculativeMissingModel",
            true_reason="ConfigValid",
            true_message="vLLM configuration is valid",
            generation=generation,
            now=now,
        )
    return _put_if_true_or_existing(
        conditions,
        SPEC_VALID,
        warnings,
        false_reason=warning_reason,
        true_reason="Valid",
        true_message="Every setting is applied",
        generation=generation,
        now=now,
    )


#: the optional text fields a status leaves out rather than write as "" (as the reference does): a
#: client that tests for presence finds none
OMITTED_WHEN_EMPTY = frozenset({"endpoint", "scheduling_status", "scheduling_message", "waiting_for"})


def _comparable(status: InferenceServiceStatus) -> dict[str, object]:
    # A "" in one of those fields (a status an older version wrote) is the same as none: it costs no
    # write of its own, and goes with the next status that changes anyway (server-side apply drops
    # the fields the controller no longer sends).
    dumped = status.model_dump(exclude={"last_updated"})
    return {k: v for k, v in dumped.items() if not (k in OMITTED_WHEN_EMPTY and v == "") and v is not None}


def status_changed(old: InferenceServiceStatus | None, new: InferenceServiceStatus) -> bool:
    """True when anything but `lastUpdated` differs: only then is a write needed (so a status write
    does not wake the controller again, as every write of the reference operator did)."""
    if old is None:
        return True
    return _comparable(old) != _comparable(new)


def failed_status(
    planned: InferenceServiceStatus,
    message: str,
    *,
    previous: InferenceServiceStatus | None,
    generation: int | None,
    now: datetime,
    reason: str = FAILED_REASON,
) -> InferenceServiceStatus:
    """The status to write when applying the plan failed: Failed with the error, the
    observed counts kept. The controller retries with backoff; the next success clears it.

    The conditions the phase decides start from the stored ones (`previous`), not from the plan's:
    the plan was made for the phase the service would have (Creating, say, which turns Progressing
    True), and reporting the failure turns them back, so starting from the plan would stamp new
    transition times on every retry and write the same failure again and again.
    Conditions the phase does not decide (SpecValid, VLLMSpecValid) are the plan's; the summary
    conditions (Ready, Reconciling, Stalled) follow the phase too."""
    decided = PHASE_CONDITIONS | SUMMARY_CONDITIONS
    stored = {c.type: c for c in (previous.conditions or ())} if previous is not None else {}
    base = [
        stored.get(c.type) if c.type in decided else c
        for c in planned.conditions or ()
        if c.type not in decided or c.type in stored
    ]
    facts = StatusFacts(
        phase="Failed",
        ready=planned.ready_replicas or 0,
        desired=planned.desired_replicas or 0,
        running=planned.replicas or 0,
        endpoint="",
        model_ready=bool(planned.model_ready),
        effective_priority=planned.effective_priority,
        failure_reason=reason,
        failure_message=message,
    )
    return build_status([c for c in base if c is not None], facts, generation=generation, now=now)


def gpu_queue_wait_seconds(
    old: InferenceServiceStatus | None, new: InferenceServiceStatus, now: datetime
) -> float | None:
    """How long the service waited for GPUs, when `new` is the status that takes it out of the
    queue: from the moment its GPUAvailable condition turned False (it entered the queue) until
    `now`. None when it does not leave the queue now, or its entry time is unknown. Read from the
    stored status, so a wait that spans a controller restart is measured whole."""
    if old is None or old.phase != "WaitingForGPU" or new.phase == "WaitingForGPU":
        return None
    entered = find_condition(old.conditions, GPU_AVAILABLE)
    if entered is None or entered.status != "False" or entered.last_transition_time is None:
        return None
    return max(0.0, (now - entered.last_transition_time).total_seconds())
