"""The sources the model downloader fetches: http(s) URLs, a Hugging Face repository's `files`,
s3:// objects (plan/model/remote.py says where each file comes from). The pods' downloader, or a
prefetch Job (plan/model/prefetch_plan.py), fetches; the controller only looks: it sizes every
file and reports drift on the revalidation interval (a HEAD each), and before the first Ready it
reads the model file's GGUF header with Range requests (never the whole file). The three kinds
differ in where their bytes are and how a request is signed, not in what the controller decides.

A header the file's own bytes make unusable (not GGUF, beyond the reader's bounds, a Range
answer no file can give) fails the Model, and that failure stands: the header is not read again
until the spec changes or a revalidation finds another file (ETag or size). A retry with backoff
would fetch the same bytes to fail the same way (105 requests in 2 minutes, measured).
"""

from dataclasses import dataclass

from llmkube.api.meta import Condition
from llmkube.api.model import ModelStatus
from llmkube.plan.conditions.standard import find_condition
from llmkube.plan.model import conditions as cond
from llmkube.plan.model.decision import FETCH_FAILURE_REQUEUE, ActionKind, ModelAction, ModelDecision, Requeue
from llmkube.plan.model.drift import (
    DriftKind,
    decide_drift,
    next_revalidation_in,
    revalidation_due,
    with_drift,
)
from llmkube.plan.model.facts import HeaderFailure, ModelFacts, ProbeFailure, RemoteHeader
from llmkube.plan.model.inputs import PlanInputs, rebased, spec_target
from llmkube.plan.model.phases import PHASE_READY, failed, ready_without_download
from llmkube.plan.model.prefetch_plan import with_prefetch
from llmkube.plan.model.remote import RemoteSource
from llmkube.plan.model.size import format_size
from llmkube.plan.model.source import cache_key

# Header reads that failed because of what the file (or its server) says: the same file says the
# same again, so the Model fails, and the header is not read again until the spec or the file's
# fingerprint changes. Any other failure (a timeout, a refused connection) only leaves the
# metadata out, as before.
_HEADER_VERDICTS = {
    HeaderFailure.NOT_GGUF: (cond.INVALID_MODEL_FILE, cond.msg_invalid_model_file),
    HeaderFailure.HEADER_TOO_LARGE: (cond.INVALID_MODEL_FILE, cond.msg_invalid_model_file),
    HeaderFailure.INVALID_RESPONSE: (cond.INVALID_SOURCE_RESPONSE, cond.msg_invalid_source_response),
}
# Failures that stand until the spec or the file changes (see _while_standing).
_STANDING_REASONS = frozenset({cond.INVALID_MODEL_FILE, cond.INVALID_SOURCE_RESPONSE, cond.STATUS_REJECTED})
# spec.format values whose file is GGUF (unset means gguf, the schema's default).
_GGUF_FORMATS = frozenset({None, "gguf"})
# Answers that say the file cannot be had (these credentials, or none, are refused; it is not
# there): before a Model's first Ready they fail it, looked at again on the fixed interval. Once
# it was Ready they are a revalidation that told nothing (the cache still holds the files).
_DENIED_STATUSES = {401: cond.SOURCE_UNAUTHORIZED, 403: cond.SOURCE_UNAUTHORIZED, 404: cond.SOURCE_NOT_FOUND}
_DENIED_PROBES = {
    ProbeFailure.UNAUTHORIZED: cond.SOURCE_UNAUTHORIZED,
    ProbeFailure.NOT_FOUND: cond.SOURCE_NOT_FOUND,
}


@dataclass(frozen=True)
class _Judge:
    """Nothing more to read: judge the source on `base` and the facts (the header's too, if wanted)."""

    base: ModelStatus
    want_header: bool


def plan_downloaded(inputs: PlanInputs, remote: RemoteSource) -> ModelDecision:
    key = cache_key(inputs.source)
    base = rebased(inputs.old, key)
    source_changed = base is not inputs.old
    base = base.model_copy(update={"staged_files": list(remote.staged) or None})
    due = revalidation_due(base.last_revalidated, inputs.now, inputs.config.revalidate_interval)
    reads_header = inputs.config.read_remote_gguf and inputs.model.spec.format in _GGUF_FORMATS
    file_failure = None if source_changed else _file_failure(base)
    if file_failure is not None and file_failure.observed_generation == inputs.generation:
        # It stands until the spec changes (or the file: _while_standing).
        step = _while_standing(inputs, remote, base, due, reads_header)
    else:
        step = _before_judging(
            inputs, remote, base, due, reads_header, file_failure is not None, source_changed
        )
    if isinstance(step, ModelDecision):
        return step
    return _judged(inputs, remote, step, key, source_changed)


def _while_standing(
    inputs: PlanInputs, remote: RemoteSource, base: ModelStatus, due: bool, reads_header: bool
) -> ModelDecision | _Judge:
    """A failure for what the file said, of this spec: kept while the file is the same one."""
    facts, interval = inputs.facts, inputs.config.revalidate_interval
    if facts.probe is None:
        if not due:
            after = next_revalidation_in(base.last_revalidated, inputs.now, interval)
            return ModelDecision(status=base, requeue=Requeue(after=after))
        return _probe(inputs, remote, ActionKind.PROBE_FINGERPRINT)
    outcome = decide_drift(base.source_e_tag, base.source_content_length, facts.probe)
    if outcome.kind in (DriftKind.IN_SYNC, DriftKind.INDETERMINATE) and _refusal(facts) is None:
        status, _ = with_drift(base, facts.probe, inputs)
        after = next_revalidation_in(status.last_revalidated, inputs.now, interval)
        return ModelDecision(status=status, requeue=Requeue(after=after))
    # Another file (or no fingerprint was kept to tell): judged afresh, against a new baseline.
    if reads_header and facts.remote_header is None and _refusal(facts) is None:
        return _probe(inputs, remote, ActionKind.READ_HEADER)
    return _Judge(base.model_copy(update={"source_e_tag": None, "source_content_length": None}), reads_header)


def _before_judging(
    inputs: PlanInputs,
    remote: RemoteSource,
    base: ModelStatus,
    due: bool,
    reads_header: bool,
    failed_before: bool,
    source_changed: bool,
) -> ModelDecision | _Judge:
    """The probe (and header read) a judgment needs first, if it is due."""
    facts = inputs.facts
    # Only before the first Ready for this source: the storage planner names the cached file
    # after gguf.modelName, so metadata appearing later would rename (and re-download) a file
    # pods already use. A new source gets a new cache directory anyway.
    want_header = reads_header and base.gguf is None and (base.phase != PHASE_READY or source_changed)
    if due and facts.probe is None:
        return _probe(inputs, remote, ActionKind.PROBE_FINGERPRINT, read_header=want_header)
    if failed_before and reads_header and facts.remote_header is None and _refusal(facts) is None:
        # The spec changed since the file failed, within the revalidation interval: read it again.
        return _probe(inputs, remote, ActionKind.READ_HEADER)
    return _Judge(base, want_header)


def _judged(
    inputs: PlanInputs, remote: RemoteSource, judge: _Judge, key: str, source_changed: bool
) -> ModelDecision:
    base, facts = judge.base, inputs.facts
    refused = _refusal(facts)
    if refused is not None:
        # Nothing was sent to the host. Looked at again on the fixed interval: a name may resolve
        # elsewhere later (and a restart with another allowlist reconciles every Model).
        message = cond.msg_source_not_allowed(inputs.source, refused)
        return failed(inputs, base, cond.SOURCE_NOT_ALLOWED, message, Requeue(after=FETCH_FAILURE_REQUEUE))
    first_judgment = base.phase != PHASE_READY or source_changed
    denial = _denial(inputs, remote) if first_judgment else None
    if denial is not None:
        return failed(inputs, base, denial[0], denial[1], Requeue(after=FETCH_FAILURE_REQUEUE))
    header = facts.remote_header if judge.want_header else None
    if header is not None and header.failure in _HEADER_VERDICTS:
        return _header_verdict(inputs, base, header)
    if header is not None and header.metadata is not None:
        base = base.model_copy(update={"gguf": header.metadata})
    return _ready(inputs, remote, base, key, header)


def _ready(
    inputs: PlanInputs, remote: RemoteSource, base: ModelStatus, key: str, header: RemoteHeader | None
) -> ModelDecision:
    """Ready for the pods' downloader (or the host agent's), sized and fingerprinted as far as
    the controller could tell, then as the prefetch Job has it."""
    facts = inputs.facts
    message = cond.MSG_WORKLOAD_RESOLVED_METAL if inputs.is_metal else cond.MSG_WORKLOAD_RESOLVED
    if _credentials_unreadable(facts):
        unread = (
            cond.msg_identity_credentials(remote.identity.role_arn)
            if remote.identity is not None
            else cond.msg_credentials_unreadable(remote.secret)
        )
        message = f"{message}; {unread}"
    status = ready_without_download(inputs, base, key, cond.WORKLOAD_RESOLVED, message)
    drift = None
    if facts.probe is not None:
        status, drift = with_drift(status, facts.probe, inputs)
    status = status.model_copy(update={"size": _known_size(status, facts, header)})
    after = next_revalidation_in(status.last_revalidated, inputs.now, inputs.config.revalidate_interval)
    decision = ModelDecision(status=status, requeue=Requeue(after=after))
    return with_prefetch(inputs, decision, remote, drift)


def _header_verdict(inputs: PlanInputs, base: ModelStatus, header: RemoteHeader) -> ModelDecision:
    """Failed for what the file says, with the fingerprint of the file that said it (what a
    revalidation compares to decide whether to read the header again)."""
    assert header.failure is not None
    reason, describe = _HEADER_VERDICTS[header.failure]
    if inputs.facts.probe is not None:
        base, _ = with_drift(base, inputs.facts.probe, inputs)
    after = next_revalidation_in(base.last_revalidated, inputs.now, inputs.config.revalidate_interval)
    return failed(inputs, base, reason, describe(inputs.source, header.detail), Requeue(after=after))


def _file_failure(base: ModelStatus) -> Condition | None:
    """The Degraded condition of a Model that failed for what its file said (a header the
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


def _probe(
    inputs: PlanInputs, remote: RemoteSource, kind: ActionKind, read_header: bool = False
) -> ModelDecision:
    """Probe every file (or read the model file's header), the status unchanged meanwhile."""
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
        identity=remote.identity.role_arn if remote.identity is not None else "",
    )
    return ModelDecision(status=inputs.old, action=action)


def _denial(inputs: PlanInputs, remote: RemoteSource) -> tuple[str, str] | None:
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
