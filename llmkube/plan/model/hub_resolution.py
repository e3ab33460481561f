"""A Model that names a Hugging Face repository and a `spec.quantization`, but no `spec.files`
(`hf://org/X-GGUF` with `quantization: Q4_K_M`): the controller chooses the file(s) from the Hub's
own file list (hub_files.py, the choice `llmkube deploy org/X-GGUF:Q4_K_M` makes), and the Model is
then planned as if it listed them.

The choice is remembered in `status.stagedFiles` of the status that describes this generation, so
the Hub is asked once per spec, not on every reconcile (a spec edit asks again; so does a Model
whose quantization was not found, on the failure's interval: the repository may gain it). The
InferenceService planner reads the files from there too (`with_resolved_files`).

A runtime that resolves a repository itself (vLLM, TGI) reads safetensors, not GGUF: a Model of
another `spec.format` is left to it, as before.
"""

from llmkube.api.model import Model, ModelStatus
from llmkube.plan.model import conditions as cond
from llmkube.plan.model.decision import (
    FETCH_FAILURE_REQUEUE,
    ActionKind,
    ModelAction,
    ModelDecision,
    Requeue,
)
from llmkube.plan.model.facts import HubListing, ListingFailure
from llmkube.plan.model.hub_files import Chosen, Missing, choose_files, listing_url
from llmkube.plan.model.inputs import PlanInputs, rebased, spec_target
from llmkube.plan.model.phases import failed, invalid_source
from llmkube.plan.model.source import SourceKind, cache_key, classify_source, parse_hf_source

_HF_KINDS = frozenset({SourceKind.HF, SourceKind.HUGGINGFACE})
_GGUF_FORMATS = frozenset({None, "gguf"})
_RETRY = Requeue(after=FETCH_FAILURE_REQUEUE)
_LISTING_REASONS = {
    ListingFailure.NOT_FOUND: cond.SOURCE_NOT_FOUND,
    ListingFailure.UNAUTHORIZED: cond.SOURCE_UNAUTHORIZED,
    ListingFailure.NOT_ALLOWED: cond.SOURCE_NOT_ALLOWED,
}


def wants_resolution(model: Model) -> bool:
    spec = model.spec
    hardware = spec.hardware
    return (
        bool(spec.quantization)
        and not spec.files
        and spec.format in _GGUF_FORMATS
        and classify_source(spec.source) in _HF_KINDS
        and not (hardware is not None and hardware.accelerator == "metal")
    )


def resolved_files(model: Model) -> tuple[str, ...] | None:
    """The files chosen for this very spec, as its status remembers them (None: not chosen yet)."""
    status = model.status
    if status is None or not status.staged_files or status.observed_generation != model.metadata.generation:
        return None
    if (status.cache_key or "") != cache_key(model.spec.source):
        return None
    files = tuple(path for path in status.staged_files if path != model.spec.mmproj)
    return files or None


def with_files(model: Model, files: tuple[str, ...]) -> Model:
    return model.model_copy(update={"spec": model.spec.model_copy(update={"files": list(files)})})


def with_resolved_files(model: Model) -> Model:
    """The Model as its planners see it: with the files its status chose for its quantization."""
    if not wants_resolution(model):
        return model
    files = resolved_files(model)
    return with_files(model, files) if files else model


def resolve_quantization(inputs: PlanInputs, hf_endpoint: str) -> Model | ModelDecision:
    """The Model with the chosen files; or the listing to ask the Hub for; or why it failed."""
    model = inputs.model
    remembered = resolved_files(model)
    if remembered is not None:
        return with_files(model, remembered)
    parsed = parse_hf_source(model.spec.source)
    if isinstance(parsed, str):
        return invalid_source(inputs, parsed)
    listing = inputs.facts.hub_listing
    if listing is None:
        url = listing_url(hf_endpoint, parsed.repo, parsed.revision)
        action = ModelAction(
            kind=ActionKind.LIST_REPOSITORY,
            source_kind=classify_source(model.spec.source),
            source=url,
            model_name=model.metadata.name or "",
            target=spec_target(model),
        )
        return ModelDecision(status=inputs.old, action=action)
    return _chosen(inputs, parsed.repo, listing)


def chosen_status(inputs: PlanInputs, resolved: Model) -> ModelStatus:
    """The status that remembers a fresh choice while the Model's next action runs: Pending,
    Progressing for the choice (an Event says which file), the files in stagedFiles."""
    spec = resolved.spec
    files = list(spec.files or [])
    staged = list(dict.fromkeys([*files, *([spec.mmproj] if spec.mmproj else [])]))
    parsed = parse_hf_source(spec.source)
    repo = parsed.repo if not isinstance(parsed, str) else spec.source
    base = rebased(inputs.old, cache_key(inputs.source))
    message = cond.msg_quantization_resolved(repo, spec.quantization or "", files)
    return base.model_copy(
        update={
            "phase": base.phase if base.phase == "Ready" else "Pending",
            "staged_files": staged,
            "conditions": cond.mark_progressing(
                base.conditions,
                reason=cond.QUANTIZATION_RESOLVED,
                message=message,
                clear_degraded=True,
                now=inputs.now,
                generation=inputs.generation,
            ),
        }
    )


def _chosen(inputs: PlanInputs, repo: str, listing: HubListing) -> Model | ModelDecision:
    base = rebased(inputs.old, cache_key(inputs.source)).model_copy(update={"staged_files": None})
    if listing.failure is not None:
        reason = _LISTING_REASONS.get(listing.failure, cond.REPOSITORY_NOT_LISTED)
        return failed(inputs, base, reason, cond.msg_repository_not_listed(repo, listing.detail), _RETRY)
    asked = inputs.model.spec.quantization or ""
    choice = choose_files(repo, listing.files, asked)
    if isinstance(choice, Chosen):
        return with_files(inputs.model, choice.files)
    if choice.kind is Missing.NO_GGUF:
        return failed(inputs, base, cond.NO_GGUF_FILE, cond.msg_no_gguf_file(repo), _RETRY)
    message = cond.msg_quantization_not_found(repo, asked, choice.quantizations)
    return failed(inputs, base, cond.QUANTIZATION_NOT_FOUND, message, _RETRY)
