"""plan_model: the Model reconcile as one pure function.

The controller runs a short loop: observe → `plan_model` → perform the returned action with the
`modelsource` helpers → add the result to the facts → `plan_model` again, until the action is NONE.
Every status the loop produces is final or honestly provisional (`Copying`), and the loop ends
because an action is never requested once its result is among the facts.

Where llmkube differs from the reference operator (docs/differences.md#models):
* conditions follow standard semantics (Progressing/Degraded cleared once Ready, lastTransitionTime
  only on flips) and are written in one status update, not one per condition;
* the state is re-derived on every reconcile (level-triggered): a Ready PVC model whose claim
  disappears becomes Failed, a Ready cached model whose file vanished is copied again;
* bad input never hot-loops: unsupported and malformed sources fail without a requeue (a spec edit
  brings the Model back), unrecoverable copy errors and checksum mismatches retry every 5 minutes;
* fields that described an earlier `spec.source` are dropped when the source changes.
"""

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from llmkube.api.meta import Condition
from llmkube.api.model import Model, ModelStatus
from llmkube.plan.conditions.standard import find_condition, keep_transition_times, remove_condition
from llmkube.plan.conditions.summary import READY, summarize
from llmkube.plan.model import conditions as cond
from llmkube.plan.model.accelerator import accelerator_ready
from llmkube.plan.model.cache_clear import plan_cache_clear, refilled
from llmkube.plan.model.cache_layout import cache_layout, is_controller_cached
from llmkube.plan.model.decision import (
    BACKOFF,
    FETCH_FAILURE_REQUEUE,
    NO_REQUEUE,
    PREFETCH_PROGRESS_REQUEUE,
    PREFETCH_REFUSED_MAX_REQUEUE,
    PREFETCH_REFUSED_MIN_REQUEUE,
    PVC_NOT_BOUND_REQUEUE,
    PVC_NOT_FOUND_REQUEUE,
    ActionKind,
    ActionTarget,
    ModelAction,
    ModelDecision,
    ModelPlanConfig,
    PrefetchPlan,
    Requeue,
)
from llmkube.plan.model.drift import DriftKind, decide_drift, next_revalidation_in, revalidation_due
from llmkube.plan.model.facts import (
    FetchError,
    FetchFailure,
    HeaderFailure,
    ModelFacts,
    PrefetchJob,
    ProbeFailure,
    ProbeOutcome,
    RemoteHeader,
    StoredFile,
)
from llmkube.plan.model.fileset import FileSetProblem, StagingPlan, staging_plan
from llmkube.plan.model.local_roots import local_source_violation
from llmkube.plan.model.prefetch import prefetch_digest, prefetch_job, prefetch_job_name, prefetch_result
from llmkube.plan.model.remote import RemoteSource, remote_source
from llmkube.plan.model.size import format_size
from llmkube.plan.model.source import (
    REMOTE_KINDS,
    SourceKind,
    cache_key,
    canonical_basename,
    classify_source,
    local_path,
    parse_hf_source,
    parse_pvc_source,
)
from llmkube.plan.model.status import status_changed
from llmkube.plan.tenancy import NamespacePolicy, local_source_refusal

PHASE_READY = "Ready"
#: the remote sources the host agent downloads itself (it signs no S3 request)
METAL_FETCHED = frozenset({SourceKind.HTTP, SourceKind.HF})
PVC_BOUND = "Bound"
PVC_MOUNT_ROOT = "/model-source"

# Copy failures that will not fix themselves: retried on a fixed interval, never through the rate
# limiter, whose first retries come milliseconds apart.
_UNRECOVERABLE = frozenset({FetchFailure.NOT_FOUND, FetchFailure.PERMISSION_DENIED, FetchFailure.NOT_A_FILE})
# A failed verification of a cached file that a fresh copy repairs (the helper already removed it).
_RECOPY_AFTER_VERIFY = frozenset({FetchFailure.NOT_FOUND, FetchFailure.INTEGRITY_MISMATCH})
# Header reads that failed because of what the file (or its server) says: the same file says the
# same again, so the Model fails, and the header is not read again until the spec or the file's
# fingerprint changes. Any other failure (a timeout, a refused connection) only leaves the
# metadata out, as before.
_HEADER_VERDICTS = {
    HeaderFailure.NOT_GGUF: (cond.INVALID_MODEL_FILE, cond.msg_invalid_model_file),
    HeaderFailure.HEADER_TOO_LARGE: (cond.INVALID_MODEL_FILE, cond.msg_invalid_model_file),
    HeaderFailure.INVALID_RESPONSE: (cond.INVALID_SOURCE_RESPONSE, cond.msg_invalid_source_response),
}
# Failures of an http Model that stand until its spec or its file changes (see _plan_standing).
_STANDING_REASONS = frozenset({cond.INVALID_MODEL_FILE, cond.INVALID_SOURCE_RESPONSE, cond.STATUS_REJECTED})
# spec.format values whose file is GGUF (unset means gguf, the schema's default).
_GGUF_FORMATS = frozenset({None, "gguf"})


@dataclass(frozen=True)
class _Inputs:
    model: Model
    facts: ModelFacts
    now: datetime
    config: ModelPlanConfig
    old: ModelStatus

    @property
    def source(self) -> str:
        return self.model.spec.source

    @property
    def generation(self) -> int | None:
        return self.model.metadata.generation

    @property
    def accelerator_ready(self) -> bool:
        return accelerator_ready(
            self.model.spec.hardware, self.facts.gpu_capacity, self.config.intel_gpu_resource
        )

    @property
    def is_metal(self) -> bool:
        hardware = self.model.spec.hardware
        return hardware is not None and hardware.accelerator == "metal"


def spec_target(model: Model) -> ActionTarget:
    """What the Model's actions are about now (ModelAction.target)."""
    return ActionTarget(source=model.spec.source, sha256=model.spec.sha256)


def _current(facts: ModelFacts, target: ActionTarget) -> ModelFacts:
    """The facts without results, or an action in flight, that are about another spec."""
    if facts.results_for is not None and facts.results_for != target:
        facts = replace(facts, probe=None, remote_header=None, copy=None, verify=None, results_for=None)
    if facts.pending is not None and facts.pending.target != target:
        facts = replace(facts, pending=None)
    return facts


def plan_model(
    model: Model, facts: ModelFacts, now: datetime, config: ModelPlanConfig | None = None
) -> ModelDecision:
    facts = _current(facts, spec_target(model))
    inputs = _Inputs(model, facts, now, config or ModelPlanConfig(), model.status or ModelStatus())
    if facts.pending is not None:
        # Its result decides what comes next; until then the status says what it says.
        return ModelDecision(status=inputs.old, waiting=True)
    kind = classify_source(model.spec.source)
    files = staging_plan(model.spec)
    if isinstance(files, FileSetProblem) or (files is not None and not _stages_from(kind, inputs.is_metal)):
        problem = (
            files.text() if isinstance(files, FileSetProblem) else cond.msg_files_unsupported(inputs.source)
        )
        base = _rebased(inputs.old, "").model_copy(update={"staged_files": None})
        decision = _failed(inputs, base, cond.INVALID_FILE_SET, problem, NO_REQUEUE)
    elif kind is SourceKind.PVC:
        decision = _plan_pvc(inputs)
    elif kind in (SourceKind.HUGGINGFACE, SourceKind.HF) and files is None:
        decision = _plan_repository(inputs)
    elif kind in REMOTE_KINDS or kind is SourceKind.HUGGINGFACE:
        remote = remote_source(model, inputs.config.hf_endpoint)
        if isinstance(remote, FileSetProblem):
            base = _rebased(inputs.old, "")
            decision = _failed(inputs, base, cond.INVALID_SOURCE, remote.message, NO_REQUEUE)
        elif remote is not None and inputs.is_metal and remote.kind not in METAL_FETCHED:
            base = _rebased(inputs.old, "")
            decision = _failed(
                inputs, base, cond.INVALID_SOURCE, cond.msg_metal_http_only(inputs.source), NO_REQUEUE
            )
        else:
            assert remote is not None  # every remote kind has files to fetch
            decision = _plan_remote(inputs, remote)
    elif is_controller_cached(model):
        violation = local_source_violation(
            model.spec.source, local_path(model.spec.source), inputs.config.local_source_roots
        )
        if violation is None and not facts.local_sources_allowed:
            violation = local_source_refusal(model.metadata.namespace or "", NamespacePolicy(known=True))
        if violation is None:
            decision = _plan_local(inputs)
        else:
            # Nothing is read, and nothing is retried: only a spec edit (or a restart with other
            # roots, which reconciles everything) can change the verdict.
            base = _rebased(inputs.old, "")
            decision = _failed(inputs, base, cond.INVALID_SOURCE, violation, NO_REQUEUE)
    elif kind is SourceKind.LOCAL:  # a local path on a metal model: the host agent reads it
        decision = _plan_runtime_resolved(inputs, cond.METAL_AGENT_MANAGED, cond.MSG_METAL_AGENT_MANAGED)
    else:
        decision = _failed(
            inputs,
            _rebased(inputs.old, ""),
            cond.INVALID_SOURCE,
            cond.msg_unsupported_source(inputs.source),
            NO_REQUEUE,
        )
    return _stamped(_with_cache_clear(decision, inputs), inputs)


def _with_cache_clear(decision: ModelDecision, inputs: _Inputs) -> ModelDecision:
    """`llmkube cache clear` (plan/model/cache_clear.py), once the source's own decision is made:
    its record in the status, its Job, and no prefetch Job while the files are being removed."""
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


def _stages_from(kind: SourceKind, metal: bool) -> bool:
    """Where `files` can be staged from: a repository, a bucket prefix, a base URL, a claim's
    directory (not from a local path, which the controller copies as one file); the host agent
    stages them from a Hugging Face repository only (its http(s) sources are one file)."""
    if metal:
        return kind in (SourceKind.HF, SourceKind.HUGGINGFACE)
    staged = (SourceKind.HF, SourceKind.HUGGINGFACE, SourceKind.S3, SourceKind.HTTP, SourceKind.PVC)
    return kind in staged


def _plan_repository(inputs: _Inputs) -> ModelDecision:
    """A whole Hugging Face repository (no files listed): the runtime resolves it (vLLM, TGI)."""
    if classify_source(inputs.source) is SourceKind.HF:
        parsed = parse_hf_source(inputs.source)
        if isinstance(parsed, str):
            return _failed(inputs, _rebased(inputs.old, ""), cond.INVALID_SOURCE, parsed, NO_REQUEUE)
    return _plan_runtime_resolved(inputs, cond.RUNTIME_RESOLVED, cond.MSG_RUNTIME_RESOLVED)


def _stamped(decision: ModelDecision, inputs: _Inputs) -> ModelDecision:
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
    # describes the Model's current spec (plan/model_gate.py), never from an older one.
    status = status.model_copy(update={"observed_generation": inputs.generation})
    last_updated = inputs.now if status_changed(inputs.old, status) else inputs.old.last_updated
    return replace(decision, status=status.model_copy(update={"last_updated": last_updated}))


def _rebased(old: ModelStatus, key: str) -> ModelStatus:
    """The status with everything that described an earlier `spec.source` dropped.

    The cache key is a hash of the source, so a different key means a different source: its path,
    hash, GGUF metadata and drift fingerprint would be lies about the new one.
    """
    if (old.cache_key or "") == key:
        return old
    return old.model_copy(
        update={
            "cache_key": key,
            "path": None,
            "size": None,
            "sha256": None,
            "gguf": None,
            "source_e_tag": None,
            "source_content_length": None,
            "last_revalidated": None,
            "staged_files": None,
            "conditions": remove_condition(old.conditions, cond.SOURCE_DRIFTED),
        }
    )


def _without_drift(status: ModelStatus) -> ModelStatus:
    """PVC, HuggingFace and metal-local sources cannot be probed: they carry no drift state."""
    return status.model_copy(
        update={
            "source_e_tag": None,
            "source_content_length": None,
            "last_revalidated": None,
            "conditions": remove_condition(status.conditions, cond.SOURCE_DRIFTED),
        }
    )


def _failed(inputs: _Inputs, base: ModelStatus, reason: str, message: str, requeue: Requeue) -> ModelDecision:
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


# --- pvc:// -------------------------------------------------------------------------------------


def _plan_pvc(inputs: _Inputs) -> ModelDecision:
    source = parse_pvc_source(inputs.source)
    key = cache_key(inputs.source)
    base = _without_drift(_rebased(inputs.old, key))
    if source is None:
        return _failed(
            inputs, base, cond.INVALID_SOURCE, cond.msg_invalid_pvc_source(inputs.source), NO_REQUEUE
        )
    phase = inputs.facts.pvc_phase
    if phase is None:
        namespace = inputs.model.metadata.namespace or ""
        message = cond.msg_pvc_not_found(source.claim, namespace)
        return _failed(inputs, base, cond.PVC_NOT_FOUND, message, Requeue(after=PVC_NOT_FOUND_REQUEUE))
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


# --- sources the workload resolves --------------------------------------------------------------


def _ready_without_download(
    inputs: _Inputs, base: ModelStatus, key: str, reason: str, message: str
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


def _plan_runtime_resolved(inputs: _Inputs, reason: str, message: str) -> ModelDecision:
    """HuggingFace repo ids (the runtime fetches) and metal local paths (the host agent loads)."""
    base = _without_drift(_rebased(inputs.old, "")).model_copy(update={"gguf": None})
    status = _ready_without_download(inputs, base, "", reason, message)
    return ModelDecision(status=status)


def _apply_drift(status: ModelStatus, probe: ProbeOutcome, inputs: _Inputs) -> tuple[ModelStatus, DriftKind]:
    outcome = decide_drift(status.source_e_tag, status.source_content_length, probe)
    if not outcome.revalidated:
        return status, outcome.kind
    conditions = cond.mark_source_drifted(
        status.conditions,
        drifted=outcome.kind is DriftKind.DRIFTED,
        source=inputs.source,
        now=inputs.now,
        generation=inputs.generation,
    )
    updated = status.model_copy(
        update={
            "source_e_tag": outcome.etag,
            "source_content_length": outcome.content_length,
            "last_revalidated": inputs.now,
            "conditions": conditions,
        }
    )
    return updated, outcome.kind


def _file_failure(base: ModelStatus) -> Condition | None:
    """The Degraded condition of an http Model that failed for what its file said (a header the
    controller refused, a status the API server refused), whatever spec it judged."""
    if base.phase != "Failed":
        return None
    degraded = find_condition(base.conditions, cond.DEGRADED)
    if degraded is None or degraded.status != "True" or degraded.reason not in _STANDING_REASONS:
        return None
    return degraded


def _refusal(facts: ModelFacts) -> str | None:
    """Why the egress policy refused the source (or a redirect), if it did."""
    if facts.probe is not None and facts.probe.failure is ProbeFailure.NOT_ALLOWED:
        return facts.probe.detail
    header = facts.remote_header
    if header is not None and header.failure is HeaderFailure.NOT_ALLOWED:
        return header.detail
    return None


def _probe_action(
    inputs: _Inputs, remote: RemoteSource, kind: ActionKind, read_header: bool = False
) -> ModelDecision:
    action = ModelAction(
        kind=kind,
        source_kind=remote.kind,
        source=remote.primary.location,
        read_header=read_header,
        target=spec_target(inputs.model),
        locations=tuple(file.location for file in remote.files),
        remote_kind=remote.kind,
        secret=remote.secret,
        namespace=inputs.model.metadata.namespace or "",
    )
    return ModelDecision(status=inputs.old, action=action)


# Answers that say the file cannot be had (these credentials, or none, are refused; it is not
# there): before a Model's first Ready they fail it, looked at again on the fixed interval. Once
# it was Ready they are a revalidation that told nothing (the cache still holds the files).
_DENIED_STATUSES = {401: cond.SOURCE_UNAUTHORIZED, 403: cond.SOURCE_UNAUTHORIZED, 404: cond.SOURCE_NOT_FOUND}
_DENIED_PROBES = {
    ProbeFailure.UNAUTHORIZED: cond.SOURCE_UNAUTHORIZED,
    ProbeFailure.NOT_FOUND: cond.SOURCE_NOT_FOUND,
}


def _denial(inputs: _Inputs, remote: RemoteSource) -> tuple[str, str] | None:
    """(reason, message) when the source said no, in its own words where it gave them."""
    probe, header = inputs.facts.probe, inputs.facts.remote_header
    if probe is not None and probe.failure is ProbeFailure.SECRET_NOT_FOUND:
        return cond.SOURCE_SECRET_NOT_FOUND, cond.msg_secret_not_found(remote.secret, probe.detail)
    if (
        header is not None
        and header.failure is HeaderFailure.HTTP_STATUS
        and header.http_status in _DENIED_STATUSES
    ):
        reason = _DENIED_STATUSES[header.http_status]
        return reason, cond.msg_source_denied(inputs.source, header.detail, reason)
    if probe is not None and probe.failure in _DENIED_PROBES:
        reason = _DENIED_PROBES[probe.failure]
        return reason, cond.msg_source_denied(inputs.source, probe.detail, reason)
    return None


def _credentials_unreadable(facts: ModelFacts) -> bool:
    return facts.probe is not None and facts.probe.failure is ProbeFailure.CREDENTIALS_UNREADABLE


def _known_size(base: ModelStatus, facts: ModelFacts, header: RemoteHeader | None) -> str | None:
    """Every file's bytes together, as the last probe found them (or the one file's, from a
    header read); else what status said, unless it said "0" (an earlier version's placeholder)."""
    probe = facts.probe
    total = probe.fingerprint.content_length if probe and probe.fingerprint else None
    if (
        total is None
        and header is not None
        and header.file_size is not None
        and len(base.staged_files or []) <= 1
    ):
        total = header.file_size
    if total is None:
        total = base.source_content_length
    if total:
        return format_size(total)
    return base.size if base.size not in (None, "", "0") else None


def _plan_remote(inputs: _Inputs, remote: RemoteSource) -> ModelDecision:
    """http(s), hf:// and s3://: the pods' downloader (or a prefetch Job) fetches; the controller
    sizes every file, reports drift and, before the first Ready, reads the model file's GGUF header
    with Range requests (never the whole file).

    A header the file's own bytes make unusable (not GGUF, beyond the reader's bounds, a Range
    answer no file can give) fails the Model, and that failure stands: the header is not read
    again until the spec changes or a revalidation finds another file (ETag or size). A retry with
    backoff would fetch the same bytes to fail the same way (105 requests in 2 minutes, measured).
    """
    key = cache_key(inputs.source)
    base = _rebased(inputs.old, key)
    source_changed = base is not inputs.old
    base = base.model_copy(update={"staged_files": list(remote.staged) or None})
    config, facts = inputs.config, inputs.facts
    due = revalidation_due(base.last_revalidated, inputs.now, config.revalidate_interval)
    reads_header = config.read_remote_gguf and inputs.model.spec.format in _GGUF_FORMATS
    file_failure = None if source_changed else _file_failure(base)
    # It stands until the spec changes (or the file: below).
    standing = (
        file_failure if file_failure and file_failure.observed_generation == inputs.generation else None
    )
    if standing is not None:
        if facts.probe is None:
            if not due:
                after = next_revalidation_in(base.last_revalidated, inputs.now, config.revalidate_interval)
                return ModelDecision(status=base, requeue=Requeue(after=after))
            return _probe_action(inputs, remote, ActionKind.PROBE_FINGERPRINT)
        outcome = decide_drift(base.source_e_tag, base.source_content_length, facts.probe)
        if outcome.kind in (DriftKind.IN_SYNC, DriftKind.INDETERMINATE) and _refusal(facts) is None:
            status, _ = _apply_drift(base, facts.probe, inputs)
            after = next_revalidation_in(status.last_revalidated, inputs.now, config.revalidate_interval)
            return ModelDecision(status=status, requeue=Requeue(after=after))
        # Another file (or no fingerprint was kept to tell): judged afresh, against a new baseline.
        if reads_header and facts.remote_header is None and _refusal(facts) is None:
            return _probe_action(inputs, remote, ActionKind.READ_HEADER)
        base = base.model_copy(update={"source_e_tag": None, "source_content_length": None})
        want_header = reads_header
    else:
        # Only before the first Ready for this source: the storage planner names the cached file
        # after gguf.modelName, so metadata appearing later would rename (and re-download) a file
        # pods already use. A new source gets a new cache directory anyway.
        want_header = reads_header and base.gguf is None and (base.phase != PHASE_READY or source_changed)
        if due and facts.probe is None:
            return _probe_action(inputs, remote, ActionKind.PROBE_FINGERPRINT, read_header=want_header)
        if (
            file_failure is not None
            and reads_header
            and facts.remote_header is None
            and _refusal(facts) is None
        ):
            # The spec changed since the file failed, within the revalidation interval: read it again.
            return _probe_action(inputs, remote, ActionKind.READ_HEADER)
    refused = _refusal(facts)
    if refused is not None:
        # Nothing was sent to the host. Looked at again on the fixed interval: a name may resolve
        # elsewhere later (and a restart with another allowlist reconciles every Model).
        message = cond.msg_source_not_allowed(inputs.source, refused)
        return _failed(inputs, base, cond.SOURCE_NOT_ALLOWED, message, Requeue(after=FETCH_FAILURE_REQUEUE))
    first_judgment = base.phase != PHASE_READY or source_changed
    denial = _denial(inputs, remote) if first_judgment else None
    if denial is not None:
        return _failed(inputs, base, denial[0], denial[1], Requeue(after=FETCH_FAILURE_REQUEUE))
    header = facts.remote_header if want_header else None
    if header is not None and header.failure in _HEADER_VERDICTS:
        return _header_verdict(inputs, base, header)
    if header is not None and header.metadata is not None:
        base = base.model_copy(update={"gguf": header.metadata})
    message = cond.MSG_WORKLOAD_RESOLVED_METAL if inputs.is_metal else cond.MSG_WORKLOAD_RESOLVED
    if _credentials_unreadable(facts):
        message = f"{message}; {cond.msg_credentials_unreadable(remote.secret)}"
    status = _ready_without_download(inputs, base, key, cond.WORKLOAD_RESOLVED, message)
    drift = None
    if facts.probe is not None:
        status, drift = _apply_drift(status, facts.probe, inputs)
    status = status.model_copy(update={"size": _known_size(status, facts, header)})
    after = next_revalidation_in(status.last_revalidated, inputs.now, config.revalidate_interval)
    decision = ModelDecision(status=status, requeue=Requeue(after=after))
    return _with_prefetch(inputs, decision, remote, drift)


def _header_verdict(inputs: _Inputs, base: ModelStatus, header: RemoteHeader) -> ModelDecision:
    """Failed for what the file says, with the fingerprint of the file that said it (what a
    revalidation compares to decide whether to read the header again)."""
    assert header.failure is not None
    reason, describe = _HEADER_VERDICTS[header.failure]
    if inputs.facts.probe is not None:
        base, _ = _apply_drift(base, inputs.facts.probe, inputs)
    after = next_revalidation_in(base.last_revalidated, inputs.now, inputs.config.revalidate_interval)
    return _failed(inputs, base, reason, describe(inputs.source, header.detail), Requeue(after=after))


# --- prefetch: a Job downloads into the namespace's cache before any service needs it ----------


def _with_prefetch(
    inputs: _Inputs, decision: ModelDecision, remote: RemoteSource, drift: DriftKind | None
) -> ModelDecision:
    """The Ready status of a remote Model, held back while its prefetch Job downloads: Downloading
    (with the Job's progress), then Ready with the cache key once the files are in the cache, or
    Failed with the downloader's last words. Jobs of another spec (or of prefetch: false) go."""
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
        failed = _failed(
            inputs, status, cond.PREFETCH_FAILED, cond.msg_prefetch_failed(name, job.message), NO_REQUEUE
        )
        return replace(failed, prefetch=plan)
    return replace(decision, status=_prefetched(inputs, status, job), prefetch=plan)


def _refused_requeue(inputs: _Inputs) -> Requeue:
    """Looked at again after as long as the Model has waited (a backoff without a counter: since
    its written Ready condition turned False), within bounds; never a spin."""
    ready = find_condition(inputs.old.conditions, READY)
    waited = timedelta(0)
    if ready is not None and ready.status == "False":
        waited = inputs.now - ready.last_transition_time
    return Requeue(after=min(max(waited, PREFETCH_REFUSED_MIN_REQUEUE), PREFETCH_REFUSED_MAX_REQUEUE))


def _downloading(inputs: _Inputs, status: ModelStatus, reason: str, message: str) -> ModelStatus:
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


def _prefetched(inputs: _Inputs, status: ModelStatus, job: PrefetchJob) -> ModelStatus:
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


# --- local paths: the controller keeps its own copy ---------------------------------------------


@dataclass(frozen=True)
class _LocalLayout:
    key: str
    model_dir: str
    source_path: str


def _plan_local(inputs: _Inputs) -> ModelDecision:
    cache = cache_layout(inputs.model, inputs.config)
    key = cache.cache_key
    layout = _LocalLayout(key=key, model_dir=cache.model_dir, source_path=local_path(inputs.source))
    facts, config = inputs.facts, inputs.config
    base = _rebased(inputs.old, key)
    drift: DriftKind | None = None
    if facts.probe is not None:
        base, drift = _apply_drift(base, facts.probe, inputs)

    if facts.copy is not None:
        return _after_copy(inputs, base, layout, facts.copy)
    if facts.verify is not None:
        if isinstance(facts.verify, StoredFile):
            return _ready_from_cache(inputs, base, facts.verify)
        if facts.verify.kind in _RECOPY_AFTER_VERIFY:
            return _start_copy(inputs, base, layout, ActionKind.COPY_LOCAL)
        return _failed(inputs, base, cond.COPY_FAILED, facts.verify.message, BACKOFF)

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


def _start_copy(inputs: _Inputs, base: ModelStatus, layout: _LocalLayout, kind: ActionKind) -> ModelDecision:
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
    inputs: _Inputs, base: ModelStatus, layout: _LocalLayout, result: StoredFile | FetchError
) -> ModelDecision:
    if isinstance(result, FetchError):
        if result.kind is FetchFailure.ESCAPES_ROOTS:
            # The files on disk can change without a spec edit: look again on the fixed interval.
            return _failed(
                inputs, base, cond.INVALID_SOURCE, result.message, Requeue(after=FETCH_FAILURE_REQUEUE)
            )
        if result.kind is FetchFailure.INTEGRITY_MISMATCH:
            # The same bytes will fail the same way: retry on the fixed interval, not in a tight backoff.
            return _failed(
                inputs,
                base,
                cond.INTEGRITY_CHECK_FAILED,
                result.message,
                Requeue(after=FETCH_FAILURE_REQUEUE),
            )
        requeue = Requeue(after=FETCH_FAILURE_REQUEUE) if result.kind in _UNRECOVERABLE else BACKOFF
        return _failed(inputs, base, cond.COPY_FAILED, result.message, requeue)
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


def _ready_from_cache(inputs: _Inputs, base: ModelStatus, stored: StoredFile) -> ModelDecision:
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
