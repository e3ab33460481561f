"""plan_model, branch by branch: standard condition semantics, bad input without a hot loop, no
write for an unchanged status."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmkube.api.meta import Condition
from llmkube.api.model import GGUFMetadata, Model, ModelStatus
from llmkube.plan.model import (
    ActionKind,
    CachedFile,
    FetchError,
    FetchFailure,
    Fingerprint,
    HeaderFailure,
    ModelDecision,
    ModelFacts,
    ModelPlanConfig,
    ProbeFailure,
    ProbeOutcome,
    RemoteHeader,
    Requeue,
    StoredFile,
    plan_model,
    status_changed,
)
from llmkube.plan.model.source import SourceKind, cache_key

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
NOW = T0 + timedelta(minutes=10)
HOUR = timedelta(hours=1)
FIVE_MIN = timedelta(minutes=5)

LOCAL_SRC = "file:///data/llama.gguf"
LOCAL_KEY = cache_key(LOCAL_SRC)
LOCAL_DIR = f"/models/{LOCAL_KEY}"
HTTP_SRC = "https://example.com/llama.gguf"
HTTP_KEY = cache_key(HTTP_SRC)
SHA = "ab" * 32
META = GGUFMetadata(architecture="llama", model_name="Tiny Llama", quantization="Q4_K_M")


def make_model(
    source: str,
    *,
    status: ModelStatus | None = None,
    accelerator: str | None = None,
    sha256: str | None = None,
    refresh: str = "IfNotPresent",
    name: str = "llama",
) -> Model:
    spec: dict[str, Any] = {"source": source, "refreshPolicy": refresh}
    if accelerator:
        spec["hardware"] = {"accelerator": accelerator}
    if sha256:
        spec["sha256"] = sha256
    model = Model.model_validate(
        {"metadata": {"name": name, "namespace": "ml", "generation": 3}, "spec": spec}
    )
    return model.model_copy(update={"status": status})


def cond(type_: str, status: str, reason: str, at: datetime = T0, message: str = "m") -> Condition:
    return Condition.model_validate(
        {"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": at}
    )


#: the summary conditions (plan/conditions/summary.py), tested on their own below
SUMMARY = {"Ready", "Reconciling", "Stalled"}


def conditions(decision: ModelDecision) -> dict[str, tuple[str, str, str]]:
    """The reference's conditions (Available, Progressing, Degraded, SourceDrifted)."""
    return {
        c.type: (c.status, c.reason, c.message)
        for c in decision.status.conditions or ()
        if c.type not in SUMMARY
    }


#: local sources under /data may be read (--model-local-roots=/data)
LOCAL_ROOTS = ("/data",)


def summary(decision: ModelDecision) -> dict[str, tuple[str, str, str]]:
    return {
        c.type: (c.status, c.reason, c.message) for c in decision.status.conditions or () if c.type in SUMMARY
    }


def plan(
    model: Model, facts: ModelFacts | None = None, config: ModelPlanConfig | None = None
) -> ModelDecision:
    config = config or ModelPlanConfig(local_source_roots=LOCAL_ROOTS)
    # The models' namespace may use local sources (tests/unit/plan/model/test_model_local_roots.py
    # holds the refusal where it may not).
    return plan_model(model, replace(facts or ModelFacts(), local_sources_allowed=True), NOW, config)


# --- pvc:// -------------------------------------------------------------------------------------

PVC_SRC = "pvc://models/llama/x.gguf"


@pytest.mark.parametrize(
    ("source", "pvc_phase", "phase", "condition", "requeue"),
    [
        (
            "pvc://models",
            "Bound",
            "Failed",
            (
                "Degraded",
                "True",
                "InvalidSource",
                'spec.source "pvc://models" is not a valid PVC source: expected pvc://<claim>/<path/in/claim>',
            ),
            Requeue(),  # bad input: no retry until the spec changes
        ),
        (
            PVC_SRC,
            None,
            "Failed",
            ("Degraded", "True", "PVCNotFound", 'PVC "models" not found in namespace "ml"'),
            Requeue(after=timedelta(seconds=30)),
        ),
        (
            PVC_SRC,
            "Pending",
            "Pending",
            ("Progressing", "True", "PVCNotBound", 'PVC "models" is Pending, waiting for it to be Bound'),
            Requeue(after=timedelta(seconds=10)),
        ),
        (
            PVC_SRC,
            "Lost",
            "Pending",
            ("Progressing", "True", "PVCNotBound", 'PVC "models" is Lost, waiting for it to be Bound'),
            Requeue(after=timedelta(seconds=10)),
        ),
        (
            PVC_SRC,
            "Bound",
            "Ready",
            ("Available", "True", "PVCModelReady", 'Model available on PVC "models"'),
            Requeue(),
        ),
    ],
)
def test_pvc_source(
    source: str,
    pvc_phase: str | None,
    phase: str,
    condition: tuple[str, str, str, str],
    requeue: Requeue,
) -> None:
    decision = plan(make_model(source), ModelFacts(pvc_phase=pvc_phase))
    assert decision.status.phase == phase
    assert conditions(decision) == {condition[0]: condition[1:]}
    assert decision.action.kind is ActionKind.NONE
    assert decision.requeue == requeue
    assert decision.error is None


# --- the summary conditions: Ready, Reconciling, Stalled (plan/conditions/summary.py) ----------------------


@pytest.mark.parametrize(
    ("pvc_phase", "expected"),
    [
        (
            "Bound",
            {
                "Ready": ("True", "PVCModelReady", 'Model available on PVC "models"'),
                "Reconciling": ("False", "PVCModelReady", 'Model available on PVC "models"'),
            },
        ),
        (
            "Pending",
            {
                "Ready": ("False", "PVCNotBound", 'PVC "models" is Pending, waiting for it to be Bound'),
                "Reconciling": ("True", "PVCNotBound", 'PVC "models" is Pending, waiting for it to be Bound'),
            },
        ),
        (
            None,
            {
                "Ready": ("False", "PVCNotFound", 'PVC "models" not found in namespace "ml"'),
                "Reconciling": ("False", "PVCNotFound", 'PVC "models" not found in namespace "ml"'),
                "Stalled": ("True", "PVCNotFound", 'PVC "models" not found in namespace "ml"'),
            },
        ),
    ],
    ids=["ready", "progressing", "failed"],
)
def test_summary_conditions_follow_the_phase(
    pvc_phase: str | None, expected: dict[str, tuple[str, ...]]
) -> None:
    """kstatus reads Reconciling=True as InProgress and Stalled=True as Failed, anything else as
    Current; Ready says whether the Model can be used, for the generation it names."""
    decision = plan(make_model(PVC_SRC), ModelFacts(pvc_phase=pvc_phase))
    assert summary(decision) == expected
    assert {c.observed_generation for c in decision.status.conditions or ()} == {3}


def test_stalled_is_settled_not_removed_when_the_failure_is_gone() -> None:
    failed = plan(make_model(PVC_SRC), ModelFacts(pvc_phase=None))
    recovered = plan(make_model(PVC_SRC, status=failed.status), ModelFacts(pvc_phase="Bound"))
    assert summary(recovered)["Stalled"] == (
        "False",
        "Recovered",
        'No longer failing: Model available on PVC "models"',
    )
    assert summary(recovered)["Ready"][0] == "True"
    # and an unchanged Ready Model plans an identical status: nothing to write
    again = plan(make_model(PVC_SRC, status=recovered.status), ModelFacts(pvc_phase="Bound"))
    assert again.status == recovered.status


def test_a_model_that_never_failed_has_no_stalled_condition() -> None:
    pending = plan(make_model(PVC_SRC), ModelFacts(pvc_phase="Pending"))
    ready = plan(make_model(PVC_SRC, status=pending.status), ModelFacts(pvc_phase="Bound"))
    assert "Stalled" not in summary(ready)
    assert summary(ready)["Reconciling"][0] == "False"


def test_pvc_bound_sets_path_and_cache_key() -> None:
    decision = plan(make_model(PVC_SRC), ModelFacts(pvc_phase="Bound", gpu_capacity={}))
    status = decision.status
    assert (status.path, status.cache_key, status.accelerator_ready) == (
        "/model-source/llama/x.gguf",
        cache_key(PVC_SRC),
        True,
    )
    assert status.size is None and status.sha256 is None


def test_pvc_ready_clears_the_earlier_conditions() -> None:
    earlier = ModelStatus(
        phase="Pending",
        conditions=[cond("Degraded", "True", "PVCNotFound"), cond("Progressing", "True", "PVCNotBound")],
    )
    decision = plan(make_model(PVC_SRC, status=earlier), ModelFacts(pvc_phase="Bound"))
    superseded = ("False", "Superseded", "Model reached Ready without a controller-side download")
    assert conditions(decision) == {
        "Degraded": superseded,
        "Progressing": superseded,
        "Available": ("True", "PVCModelReady", 'Model available on PVC "models"'),
    }


def test_pvc_pending_after_not_found_clears_degraded() -> None:
    earlier = ModelStatus(phase="Failed", conditions=[cond("Degraded", "True", "PVCNotFound")])
    decision = plan(make_model(PVC_SRC, status=earlier), ModelFacts(pvc_phase="Pending"))
    assert conditions(decision)["Degraded"][:2] == ("False", "PVCNotBound")


def test_ready_pvc_model_whose_claim_disappears_fails() -> None:
    ready = plan(make_model(PVC_SRC), ModelFacts(pvc_phase="Bound")).status
    decision = plan(make_model(PVC_SRC, status=ready), ModelFacts(pvc_phase=None))
    assert decision.status.phase == "Failed"
    assert conditions(decision)["Available"][:2] == ("False", "PVCNotFound")


def test_pvc_drops_drift_state_left_by_an_http_source() -> None:
    earlier = ModelStatus(
        cache_key=cache_key(PVC_SRC),
        source_e_tag="e1",
        source_content_length=10,
        last_revalidated=T0,
        conditions=[cond("SourceDrifted", "True", "UpstreamChanged")],
    )
    status = plan(make_model(PVC_SRC, status=earlier), ModelFacts(pvc_phase="Bound")).status
    assert (status.source_e_tag, status.source_content_length, status.last_revalidated) == (None, None, None)
    assert "SourceDrifted" not in {c.type for c in status.conditions or ()}


# --- HuggingFace repo ids and metal local paths ---------------------------------------------------


@pytest.mark.parametrize(
    ("source", "accelerator", "reason", "message"),
    [
        (
            "Qwen/Qwen2.5-0.5B-Instruct",
            None,
            "RuntimeResolved",
            "Source is runtime-resolved (e.g., HuggingFace repo ID); runtime will fetch at startup",
        ),
        (
            "/Users/me/models/llama.gguf",
            "metal",
            "MetalAgentManaged",
            "Source is a local path on the Metal node; the host metal-agent loads the model directly",
        ),
        (
            "file:///Users/me/models/llama.gguf",
            "metal",
            "MetalAgentManaged",
            "Source is a local path on the Metal node; the host metal-agent loads the model directly",
        ),
    ],
)
def test_runtime_resolved_sources_are_ready_at_once(
    source: str, accelerator: str | None, reason: str, message: str
) -> None:
    decision = plan(make_model(source, accelerator=accelerator))
    status = decision.status
    assert (status.phase, status.path, status.size, status.cache_key) == ("Ready", "", "0", "")
    assert conditions(decision) == {"Available": ("True", reason, message)}
    assert decision.action.kind is ActionKind.NONE
    assert decision.requeue == Requeue()


def test_runtime_resolved_clears_progress_and_state_of_an_earlier_local_source() -> None:
    earlier = ModelStatus(
        phase="Copying",
        cache_key=LOCAL_KEY,
        path=f"{LOCAL_DIR}/llama.gguf",
        sha256=SHA,
        gguf=META,
        source_content_length=10,
        last_revalidated=T0,
        conditions=[cond("Progressing", "True", "CopyStarted"), cond("SourceDrifted", "False", "InSync")],
    )
    decision = plan(make_model("Qwen/Qwen2.5-0.5B-Instruct", status=earlier))
    status = decision.status
    assert (status.sha256, status.gguf, status.source_content_length, status.last_revalidated) == (
        None,
        None,
        None,
        None,
    )
    assert conditions(decision)["Progressing"][:2] == ("False", "Superseded")
    assert "SourceDrifted" not in conditions(decision)


# --- http(s) ------------------------------------------------------------------------------------

HTTP_PROBE = ProbeOutcome(fingerprint=Fingerprint(etag='"e1"', content_length=4096))


def test_http_first_reconcile_probes_and_reads_the_header() -> None:
    model = make_model(HTTP_SRC)
    decision = plan(model)
    assert decision.action.kind is ActionKind.PROBE_FINGERPRINT
    assert (decision.action.source_kind, decision.action.source, decision.action.read_header) == (
        SourceKind.HTTP,
        HTTP_SRC,
        True,
    )
    assert not status_changed(model.status, decision.status)  # nothing to write before the probe


def test_http_becomes_ready_with_baseline_and_header_metadata() -> None:
    facts = ModelFacts(probe=HTTP_PROBE, remote_header=RemoteHeader(metadata=META, bytes_fetched=262144))
    decision = plan(make_model(HTTP_SRC), facts)
    status = decision.status
    assert (status.phase, status.path, status.size, status.cache_key, status.gguf) == (
        "Ready",
        "",
        "0",
        HTTP_KEY,
        META,
    )
    assert (status.source_e_tag, status.source_content_length, status.last_revalidated) == ('"e1"', 4096, NOW)
    assert conditions(decision) == {
        "SourceDrifted": ("False", "InSync", "Cached model matches the upstream source"),
        "Available": (
            "True",
            "WorkloadResolved",
            "Source is a remote URL; the InferenceService Pod's init container will fetch the model "
            "into the per-namespace model cache PVC at startup",
        ),
    }
    assert decision.requeue == Requeue(after=HOUR)
    assert status.last_updated == NOW
    assert {c.observed_generation for c in status.conditions or ()} == {3}


def test_http_on_metal_names_the_agent() -> None:
    decision = plan(make_model(HTTP_SRC, accelerator="metal"), ModelFacts(probe=HTTP_PROBE))
    assert conditions(decision)["Available"][2].startswith("Source is a remote URL; the host metal-agent")


@pytest.mark.parametrize(
    "header",
    [None, RemoteHeader(failure=HeaderFailure.RANGES_UNSUPPORTED, detail="server ignored Range")],
)
def test_http_without_metadata_is_still_ready(header: RemoteHeader | None) -> None:
    decision = plan(make_model(HTTP_SRC), ModelFacts(probe=HTTP_PROBE, remote_header=header))
    assert (decision.status.phase, decision.status.gguf) == ("Ready", None)


def test_http_header_reading_can_be_turned_off() -> None:
    decision = plan(make_model(HTTP_SRC), config=ModelPlanConfig(read_remote_gguf=False))
    assert decision.action.read_header is False


def http_ready(last_revalidated: datetime = T0) -> ModelStatus:
    decision = plan_model(make_model(HTTP_SRC), ModelFacts(probe=HTTP_PROBE), last_revalidated, None)
    return decision.status


def test_http_ready_and_not_due_does_nothing() -> None:
    ready = http_ready(T0)
    decision = plan(make_model(HTTP_SRC, status=ready))
    assert decision.action.kind is ActionKind.NONE
    assert not status_changed(ready, decision.status)
    assert decision.status.last_updated == T0  # untouched: no write, no watch event
    assert decision.requeue == Requeue(after=HOUR - (NOW - T0))


def test_http_ready_and_due_probes_without_rereading_the_header() -> None:
    ready = http_ready(T0 - 2 * HOUR)
    decision = plan(make_model(HTTP_SRC, status=ready))
    assert decision.action.kind is ActionKind.PROBE_FINGERPRINT
    assert decision.action.read_header is False  # the file name must not change under running pods


@pytest.mark.parametrize("refresh", ["IfNotPresent", "OnChange"])
def test_http_drift_is_reported_but_never_refetched(refresh: str) -> None:
    ready = http_ready(T0 - 2 * HOUR)
    changed = ProbeOutcome(fingerprint=Fingerprint(etag='"e2"', content_length=4096))
    decision = plan(make_model(HTTP_SRC, status=ready, refresh=refresh), ModelFacts(probe=changed))
    assert decision.action.kind is ActionKind.NONE
    assert decision.status.phase == "Ready"
    assert conditions(decision)["SourceDrifted"] == (
        "True",
        "UpstreamChanged",
        f'Upstream source "{HTTP_SRC}" differs from the cached copy',
    )
    assert (decision.status.source_e_tag, decision.status.last_revalidated) == ('"e1"', NOW)


def test_http_indeterminate_probe_leaves_last_revalidated_behind() -> None:
    ready = http_ready(T0 - 2 * HOUR)
    failed = ProbeOutcome(failure=ProbeFailure.NOT_FOUND, detail="HEAD returned 404")
    decision = plan(make_model(HTTP_SRC, status=ready), ModelFacts(probe=failed))
    assert decision.status.last_revalidated == T0 - 2 * HOUR
    assert not status_changed(ready, decision.status)
    assert decision.requeue == Requeue(after=HOUR)


def test_http_source_change_resets_fingerprint_and_metadata() -> None:
    ready = http_ready(T0).model_copy(update={"gguf": META})
    other = "https://example.com/other.gguf"
    decision = plan(make_model(other, status=ready))
    assert decision.action.kind is ActionKind.PROBE_FINGERPRINT  # a new baseline is due at once
    assert decision.action.read_header is True
    after = plan(make_model(other, status=ready), ModelFacts(probe=HTTP_PROBE))
    assert (after.status.cache_key, after.status.gguf) == (cache_key(other), None)


# --- unsupported sources --------------------------------------------------------------------------


def test_unsupported_source_fails_once_without_requeue() -> None:
    decision = plan(make_model("model.gguf"))
    assert decision.status.phase == "Failed"
    status, reason, message = conditions(decision)["Degraded"]
    assert (status, reason) == ("True", "InvalidSource")
    assert message.startswith('spec.source "model.gguf" is not a supported model source')
    assert decision.requeue == Requeue()
    assert decision.action.kind is ActionKind.NONE


# --- local paths: the controller's own cache ------------------------------------------------------


def test_local_without_cache_starts_copying() -> None:
    decision = plan(make_model(LOCAL_SRC, sha256=SHA.upper()))
    assert decision.status.phase == "Copying"
    assert decision.status.cache_key == LOCAL_KEY
    assert conditions(decision) == {"Progressing": ("True", "CopyStarted", "Started copying local model")}
    action = decision.action
    assert (action.kind, action.source_kind, action.source, action.model_dir, action.model_name) == (
        ActionKind.COPY_LOCAL,
        SourceKind.LOCAL,
        "/data/llama.gguf",
        LOCAL_DIR,
        "llama",
    )
    assert action.expected_sha256 == SHA.upper()


@pytest.mark.parametrize(("cache_path", "root"), [("/var/cache/llm", "/var/cache/llm"), ("", "/models")])
def test_local_cache_directory_follows_the_operator_flag(cache_path: str, root: str) -> None:
    decision = plan(
        make_model("/data/llama.gguf"),
        config=ModelPlanConfig(cache_path=cache_path, local_source_roots=LOCAL_ROOTS),
    )
    assert decision.action.model_dir == f"{root}/{cache_key('/data/llama.gguf')}"


COPIED = StoredFile(
    path=f"{LOCAL_DIR}/Tiny-Llama.gguf", size=5 * 1024**3, sha256=SHA, gguf=META, source_size=5 * 1024**3
)


def test_local_copy_success_is_ready_and_in_sync() -> None:
    copying = plan(make_model(LOCAL_SRC)).status
    decision = plan(
        make_model(LOCAL_SRC, status=copying),
        ModelFacts(local_sources_allowed=True, copy=COPIED, gpu_capacity={}),
    )
    status = decision.status
    assert (status.phase, status.path, status.size, status.sha256, status.gguf) == (
        "Ready",
        COPIED.path,
        "5.0 GiB",
        SHA,
        META,
    )
    assert (status.source_e_tag, status.source_content_length, status.last_revalidated) == (
        None,
        5 * 1024**3,
        NOW,
    )
    assert conditions(decision) == {
        "Progressing": ("False", "Superseded", "Model reached Ready from the controller's cache"),
        "SourceDrifted": ("False", "InSync", "Cached model matches the upstream source"),
        "Available": ("True", "ModelReady", "Model downloaded and cached"),
    }
    assert decision.requeue == Requeue(after=HOUR)
    assert decision.error is None


@pytest.mark.parametrize(
    ("failure", "reason", "requeue", "error"),
    [
        (FetchFailure.NOT_FOUND, "CopyFailed", Requeue(after=FIVE_MIN), False),
        (FetchFailure.PERMISSION_DENIED, "CopyFailed", Requeue(after=FIVE_MIN), False),
        (FetchFailure.NOT_A_FILE, "CopyFailed", Requeue(after=FIVE_MIN), False),
        (FetchFailure.INTEGRITY_MISMATCH, "IntegrityCheckFailed", Requeue(after=FIVE_MIN), False),
        (FetchFailure.SIZE_MISMATCH, "CopyFailed", Requeue(backoff=True), True),
        (FetchFailure.IO_ERROR, "CopyFailed", Requeue(backoff=True), True),
    ],
)
def test_local_copy_failures(failure: FetchFailure, reason: str, requeue: Requeue, error: bool) -> None:
    copying = plan(make_model(LOCAL_SRC)).status
    result = FetchError(kind=failure, message="failed to open local model file /data/llama.gguf: boom")
    decision = plan(
        make_model(LOCAL_SRC, status=copying), ModelFacts(local_sources_allowed=True, copy=result)
    )
    assert decision.status.phase == "Failed"
    assert conditions(decision) == {
        "Progressing": ("False", reason, result.message),
        "Degraded": ("True", reason, result.message),
    }
    assert decision.requeue == requeue
    assert decision.error == (result.message if error else None)


def test_a_retried_copy_keeps_degraded_until_the_outcome_is_known() -> None:
    failed = ModelStatus(
        phase="Failed", cache_key=LOCAL_KEY, conditions=[cond("Degraded", "True", "CopyFailed")]
    )
    decision = plan(make_model(LOCAL_SRC, status=failed))
    assert decision.action.kind is ActionKind.COPY_LOCAL
    assert conditions(decision)["Degraded"][:2] == ("True", "CopyFailed")
    done = plan(
        make_model(LOCAL_SRC, status=decision.status), ModelFacts(local_sources_allowed=True, copy=COPIED)
    )
    assert conditions(done)["Degraded"][:2] == ("False", "Superseded")


CACHED = CachedFile(path=f"{LOCAL_DIR}/model.gguf", size=2048)
LOCAL_PROBE = ProbeOutcome(fingerprint=Fingerprint(content_length=2048))


def test_cached_file_is_revalidated_first() -> None:
    decision = plan(make_model(LOCAL_SRC), ModelFacts(cached_file=CACHED))
    assert (decision.action.kind, decision.action.source_kind, decision.action.source) == (
        ActionKind.PROBE_FINGERPRINT,
        SourceKind.LOCAL,
        "/data/llama.gguf",
    )


def test_unknown_cached_file_is_verified_with_a_hash() -> None:
    decision = plan(make_model(LOCAL_SRC, sha256=SHA), ModelFacts(cached_file=CACHED, probe=LOCAL_PROBE))
    action = decision.action
    assert (action.kind, action.cached_path, action.hash_file, action.expected_sha256, action.model_dir) == (
        ActionKind.VERIFY,
        CACHED.path,
        True,
        SHA,
        LOCAL_DIR,
    )


def test_verified_cache_is_ready_with_model_cached() -> None:
    verified = StoredFile(path=f"{LOCAL_DIR}/Tiny-Llama.gguf", size=2048, sha256=SHA, gguf=META)
    facts = ModelFacts(cached_file=CACHED, probe=LOCAL_PROBE, verify=verified)
    decision = plan(make_model(LOCAL_SRC), facts)
    status = decision.status
    assert (status.phase, status.path, status.size, status.sha256, status.gguf) == (
        "Ready",
        verified.path,
        "2.0 KiB",
        SHA,
        META,
    )
    assert (status.source_content_length, status.last_revalidated) == (2048, NOW)  # the baseline
    assert conditions(decision) == {
        "SourceDrifted": ("False", "InSync", "Cached model matches the upstream source"),
        "Available": ("True", "ModelCached", "Model found in cache"),
    }
    assert decision.requeue == Requeue(after=HOUR)


@pytest.mark.parametrize("failure", [FetchFailure.NOT_FOUND, FetchFailure.INTEGRITY_MISMATCH])
def test_cache_that_vanished_or_was_corrupt_is_copied_again(failure: FetchFailure) -> None:
    facts = ModelFacts(cached_file=CACHED, probe=LOCAL_PROBE, verify=FetchError(failure, "gone"))
    decision = plan(make_model(LOCAL_SRC), facts)
    assert decision.action.kind is ActionKind.COPY_LOCAL
    assert decision.status.phase == "Copying"


def test_unreadable_cache_fails_with_backoff() -> None:
    facts = ModelFacts(cached_file=CACHED, probe=LOCAL_PROBE, verify=FetchError(FetchFailure.IO_ERROR, "EIO"))
    decision = plan(make_model(LOCAL_SRC), facts)
    assert decision.status.phase == "Failed"
    assert conditions(decision)["Degraded"] == ("True", "CopyFailed", "EIO")
    assert decision.requeue == Requeue(backoff=True)


def local_ready(path: str = COPIED.path, at: datetime = T0, gguf: GGUFMetadata | None = META) -> ModelStatus:
    config = ModelPlanConfig(local_source_roots=LOCAL_ROOTS)
    copying = plan_model(make_model(LOCAL_SRC), ModelFacts(local_sources_allowed=True), at, config).status
    stored = StoredFile(path=path, size=2048, sha256=SHA, gguf=gguf, source_size=2048)
    return plan_model(
        make_model(LOCAL_SRC, status=copying), ModelFacts(local_sources_allowed=True, copy=stored), at, config
    ).status


def test_ready_cache_not_due_is_left_alone() -> None:
    ready = local_ready()
    cached = CachedFile(path=COPIED.path, size=2048)
    decision = plan(make_model(LOCAL_SRC, status=ready), ModelFacts(cached_file=cached))
    assert decision.action.kind is ActionKind.NONE
    assert not status_changed(ready, decision.status)
    assert conditions(decision)["Available"][1] == "ModelReady"  # not rewritten to ModelCached
    assert decision.requeue == Requeue(after=HOUR - (NOW - T0))
    # The gauge follows the stored status, so it reads the same before and after a restart.


def test_ready_cache_with_a_legacy_name_is_renamed_without_rehashing() -> None:
    ready = local_ready(path=CACHED.path)
    decision = plan(make_model(LOCAL_SRC, status=ready), ModelFacts(cached_file=CACHED))
    assert (decision.action.kind, decision.action.hash_file) == (ActionKind.VERIFY, False)


def test_canonical_name_falls_back_to_the_model_name_without_metadata() -> None:
    ready = local_ready(path=f"{LOCAL_DIR}/llama.gguf", gguf=None)
    cached = CachedFile(path=f"{LOCAL_DIR}/llama.gguf", size=2048)
    decision = plan(make_model(LOCAL_SRC, status=ready), ModelFacts(cached_file=cached))
    assert decision.action.kind is ActionKind.NONE


def test_ready_cache_whose_file_vanished_is_copied_again() -> None:
    decision = plan(make_model(LOCAL_SRC, status=local_ready()), ModelFacts(cached_file=None))
    assert decision.action.kind is ActionKind.COPY_LOCAL
    assert conditions(decision)["Available"] == ("False", "CopyStarted", "Started copying local model")


def test_on_change_drift_refetches() -> None:
    ready = local_ready(at=T0 - 2 * HOUR)
    cached = CachedFile(path=COPIED.path, size=2048)
    grown = ProbeOutcome(fingerprint=Fingerprint(content_length=4096))
    model = make_model(LOCAL_SRC, status=ready, refresh="OnChange")
    first = plan(model, ModelFacts(cached_file=cached))
    assert first.action.kind is ActionKind.PROBE_FINGERPRINT
    decision = plan(model, ModelFacts(cached_file=cached, probe=grown))
    assert decision.action.kind is ActionKind.REFETCH
    assert (decision.action.model_dir, decision.action.source) == (LOCAL_DIR, "/data/llama.gguf")
    assert decision.status.phase == "Copying"
    assert conditions(decision)["SourceDrifted"][:2] == ("True", "UpstreamChanged")
    refreshed = StoredFile(path=COPIED.path, size=4096, sha256="cd" * 32, gguf=META, source_size=4096)
    done = plan(model, ModelFacts(cached_file=None, probe=grown, copy=refreshed))
    assert (done.status.phase, done.status.source_content_length, done.status.sha256) == (
        "Ready",
        4096,
        "cd" * 32,
    )
    assert conditions(done)["SourceDrifted"][:2] == ("False", "InSync")


def test_if_not_present_drift_only_reports() -> None:
    ready = local_ready(at=T0 - 2 * HOUR)
    cached = CachedFile(path=COPIED.path, size=2048)
    grown = ProbeOutcome(fingerprint=Fingerprint(content_length=4096))
    decision = plan(make_model(LOCAL_SRC, status=ready), ModelFacts(cached_file=cached, probe=grown))
    assert decision.action.kind is ActionKind.NONE
    assert decision.status.phase == "Ready"
    assert conditions(decision)["SourceDrifted"][:2] == ("True", "UpstreamChanged")
    assert decision.status.source_content_length == 2048  # drift stays visible until a re-copy


def test_changed_spec_sha256_refetches_without_rehashing_first() -> None:
    ready = local_ready()
    cached = CachedFile(path=COPIED.path, size=2048)
    decision = plan(make_model(LOCAL_SRC, status=ready, sha256="ef" * 32), ModelFacts(cached_file=cached))
    assert (decision.action.kind, decision.action.expected_sha256) == (ActionKind.REFETCH, "ef" * 32)
    same_hash_other_case = plan(
        make_model(LOCAL_SRC, status=ready, sha256=SHA.upper()), ModelFacts(cached_file=cached)
    )
    assert same_hash_other_case.action.kind is ActionKind.NONE


def test_local_source_change_forgets_the_old_copy() -> None:
    ready = local_ready()
    other = "/data/other.gguf"
    decision = plan(make_model(other, status=ready))
    assert decision.action.kind is ActionKind.COPY_LOCAL
    status = decision.status
    assert (status.cache_key, status.path, status.sha256, status.gguf, status.last_revalidated) == (
        cache_key(other),
        None,
        None,
        None,
        None,
    )
    assert "SourceDrifted" not in conditions(decision)


def test_accelerator_readiness_is_reported_on_every_path() -> None:
    no_gpu = ModelFacts(gpu_capacity={"nvidia.com/gpu": 0})
    for model in (make_model(HTTP_SRC, accelerator="cuda"), make_model("org/repo", accelerator="cuda")):
        facts = ModelFacts(gpu_capacity=no_gpu.gpu_capacity, probe=HTTP_PROBE)
        assert plan(model, facts).status.accelerator_ready is False
    assert plan(make_model(LOCAL_SRC, accelerator="cuda"), no_gpu).status.accelerator_ready is False
    assert plan(make_model("x.gguf", accelerator="cuda"), no_gpu).status.accelerator_ready is False
    with_gpu = ModelFacts(gpu_capacity={"nvidia.com/gpu": 1}, pvc_phase="Bound")
    assert plan(make_model(PVC_SRC, accelerator="cuda"), with_gpu).status.accelerator_ready is True


def test_last_updated_moves_only_with_a_real_change() -> None:
    first = plan_model(make_model("org/repo", accelerator="cuda"), ModelFacts(), T0, None)
    assert first.status.last_updated == T0
    again = plan_model(
        make_model("org/repo", accelerator="cuda", status=first.status), ModelFacts(), NOW, None
    )
    assert again.status == first.status  # same content, same timestamp: nothing to write
    no_gpu = ModelFacts(gpu_capacity={})
    changed = plan_model(make_model("org/repo", accelerator="cuda", status=first.status), no_gpu, NOW, None)
    assert (changed.status.accelerator_ready, changed.status.last_updated) == (False, NOW)


# --- the observe → decide → act loop always ends ------------------------------------------------

PROBES = [
    LOCAL_PROBE,
    ProbeOutcome(fingerprint=Fingerprint(content_length=1)),
    ProbeOutcome(failure=ProbeFailure.IO_ERROR),
]
FILE_RESULTS: list[StoredFile | FetchError] = [
    COPIED,
    *(FetchError(kind, kind.value) for kind in FetchFailure),
]


@settings(deadline=None)  # a property of the planner, not of its speed (the machine may be busy)
@given(
    source=st.sampled_from([LOCAL_SRC, HTTP_SRC, PVC_SRC, "org/repo", "x.gguf", "pvc://bad", "/m.gguf"]),
    previous=st.sampled_from(["none", "local", "http", "failed"]),
    refresh=st.sampled_from(["IfNotPresent", "OnChange"]),
    sha256=st.sampled_from([None, SHA, "ef" * 32]),
    cached=st.sampled_from([None, CACHED, CachedFile(path=COPIED.path, size=2048)]),
    pvc_phase=st.sampled_from([None, "Pending", "Bound"]),
    probe=st.sampled_from(PROBES),
    verify=st.sampled_from(FILE_RESULTS),
    copy=st.sampled_from(FILE_RESULTS),
    at=st.sampled_from([T0, NOW, T0 + 3 * HOUR]),
)
def test_the_reconcile_loop_ends_without_repeating_an_action(
    source: str,
    previous: str,
    refresh: str,
    sha256: str | None,
    cached: CachedFile | None,
    pvc_phase: str | None,
    probe: ProbeOutcome,
    verify: StoredFile | FetchError,
    copy: StoredFile | FetchError,
    at: datetime,
) -> None:
    earlier = {
        "none": None,
        "local": local_ready(),
        "http": http_ready(),
        "failed": ModelStatus(phase="Failed", conditions=[cond("Degraded", "True", "CopyFailed")]),
    }[previous]
    model = make_model(source, status=earlier, refresh=refresh, sha256=sha256)
    facts = ModelFacts(cached_file=cached, pvc_phase=pvc_phase, local_sources_allowed=True)
    performed: list[ActionKind] = []
    for _ in range(5):
        decision = plan_model(model, facts, at, ModelPlanConfig(local_source_roots=LOCAL_ROOTS))
        if decision.action.kind is ActionKind.NONE:
            break
        performed.append(decision.action.kind)
        # The result of each action joins the facts, as the controller does.
        kind = decision.action.kind
        if kind is ActionKind.PROBE_FINGERPRINT:
            facts = replace(facts, probe=probe)
        elif kind is ActionKind.VERIFY:
            facts = replace(facts, verify=verify)
        else:
            facts = replace(facts, copy=copy, cached_file=None)
    assert decision.action.kind is ActionKind.NONE
    assert len(performed) == len(set(performed)) <= 3
    assert not ({ActionKind.COPY_LOCAL, ActionKind.REFETCH} <= set(performed))
    assert decision.status.phase in {"Pending", "Ready", "Failed"}
    # model_copy(update=...) neither validates nor rejects unknown names: prove every planned status
    # holds only ModelStatus fields, each of which validates.
    assert set(vars(decision.status)) <= set(ModelStatus.model_fields)
    ModelStatus.model_validate(decision.status.model_dump())
    # Nothing ever asks for a backoff and a timed requeue at once.
    assert not (decision.requeue.backoff and decision.requeue.after)
    # No condition once written is removed (a stale one turns False), except SourceDrifted, whose
    # subject (this source's drift) no longer exists for a new or unprobeable source.
    kept = {c.type for c in (earlier.conditions if earlier else None) or ()} - {"SourceDrifted"}
    assert kept <= {c.type for c in decision.status.conditions or ()}
