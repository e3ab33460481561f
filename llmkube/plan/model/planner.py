"""plan_model: the Model reconcile as one pure function.

The controller runs a short loop: observe → `plan_model` → perform the returned action with the
`modelsource` helpers → add the result to the facts → `plan_model` again, until the action is NONE.
Every status the loop produces is final or honestly provisional (`Copying`), and the loop ends
because an action is never requested once its result is among the facts.

A plan has three steps: the decision of the Model's kind of source (one module each, sources/),
the cache clear's part (cache_clear.py), and the summary conditions that go on every status.

Where llmkube differs from the reference operator (docs/differences.md#models):
* conditions follow standard semantics (Progressing/Degraded cleared once Ready, lastTransitionTime
  only on flips) and are written in one status update, not one per condition;
* the state is re-derived on every reconcile (level-triggered): a Ready PVC model whose claim
  disappears becomes Failed, a Ready cached model whose file vanished is copied again;
* bad input never hot-loops: unsupported and malformed sources fail without a requeue (a spec edit
  brings the Model back), unrecoverable copy errors and checksum mismatches retry every 5 minutes;
* fields that described an earlier `spec.source` are dropped when the source changes.
"""

from dataclasses import replace
from datetime import datetime

from llmkube.api.model import Model, ModelStatus
from llmkube.plan.conditions.standard import keep_transition_times
from llmkube.plan.conditions.summary import summarize
from llmkube.plan.model import conditions as cond
from llmkube.plan.model.cache_clear import with_cache_clear
from llmkube.plan.model.decision import NO_REQUEUE, ModelDecision, ModelPlanConfig
from llmkube.plan.model.facts import ModelFacts
from llmkube.plan.model.fileset import FileSetProblem, staging_plan
from llmkube.plan.model.hub_resolution import (
    chosen_status,
    resolve_quantization,
    resolved_files,
    wants_resolution,
)
from llmkube.plan.model.inputs import PlanInputs, current_facts, rebased, spec_target
from llmkube.plan.model.phases import failed, invalid_source
from llmkube.plan.model.remote import remote_source
from llmkube.plan.model.source import REMOTE_KINDS, SourceKind, classify_source
from llmkube.plan.model.sources import metal
from llmkube.plan.model.sources.downloaded import plan_downloaded
from llmkube.plan.model.sources.hf import plan_repository
from llmkube.plan.model.sources.local import plan_local
from llmkube.plan.model.sources.pvc import plan_pvc
from llmkube.plan.model.status import status_changed

#: Where `files` can be staged from: a repository, a bucket prefix, a base URL, a claim's
#: directory (not from a local path, which the controller copies as one file). A metal Model's
#: host agent stages them from fewer (sources/metal.py).
_STAGED = frozenset(
    {SourceKind.HF, SourceKind.HUGGINGFACE, SourceKind.S3, SourceKind.GS, SourceKind.HTTP, SourceKind.PVC}
)
_HF_KINDS = frozenset({SourceKind.HF, SourceKind.HUGGINGFACE})


def plan_model(
    model: Model, facts: ModelFacts, now: datetime, config: ModelPlanConfig | None = None
) -> ModelDecision:
    facts = current_facts(facts, spec_target(model))
    inputs = PlanInputs(model, facts, now, config or ModelPlanConfig(), model.status or ModelStatus())
    if facts.pending is not None:
        # Its result decides what comes next; until then the status says what it says.
        return ModelDecision(status=inputs.old, waiting=True)
    return _stamped(with_cache_clear(_source_plan(inputs), inputs), inputs)


def _source_plan(inputs: PlanInputs) -> ModelDecision:
    """The decision of the module of the Model's kind of source; a repository named with a
    quantization is first given its files (hub_resolution.py)."""
    if not wants_resolution(inputs.model):
        return _kind_plan(inputs)
    resolved = resolve_quantization(inputs, inputs.config.hf_endpoint)
    if isinstance(resolved, ModelDecision):
        return resolved
    fresh = resolved_files(inputs.model) is None
    decision = _kind_plan(replace(inputs, model=resolved))
    if fresh and decision.status is inputs.old:
        # The next action runs in the background and its result is a fact of another reconcile,
        # which would not have this listing: the choice goes into status first.
        return replace(decision, status=chosen_status(inputs, resolved))
    return decision


def _kind_plan(inputs: PlanInputs) -> ModelDecision:
    kind = classify_source(inputs.source)
    files = staging_plan(inputs.model.spec)
    staged = metal.STAGED if inputs.is_metal else _STAGED
    if isinstance(files, FileSetProblem) or (files is not None and kind not in staged):
        problem = (
            files.text() if isinstance(files, FileSetProblem) else cond.msg_files_unsupported(inputs.source)
        )
        base = rebased(inputs.old, "").model_copy(update={"staged_files": None})
        return failed(inputs, base, cond.INVALID_FILE_SET, problem, NO_REQUEUE)
    if kind is SourceKind.PVC:
        return plan_pvc(inputs)
    if kind in _HF_KINDS and files is None:
        return plan_repository(inputs)
    if kind in REMOTE_KINDS or kind is SourceKind.HUGGINGFACE:
        remote = remote_source(inputs.model, inputs.config.hf_endpoint)
        if isinstance(remote, FileSetProblem):
            return invalid_source(inputs, remote.message)
        assert remote is not None  # every remote kind has files to fetch
        if inputs.is_metal and (refused := metal.remote_refusal(inputs, remote)) is not None:
            return invalid_source(inputs, refused)
        return plan_downloaded(inputs, remote)
    if kind is SourceKind.LOCAL:
        return metal.plan_agent_local(inputs) if inputs.is_metal else plan_local(inputs)
    return invalid_source(inputs, cond.msg_unsupported_source(inputs.source))


def _stamped(decision: ModelDecision, inputs: PlanInputs) -> ModelDecision:
    """The summary conditions (Ready, Reconciling, Stalled) from the decided status; lastUpdated moves
    only when something else changed, so an unchanged reconcile writes nothing."""
    if decision.status is inputs.old:
        return decision  # provisional "nothing to say yet" while an action runs
    status = decision.status
    if status.conditions:
        status = status.model_copy(
            update={"conditions": keep_transition_times(inputs.old.conditions, status.conditions)}
        )
    if status.phase:
        conditions = summarize(
            status.conditions,
            cond.model_summary(status.phase, status.conditions),
            generation=inputs.generation,
            now=inputs.now,
        )
        status = status.model_copy(update={"conditions": conditions})
    # Which spec this status describes: an InferenceService plans from a Model status only when it
    # describes the Model's current spec (plan/inferenceservice/current_model.py), never from an older one.
    status = status.model_copy(update={"observed_generation": inputs.generation})
    last_updated = inputs.now if status_changed(inputs.old, status) else inputs.old.last_updated
    return replace(decision, status=status.model_copy(update={"last_updated": last_updated}))
