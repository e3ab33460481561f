"""Local paths (`file:///x`, `/x`) of a Model the controller serves from its own cache: the file is
read only inside `--model-local-roots` and in a namespace allowed local sources, copied into
`<cache>/<cacheKey>/` (plan/model/cache_layout.py), verified there (its SHA-256, its GGUF header,
its canonical name), and stat'ed on the revalidation interval for drift. The host agent reads a
metal Model's local path itself (sources/metal.py)."""

from dataclasses import dataclass

from llmkube.api.model import ModelStatus
from llmkube.plan.conditions.standard import find_condition
from llmkube.plan.model import conditions as cond
from llmkube.plan.model.cache_layout import cache_layout
from llmkube.plan.model.decision import (
    BACKOFF,
    FETCH_FAILURE_REQUEUE,
    ActionKind,
    ModelAction,
    ModelDecision,
    Requeue,
)
from llmkube.plan.model.drift import DriftKind, next_revalidation_in, revalidation_due, with_drift
from llmkube.plan.model.facts import CopyResult, FetchError, FetchFailure, StoredFile
from llmkube.plan.model.inputs import PlanInputs, rebased, spec_target
from llmkube.plan.model.local_roots import local_source_violation
from llmkube.plan.model.phases import PHASE_READY, failed, invalid_source
from llmkube.plan.model.size import format_size
from llmkube.plan.model.source import SourceKind, canonical_basename, local_path
from llmkube.plan.tenancy import NamespacePolicy, local_source_refusal

# Copy failures that will not fix themselves: retried on a fixed interval, never through the rate
# limiter, whose first retries come milliseconds apart.
_UNRECOVERABLE = frozenset({FetchFailure.NOT_FOUND, FetchFailure.PERMISSION_DENIED, FetchFailure.NOT_A_FILE})
# A failed verification of a cached file that a fresh copy repairs (the helper already removed it).
_RECOPY_AFTER_VERIFY = frozenset({FetchFailure.NOT_FOUND, FetchFailure.INTEGRITY_MISMATCH})


def plan_local(inputs: PlanInputs) -> ModelDecision:
    violation = local_source_violation(
        inputs.source, local_path(inputs.source), inputs.config.local_source_roots
    )
    if violation is None and not inputs.facts.local_sources_allowed:
        violation = local_source_refusal(inputs.model.metadata.namespace or "", NamespacePolicy(known=True))
    if violation is not None:
        # Nothing is read, and nothing is retried: only a spec edit (or a restart with other
        # roots, which reconciles everything) can change the verdict.
        return invalid_source(inputs, violation)
    return _plan_cached(inputs)


@dataclass(frozen=True)
class _LocalLayout:
    key: str
    model_dir: str
    source_path: str


def _plan_cached(inputs: PlanInputs) -> ModelDecision:
    cache = cache_layout(inputs.model, inputs.config)
    key = cache.cache_key
    layout = _LocalLayout(key=key, model_dir=cache.model_dir, source_path=local_path(inputs.source))
    facts, config = inputs.facts, inputs.config
    base = rebased(inputs.old, key)
    drift: DriftKind | None = None
    if facts.probe is not None:
        base, drift = with_drift(base, facts.probe, inputs)

    if facts.copy is not None:
        return _after_copy(inputs, base, layout, facts.copy)
    if facts.verify is not None:
        return _after_verify(inputs, base, layout, facts.verify)

    cached = facts.cached_file
    if cached is None:
        return _start_copy(inputs, base, layout, ActionKind.COPY_LOCAL)
    if (
        revalidation_due(base.last_revalidated, inputs.now, config.revalidate_interval)
        and facts.probe is None
    ):
        action = ModelAction(
            kind=ActionKind.PROBE_FINGERPRINT,
            source_kind=SourceKind.LOCAL,
            source=layout.source_path,
            target=spec_target(inputs.model),
        )
        return ModelDecision(status=inputs.old, action=action)
    if drift is DriftKind.DRIFTED and inputs.model.spec.refresh_policy == "OnChange":
        return _start_copy(inputs, base, layout, ActionKind.REFETCH)

    describes_file = base.path == cached.path and bool(base.sha256)
    expected = inputs.model.spec.sha256
    if describes_file and expected and (base.sha256 or "").lower() != expected.lower():
        # spec.sha256 changed since this copy was verified: the cached bytes are not the wanted ones.
        return _start_copy(inputs, base, layout, ActionKind.REFETCH)
    canonical = canonical_basename(
        inputs.model.metadata.name or "", base.gguf.model_name if base.gguf else None
    )
    if describes_file and cached.basename == canonical:
        stored = StoredFile(path=cached.path, size=cached.size, sha256=base.sha256, gguf=base.gguf)
        return _ready_from_cache(inputs, base, stored)
    action = ModelAction(
        kind=ActionKind.VERIFY,
        source_kind=SourceKind.LOCAL,
        source=layout.source_path,
        model_dir=layout.model_dir,
        model_name=inputs.model.metadata.name or "",
        cached_path=cached.path,
        expected_sha256=expected,
        # Hashing gigabytes is the expensive part; skip it when status already holds this file's hash.
        hash_file=not describes_file,
        target=spec_target(inputs.model),
    )
    return ModelDecision(status=inputs.old, action=action)


def _after_verify(
    inputs: PlanInputs, base: ModelStatus, layout: _LocalLayout, result: CopyResult
) -> ModelDecision:
    if isinstance(result, StoredFile):
        return _ready_from_cache(inputs, base, result)
    if result.kind in _RECOPY_AFTER_VERIFY:
        return _start_copy(inputs, base, layout, ActionKind.COPY_LOCAL)
    return failed(inputs, base, cond.COPY_FAILED, result.message, BACKOFF)


def _start_copy(
    inputs: PlanInputs, base: ModelStatus, layout: _LocalLayout, kind: ActionKind
) -> ModelDecision:
    status = base.model_copy(
        update={
            "phase": "Copying",
            "cache_key": layout.key,
            "accelerator_ready": inputs.accelerator_ready,
            "conditions": cond.mark_progressing(
                base.conditions,
                reason=cond.COPY_STARTED,
                message=cond.MSG_COPY_STARTED,
                clear_degraded=False,
                now=inputs.now,
                generation=inputs.generation,
            ),
        }
    )
    action = ModelAction(
        kind=kind,
        source_kind=SourceKind.LOCAL,
        source=layout.source_path,
        model_dir=layout.model_dir,
        model_name=inputs.model.metadata.name or "",
        expected_sha256=inputs.model.spec.sha256,
        target=spec_target(inputs.model),
    )
    return ModelDecision(status=status, action=action)


def _after_copy(
    inputs: PlanInputs, base: ModelStatus, layout: _LocalLayout, result: CopyResult
) -> ModelDecision:
    if isinstance(result, FetchError):
        return _copy_failed(inputs, base, result)
    conditions = cond.mark_source_drifted(
        base.conditions, drifted=False, source=inputs.source, now=inputs.now, generation=inputs.generation
    )
    conditions = cond.mark_ready(
        conditions,
        reason=cond.MODEL_READY,
        message=cond.MSG_MODEL_READY,
        superseded_message=cond.MSG_SUPERSEDED_CACHED,
        now=inputs.now,
        generation=inputs.generation,
    )
    status = base.model_copy(
        update={
            "phase": PHASE_READY,
            "path": result.path,
            "size": format_size(result.size),
            "cache_key": layout.key,
            "sha256": result.sha256,
            "gguf": result.gguf,
            "accelerator_ready": inputs.accelerator_ready,
            # The copy itself is the freshest fingerprint of a local source: its size.
            "source_e_tag": None,
            "source_content_length": result.source_size,
            "last_revalidated": inputs.now,
            "conditions": conditions,
        }
    )
    return ModelDecision(
        status=status,
        requeue=Requeue(after=inputs.config.revalidate_interval),
    )


def _copy_failed(inputs: PlanInputs, base: ModelStatus, error: FetchError) -> ModelDecision:
    if error.kind is FetchFailure.ESCAPES_ROOTS:
        # The files on disk can change without a spec edit: look again on the fixed interval.
        return failed(inputs, base, cond.INVALID_SOURCE, error.message, Requeue(after=FETCH_FAILURE_REQUEUE))
    if error.kind is FetchFailure.INTEGRITY_MISMATCH:
        # The same bytes will fail the same way: retry on the fixed interval, not in a tight backoff.
        return failed(
            inputs, base, cond.INTEGRITY_CHECK_FAILED, error.message, Requeue(after=FETCH_FAILURE_REQUEUE)
        )
    requeue = Requeue(after=FETCH_FAILURE_REQUEUE) if error.kind in _UNRECOVERABLE else BACKOFF
    return failed(inputs, base, cond.COPY_FAILED, error.message, requeue)


def _ready_from_cache(inputs: PlanInputs, base: ModelStatus, stored: StoredFile) -> ModelDecision:
    """A file already in the cache serves the Model: `ModelCached`, unless it was Ready from this
    cache already, in which case the existing Available condition (e.g. `ModelReady`) stays put.
    """
    available = find_condition(base.conditions, cond.AVAILABLE)
    keep = (
        available is not None
        and available.status == "True"
        and available.reason in (cond.MODEL_READY, cond.MODEL_CACHED)
        and base.phase == PHASE_READY
    )
    reason, message = (
        (available.reason, available.message)
        if keep and available
        else (cond.MODEL_CACHED, cond.MSG_MODEL_CACHED)
    )
    status = base.model_copy(
        update={
            "phase": PHASE_READY,
            "path": stored.path,
            "size": format_size(stored.size),
            "sha256": stored.sha256 or base.sha256,
            "gguf": stored.gguf or base.gguf,
            "accelerator_ready": inputs.accelerator_ready,
            "conditions": cond.mark_ready(
                base.conditions,
                reason=reason,
                message=message,
                superseded_message=cond.MSG_SUPERSEDED_CACHED,
                now=inputs.now,
                generation=inputs.generation,
            ),
        }
    )
    requeue = Requeue(
        after=next_revalidation_in(status.last_revalidated, inputs.now, inputs.config.revalidate_interval)
    )
    return ModelDecision(status=status, requeue=requeue)
