"""The statuses a plan of any source kind ends in: Failed (and when it is looked at again), and
Ready without a download of the controller's (the pods, the runtime or the host agent fetch)."""

from llmkube.api.model import ModelStatus
from llmkube.plan.model import conditions as cond
from llmkube.plan.model.decision import NO_REQUEUE, ModelDecision, Requeue
from llmkube.plan.model.drift import without_drift
from llmkube.plan.model.inputs import PlanInputs, rebased

PHASE_READY = "Ready"


def failed(
    inputs: PlanInputs, base: ModelStatus, reason: str, message: str, requeue: Requeue
) -> ModelDecision:
    status = base.model_copy(
        update={
            "phase": "Failed",
            "accelerator_ready": inputs.accelerator_ready,
            "conditions": cond.mark_failed(
                base.conditions, reason=reason, message=message, now=inputs.now, generation=inputs.generation
            ),
        }
    )
    return ModelDecision(
        status=status,
        requeue=requeue,
        error=message if requeue.backoff else None,
    )


def invalid_source(inputs: PlanInputs, message: str) -> ModelDecision:
    """Failed for what the spec says, with nothing of an earlier source kept and nothing retried:
    only a spec edit (or a restart with other settings, which reconciles everything) changes it."""
    return failed(inputs, rebased(inputs.old, ""), cond.INVALID_SOURCE, message, NO_REQUEUE)


def ready_without_download(
    inputs: PlanInputs, base: ModelStatus, key: str, reason: str, message: str
) -> ModelStatus:
    return base.model_copy(
        update={
            "phase": PHASE_READY,
            "path": None,  # no file of ours: left out, not ""
            "size": base.size if key else None,  # the runtime's own download: its size is not known
            "cache_key": key,
            "sha256": None,
            "accelerator_ready": inputs.accelerator_ready,
            "conditions": cond.mark_ready(
                base.conditions,
                reason=reason,
                message=message,
                superseded_message=cond.MSG_SUPERSEDED_NO_DOWNLOAD,
                now=inputs.now,
                generation=inputs.generation,
            ),
        }
    )


def runtime_resolved(inputs: PlanInputs, reason: str, message: str) -> ModelDecision:
    """Ready with no file the controller knows of: a repository the runtime fetches (vLLM, TGI), a
    local path the host agent loads."""
    base = without_drift(rebased(inputs.old, "")).model_copy(update={"gguf": None})
    status = ready_without_download(inputs, base, "", reason, message)
    return ModelDecision(status=status)
