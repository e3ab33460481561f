"""`pvc://<claim>/<path>`: the weights are on a claim of the Model's namespace, which the pods
mount; the controller reads nothing of them, it only waits for the claim to be Bound."""

from llmkube.plan.model import conditions as cond
from llmkube.plan.model.decision import (
    NO_REQUEUE,
    PVC_NOT_BOUND_REQUEUE,
    PVC_NOT_FOUND_REQUEUE,
    ModelDecision,
    Requeue,
)
from llmkube.plan.model.drift import without_drift
from llmkube.plan.model.fileset import StagingPlan, staging_plan
from llmkube.plan.model.inputs import PlanInputs, rebased
from llmkube.plan.model.phases import PHASE_READY, failed
from llmkube.plan.model.source import cache_key, parse_pvc_source

PVC_BOUND = "Bound"
#: Where the pods mount the claim (plan/inferenceservice/storage.py mounts it there).
PVC_MOUNT_ROOT = "/model-source"


def plan_pvc(inputs: PlanInputs) -> ModelDecision:
    source = parse_pvc_source(inputs.source)
    key = cache_key(inputs.source)
    base = without_drift(rebased(inputs.old, key))
    if source is None:
        return failed(
            inputs, base, cond.INVALID_SOURCE, cond.msg_invalid_pvc_source(inputs.source), NO_REQUEUE
        )
    phase = inputs.facts.pvc_phase
    if phase is None:
        namespace = inputs.model.metadata.namespace or ""
        message = cond.msg_pvc_not_found(source.claim, namespace)
        return failed(inputs, base, cond.PVC_NOT_FOUND, message, Requeue(after=PVC_NOT_FOUND_REQUEUE))
    if phase != PVC_BOUND:
        message = cond.msg_pvc_not_bound(source.claim, phase)
        status = base.model_copy(
            update={
                "phase": "Pending",
                "accelerator_ready": inputs.accelerator_ready,
                "conditions": cond.mark_progressing(
                    base.conditions,
                    reason=cond.PVC_NOT_BOUND,
                    message=message,
                    clear_degraded=True,  # the claim exists now: PVCNotFound no longer holds
                    now=inputs.now,
                    generation=inputs.generation,
                ),
            }
        )
        return ModelDecision(status=status, requeue=Requeue(after=PVC_NOT_BOUND_REQUEUE))
    files = staging_plan(inputs.model.spec)
    primary = f"/{files.primary}" if isinstance(files, StagingPlan) else ""
    status = base.model_copy(
        update={
            "phase": PHASE_READY,
            "path": f"{PVC_MOUNT_ROOT}/{source.path}{primary}",
            "staged_files": list(files.files) if isinstance(files, StagingPlan) else None,
            "cache_key": key,
            "accelerator_ready": inputs.accelerator_ready,
            "conditions": cond.mark_ready(
                base.conditions,
                reason=cond.PVC_MODEL_READY,
                message=cond.msg_pvc_model_ready(source.claim),
                superseded_message=cond.MSG_SUPERSEDED_NO_DOWNLOAD,
                now=inputs.now,
                generation=inputs.generation,
            ),
        }
    )
    return ModelDecision(status=status)
