"""Model conditions: types, reasons and messages as the reference operator writes them, with standard
semantics (not the reference's): `lastTransitionTime` moves only on a flip, and the three primary
conditions always describe the present — Progressing and Degraded turn False/Superseded once the Model
is Ready (never removed: the rule in plan/conditions/standard.py), Available is False whenever it is not.
`Ready`, `Reconciling` and `Stalled` summarize them for tools (plan/conditions/summary.py, `model_summary`).
"""

import json
from collections.abc import Sequence
from datetime import datetime

from llmkube.api.meta import Condition, ConditionStatus
from llmkube.plan.conditions.standard import set_condition, update_condition_if_present
from llmkube.plan.conditions.summary import Summary, message_of, reason_of
from llmkube.plan.model.bounds import bounded_message
from llmkube.plan.model.size import format_size

AVAILABLE = "Available"
PROGRESSING = "Progressing"
DEGRADED = "Degraded"
SOURCE_DRIFTED = "SourceDrifted"

# Reasons, the reference operator's.
PVC_NOT_FOUND = "PVCNotFound"
PVC_NOT_BOUND = "PVCNotBound"
PVC_MODEL_READY = "PVCModelReady"
RUNTIME_RESOLVED = "RuntimeResolved"
WORKLOAD_RESOLVED = "WorkloadResolved"
METAL_AGENT_MANAGED = "MetalAgentManaged"
MODEL_CACHED = "ModelCached"
MODEL_READY = "ModelReady"
COPY_STARTED = "CopyStarted"
COPY_FAILED = "CopyFailed"
# The reference operator's DownloadStarted and DownloadFailed are never set: llmkube never
# downloads in the controller, and an unknown source is InvalidSource.
INTEGRITY_CHECK_FAILED = "IntegrityCheckFailed"
INVALID_SOURCE = "InvalidSource"
# llmkube's, for http(s) sources the controller refused to fetch from or to believe:
SOURCE_NOT_ALLOWED = "SourceNotAllowed"  # the egress policy refused the host or a redirect
INVALID_MODEL_FILE = "InvalidModelFile"  # not GGUF, or a header beyond the reader's bounds
INVALID_SOURCE_RESPONSE = "InvalidSourceResponse"  # a Range answer no file can give
STATUS_REJECTED = "StatusRejected"  # the API server refused the status planned from the source
# spec.files / spec.mmproj that cannot be staged (the reference's reason)
INVALID_FILE_SET = "InvalidFileSet"
# llmkube's, for remote sources that answered no before the Model was ever Ready:
SOURCE_UNAUTHORIZED = "SourceUnauthorized"  # 401 or 403: these credentials (or none) are refused
SOURCE_NOT_FOUND = "SourceNotFound"  # 404
SOURCE_SECRET_NOT_FOUND = "SourceSecretNotFound"  # the Secret spec.sourceSecretRef names is not there
# llmkube's, for a Hugging Face repository named with spec.quantization and no spec.files:
QUANTIZATION_NOT_FOUND = "QuantizationNotFound"  # the repository has no GGUF file of it
NO_GGUF_FILE = "NoGGUFFile"  # the repository holds no GGUF model file at all
REPOSITORY_NOT_LISTED = "RepositoryNotListed"  # the Hub did not list the repository's files
QUANTIZATION_RESOLVED = "QuantizationResolved"  # the file(s) of spec.quantization were chosen
# Prefetch (the reference's reasons)
PREFETCH_STARTED = "PrefetchStarted"
PREFETCH_RUNNING = "PrefetchRunning"
PREFETCH_FAILED = "PrefetchFailed"
# llmkube's: the Job controller cannot create the Job's pod (a quota, a LimitRange, admission)
PREFETCH_POD_NOT_CREATED = "PrefetchPodNotCreated"
MODEL_PREFETCHED = "ModelPrefetched"
SUPERSEDED = "Superseded"
IN_SYNC = "InSync"
UPSTREAM_CHANGED = "UpstreamChanged"

# Messages, the reference operator's.
MSG_RUNTIME_RESOLVED = "Source is runtime-resolved (e.g., HuggingFace repo ID); runtime will fetch at startup"
MSG_WORKLOAD_RESOLVED = (
    "Source is a remote URL; the InferenceService Pod's init container will fetch the model "
    "into the per-namespace model cache PVC at startup"
)
MSG_WORKLOAD_RESOLVED_METAL = (
    "Source is a remote URL; the host metal-agent will fetch the model into its model store "
    "when the InferenceService is reconciled"
)
MSG_METAL_AGENT_MANAGED = (
    "Source is a local path on the Metal node; the host metal-agent loads the model directly"
)
MSG_MODEL_CACHED = "Model found in cache"
MSG_MODEL_READY = "Model downloaded and cached"
MSG_COPY_STARTED = "Started copying local model"
MSG_SUPERSEDED_NO_DOWNLOAD = "Model reached Ready without a controller-side download"
MSG_SUPERSEDED_CACHED = "Model reached Ready from the controller's cache"
MSG_IN_SYNC = "Cached model matches the upstream source"
MSG_SUPERSEDED_PREFETCHED = "Model reached Ready once its files were in the namespace's model cache"


def go_quote(text: str) -> str:
    """Go's `%q` for the strings we quote (names, paths, URLs): double quotes, backslash escapes."""
    return json.dumps(text, ensure_ascii=False)


def msg_pvc_not_found(claim: str, namespace: str) -> str:
    return f"PVC {go_quote(claim)} not found in namespace {go_quote(namespace)}"


def msg_pvc_not_bound(claim: str, phase: str) -> str:
    return f"PVC {go_quote(claim)} is {phase}, waiting for it to be Bound"


def msg_pvc_model_ready(claim: str) -> str:
    return f"Model available on PVC {go_quote(claim)}"


def msg_invalid_pvc_source(source: str) -> str:
    return f"spec.source {go_quote(source)} is not a valid PVC source: expected pvc://<claim>/<path/in/claim>"


def msg_unsupported_source(source: str) -> str:
    return (
        f"spec.source {go_quote(source)} is not a supported model source: expected http(s)://..., "
        "file://..., pvc://<claim>/<path>, hf://<org>/<repo>[@<revision>], s3://<bucket>/<key>, "
        "gs://<bucket>/<object>, an absolute path, or a HuggingFace repo id (org/name)"
    )


def msg_quantization_not_found(repository: str, asked: str, present: Sequence[str]) -> str:
    has = ", ".join(present) if present else "none named in its file names (list the file in spec.files)"
    return (
        f"spec.quantization {go_quote(asked)}: the Hugging Face repository {go_quote(repository)} has no "
        f"GGUF file of it; its quantizations: {has}"
    )


def msg_quantization_resolved(repository: str, asked: str, files: Sequence[str]) -> str:
    more = f" (and {len(files) - 1} more shard(s))" if len(files) > 1 else ""
    return (
        f"spec.quantization {go_quote(asked)}: serving {go_quote(files[0])}{more} of the Hugging Face "
        f"repository {go_quote(repository)}, chosen from the Hub's file list"
    )


def msg_no_gguf_file(repository: str) -> str:
    return (
        f"spec.quantization: the Hugging Face repository {go_quote(repository)} has no GGUF model file "
        "(set spec.format for another format, or list the files in spec.files)"
    )


def msg_repository_not_listed(repository: str, detail: str) -> str:
    return (
        f"spec.quantization: cannot list the files of the Hugging Face repository {go_quote(repository)} "
        f"({detail}); list the file in spec.files to name it without the Hub's list"
    )


def msg_files_unsupported(source: str) -> str:
    return (
        "spec.files and spec.mmproj stage files from a Hugging Face repository, an s3:// or gs:// "
        f"prefix, an http(s) base URL or a pvc:// directory, not from {go_quote(source)} (a local "
        "path, or an http(s) source of a Model the host agent serves, is one file: list none)"
    )


def msg_metal_http_only(source: str) -> str:
    return f"The host agent fetches http(s) and Hugging Face files only, not {go_quote(source)}"


_LOOKED_AT_AGAIN = "looked at again every 5 minutes"


def msg_source_denied(source: str, detail: str, reason: str) -> str:
    if reason == SOURCE_NOT_FOUND:
        return f"{go_quote(source)} has no such file ({detail}); {_LOOKED_AT_AGAIN}"
    return (
        f"{go_quote(source)} refused the request ({detail}): check the credentials of "
        f"spec.sourceSecretRef (or that the source needs none); {_LOOKED_AT_AGAIN}"
    )


def msg_secret_not_found(secret: str, detail: str) -> str:
    return (
        f"spec.sourceSecretRef names Secret {go_quote(secret)}, which does not exist in the Model's "
        f"namespace ({detail}); {_LOOKED_AT_AGAIN}"
    )


def msg_credentials_unreadable(secret: str) -> str:
    return (
        f"status.gguf and status.size are not read: the controller may not read Secret {go_quote(secret)} "
        "(a Role in this namespace granting it get on that Secret lets it; see docs/models.md)"
    )


def msg_identity_credentials(role_arn: str) -> str:
    return (
        "status.gguf and status.size are not read: the pods' web identity (role "
        f"{go_quote(role_arn)}) signs the requests, and the controller has none of its keys"
    )


def msg_prefetch_started(job: str) -> str:
    return f"Prefetching the model into the namespace's model cache (Job {go_quote(job)})"


def msg_prefetch_running(job: str, received: int | None, total: int | None) -> str:
    where = f"into the namespace's model cache (Job {go_quote(job)})"
    if received is None:
        return f"Prefetching the model {where}"
    if total:
        percent = min(100, received * 100 // total)
        return f"Prefetching the model {where}: {format_size(received)} of {format_size(total)} ({percent}%)"
    return f"Prefetching the model {where}: {format_size(received)} so far"


def msg_prefetch_failed(job: str, detail: str) -> str:
    said = f": {detail.removeprefix('llmkube-download: ')}" if detail else ""
    return f"Prefetch Job {go_quote(job)} failed{said}; delete the Job to try again"


def msg_prefetch_pod_not_created(job: str, refusal: str) -> str:
    return (
        f"Prefetch Job {go_quote(job)} cannot create its pod: {refusal}; "
        "the Job controller keeps trying, and the download starts once the pod is admitted"
    )


def msg_model_prefetched(job: str, detail: str) -> str:
    said = f" ({detail.removeprefix('llmkube-download: ')})" if detail else ""
    return f"Model prefetched into the namespace's model cache by Job {go_quote(job)}{said}"


_NOT_READ_AGAIN = "it is not read again until the spec or the file (its ETag or size) changes"


def msg_source_not_allowed(source: str, detail: str) -> str:
    return (
        f"The controller does not fetch {go_quote(source)}: {detail}. Loopback, link-local and "
        "metadata addresses, the Kubernetes API server and the cluster's Service and Pod networks "
        "are refused unless an administrator allows the host (--model-source-allowed-hosts)"
    )


def msg_invalid_model_file(source: str, detail: str) -> str:
    return f"{go_quote(source)} is not a GGUF file the controller can read: {detail}; {_NOT_READ_AGAIN}"


def msg_invalid_source_response(source: str, detail: str) -> str:
    return f"{go_quote(source)} answered a Range request no file can answer: {detail}; {_NOT_READ_AGAIN}"


def msg_status_rejected(code: int, reason: str, detail: str) -> str:
    refusal = f"{code} {reason}".rstrip()
    return (
        f"The API server refused the status planned for this Model ({refusal}: {detail}); this one "
        f"replaces it, and the source is not read again until the spec or the file (its ETag or size) changes"
    )


def msg_upstream_changed(source: str) -> str:
    return f"Upstream source {go_quote(source)} differs from the cached copy"


def _set(
    conditions: Sequence[Condition] | None,
    type_: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    now: datetime,
    generation: int | None,
) -> list[Condition]:
    return set_condition(
        conditions,
        type_=type_,
        status=status,
        reason=reason,
        message=message,
        now=now,
        observed_generation=generation,
    )


def _flip_false_if_present(
    conditions: Sequence[Condition],
    type_: str,
    reason: str,
    message: str,
    now: datetime,
    generation: int | None,
) -> list[Condition]:
    """Set an existing condition to False (refreshing why); a condition never written stays absent."""
    return update_condition_if_present(
        conditions,
        type_=type_,
        status="False",
        reason=reason,
        message=message,
        now=now,
        observed_generation=generation,
    )


def mark_ready(
    conditions: Sequence[Condition] | None,
    *,
    reason: str,
    message: str,
    superseded_message: str,
    now: datetime,
    generation: int | None,
) -> list[Condition]:
    """Available=True; a Progressing or Degraded left by an earlier attempt becomes False/Superseded."""
    message = bounded_message(message)  # it names sources and quotes their servers
    result = _set(conditions, AVAILABLE, "True", reason, message, now, generation)
    for type_ in (PROGRESSING, DEGRADED):
        result = _flip_false_if_present(result, type_, SUPERSEDED, superseded_message, now, generation)
    return result


def mark_progressing(
    conditions: Sequence[Condition] | None,
    *,
    reason: str,
    message: str,
    clear_degraded: bool,
    now: datetime,
    generation: int | None,
) -> list[Condition]:
    """Progressing=True; Available (if ever written) False for the same reason.

    `clear_degraded` says whether the cause of an earlier Degraded is known to be gone (a PVC that now
    exists); a retried copy is not such evidence, so its Degraded stays until the outcome is known.
    """
    message = bounded_message(message)  # it names sources and quotes their servers
    result = _set(conditions, PROGRESSING, "True", reason, message, now, generation)
    result = _flip_false_if_present(result, AVAILABLE, reason, message, now, generation)
    if clear_degraded:
        result = _flip_false_if_present(result, DEGRADED, reason, message, now, generation)
    return result


def mark_failed(
    conditions: Sequence[Condition] | None,
    *,
    reason: str,
    message: str,
    now: datetime,
    generation: int | None,
) -> list[Condition]:
    """Degraded=True; Available and Progressing (if ever written) False for the same reason."""
    message = bounded_message(message)  # it names sources and quotes their servers
    result = _set(conditions, DEGRADED, "True", reason, message, now, generation)
    for type_ in (AVAILABLE, PROGRESSING):
        result = _flip_false_if_present(result, type_, reason, message, now, generation)
    return result


def mark_source_drifted(
    conditions: Sequence[Condition] | None,
    *,
    drifted: bool,
    source: str,
    now: datetime,
    generation: int | None,
) -> list[Condition]:
    status: ConditionStatus = "True" if drifted else "False"
    reason, message = (UPSTREAM_CHANGED, msg_upstream_changed(source)) if drifted else (IN_SYNC, MSG_IN_SYNC)
    message = bounded_message(message)
    return _set(conditions, SOURCE_DRIFTED, status, reason, message, now, generation)


def model_summary(phase: str, conditions: Sequence[Condition] | None) -> Summary:
    """Ready when the Model is usable (phase Ready), with the reason it is (cached, on a claim,
    resolved by the runtime); failed with Degraded's reason; otherwise Progressing's."""
    if phase == "Ready":
        reason = reason_of(conditions, AVAILABLE, "Ready")
        return Summary(ready=True, reason=reason, message=message_of(conditions, AVAILABLE))
    if phase == "Failed":
        return Summary(
            ready=False,
            reason=reason_of(conditions, DEGRADED, "Failed"),
            message=message_of(conditions, DEGRADED),
            stalled=True,
        )
    reason = reason_of(conditions, PROGRESSING, phase)
    return Summary(ready=False, reason=reason, message=message_of(conditions, PROGRESSING))
