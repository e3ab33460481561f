"""`llmkube cache clear`'s decision (plan/model/cache_clear.py), table-driven, and its Job's script
run for real with sh on a directory laid out as the cache claim is."""

import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from llmkube.api.model import CacheClearStatus, Model, ModelStatus
from llmkube.plan.model import (
    ClearFacts,
    Fingerprint,
    ModelDecision,
    ModelFacts,
    ModelPlanConfig,
    PrefetchJob,
    ProbeOutcome,
    model_events,
    plan_model,
)
from llmkube.plan.model.cache_clear import (
    CLEAR_ANNOTATION,
    CLEAR_SCRIPT,
    CONTAINER,
    FORCE_ANNOTATION,
    clear_job_name,
    plan_cache_clear,
    services_to_confirm,
)
from llmkube.plan.model.prefetch import CACHE_CLAIM
from llmkube.plan.model.source import cache_key

NOW = datetime(2026, 12, 2, 8, 0, tzinfo=UTC)
SOURCE = "https://models.invalid/tiny.gguf"
KEY = cache_key(SOURCE)
CONFIG = ModelPlanConfig(read_remote_gguf=False)


def model(source: str = SOURCE, *, request: str | None = "r1", force: bool = False, **spec: object) -> Model:
    annotations = {CLEAR_ANNOTATION: request} if request else {}
    if force:
        annotations[FORCE_ANNOTATION] = "true"
    return Model.model_validate(
        {
            "metadata": {"name": "tiny", "namespace": "ml", "uid": "u-1", "annotations": annotations},
            "spec": {"source": source, **spec},
        }
    )


def ready(key: str = KEY, record: CacheClearStatus | None = None) -> ModelStatus:
    return ModelStatus(phase="Ready", cache_key=key, cache_clear=record)


def job(phase: str, request: str = "r1", message: str = "") -> PrefetchJob:
    return PrefetchJob(name=clear_job_name("tiny", request, KEY), uid="j-1", phase=phase, message=message)  # type: ignore[arg-type]


CLAIM = ClearFacts(claim_exists=True)


@pytest.mark.parametrize(
    ("the_model", "status", "facts", "prefetch", "phase", "creates", "words"),
    [
        # Asked, nothing in the way: the Job is created; the files are removed by it.
        (model(), ready(), CLAIM, (), "Clearing", True, "removes the files"),
        (model(), ready(), ClearFacts(jobs=(job("Running"),), claim_exists=True), (), "Clearing", False,
         "removes"),
        (model(), ready(), ClearFacts(jobs=(job("Succeeded"),), claim_exists=True), (), "Cleared", False,
         "removed"),
        (model(), ready(), ClearFacts(jobs=(job("Failed", message="rm: denied"),), claim_exists=True), (),
         "Failed", False, "rm: denied"),
        # A service names it: refused unless forced (the controller checks again when it acts).
        (model(), ready(), ClearFacts(services=("chat", "web"), claim_exists=True), (), "Refused", False,
         "InferenceServices use it (chat, web)"),
        (model(force=True), ready(), ClearFacts(services=("chat",), claim_exists=True), (), "Clearing", True,
         ""),
        # Nothing of it in the cache: refused, or cleared at once when the namespace has no claim.
        (model("pvc://models/tiny.gguf"), ready(cache_key("pvc://models/tiny.gguf")), CLAIM, (), "Refused",
         False, "pvc://"),
        (model("Qwen/Qwen2.5-0.5B"), ready(""), CLAIM, (), "Refused", False, "runtime downloads"),
        (model(), ready(), ClearFacts(), (), "Cleared", False, "no model cache claim"),
        # A prefetch Job of the Model: deleted first, the clear waits for it to be gone.
        (model(), ready(), CLAIM, (PrefetchJob("tiny-prefetch-1", "p-1", "Succeeded"),), "Clearing", False,
         "waiting for the prefetch Job tiny-prefetch-1"),
    ],
)  # fmt: skip
def test_the_decision(
    the_model: Model,
    status: ModelStatus,
    facts: ClearFacts,
    prefetch: tuple[PrefetchJob, ...],
    phase: str,
    creates: bool,
    words: str,
) -> None:
    decision = plan_cache_clear(the_model, status, facts, prefetch, NOW, CONFIG)
    record = decision.status.cache_clear
    assert record is not None and record.request == "r1" and record.phase == phase
    assert words in (record.message or "")
    assert (decision.jobs.job is not None) is creates
    assert decision.holds_prefetch is (phase == "Clearing")


def test_an_answered_request_does_nothing_more_and_a_new_one_starts_again() -> None:
    done = CacheClearStatus(request="r1", phase="Cleared", cache_key=KEY, job=job("Succeeded").name, time=NOW)
    succeeded = ClearFacts(jobs=(job("Succeeded"),), claim_exists=True)
    decision = plan_cache_clear(model(), ready(record=done), succeeded, (), NOW, CONFIG)
    assert decision.status.cache_clear == done and decision.jobs.job is None
    assert decision.jobs.deletes == (("tiny-cache-clear-" + job("Succeeded").name[-8:], "j-1"),)
    # A failed Job of the answered request stays, with its log.
    failed = done.model_copy(update={"phase": "Failed"})
    kept = plan_cache_clear(model(), ready(record=failed), ClearFacts(jobs=(job("Failed"),)), (), NOW, CONFIG)
    assert kept.jobs.deletes == ()
    # Another request id: another Job, the old one deleted.
    again = plan_cache_clear(model(request="r2"), ready(record=done), succeeded, (), NOW, CONFIG)
    assert again.status.cache_clear is not None and again.status.cache_clear.request == "r2"
    assert again.jobs.job is not None and again.jobs.job["metadata"]["name"] == clear_job_name(
        "tiny", "r2", KEY
    )
    assert again.jobs.deletes == ((job("Succeeded").name, "j-1"),)


def test_the_job_is_hardened_and_mounts_the_cache_claim() -> None:
    decision = plan_cache_clear(model(), ready(), CLAIM, (), NOW, CONFIG)
    intent = decision.jobs.job
    assert intent is not None
    assert intent["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    pod = intent["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False and pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    [container] = pod["containers"]
    assert container["name"] == CONTAINER
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert {e["name"]: e["value"] for e in container["env"]} == {"MODELS_DIR": "/models", "CACHE_KEY": KEY}
    assert pod["volumes"] == [{"name": "model-cache", "persistentVolumeClaim": {"claimName": CACHE_CLAIM}}]


def test_the_planner_records_the_clear_and_holds_the_prefetch() -> None:
    """Through plan_model: the record in the status, the Job in the decision; with prefetch on,
    the Model's prefetch Job is deleted (foreground) and none is created while it clears."""
    the_model = model(prefetch=True).model_copy(update={"status": ready()})
    prefetched = PrefetchJob("tiny-prefetch-abc", "p-1", "Succeeded", message="done: 1 files, 9 bytes")
    probed = ProbeOutcome(fingerprint=Fingerprint(etag='"e1"', content_length=9))  # the revalidation's
    facts = ModelFacts(prefetch_jobs=(prefetched,), clear=CLAIM, probe=probed)
    decision = plan_model(the_model, facts, NOW, CONFIG)
    assert decision.status.cache_clear is not None and decision.status.cache_clear.phase == "Clearing"
    assert decision.prefetch is not None and decision.prefetch.job is None
    assert decision.prefetch.deletes == (("tiny-prefetch-abc", "p-1"),) and decision.prefetch.foreground
    assert decision.requeue.after is not None and decision.requeue.after.total_seconds() <= 10
    # Once no prefetch Job is left: the clear Job.
    decision = plan_model(the_model, ModelFacts(clear=CLAIM, probe=probed), NOW, CONFIG)
    assert decision.cache_clear is not None and decision.cache_clear.job is not None
    assert decision.prefetch is not None and decision.prefetch.job is None


def run_script(tmp_path: Path, key: str) -> tuple[int, str]:
    env = {"PATH": os.environ["PATH"], "MODELS_DIR": str(tmp_path), "CACHE_KEY": key}
    env["TERMINATION_LOG"] = str(tmp_path / "termination-log")
    done = subprocess.run(["sh", "-c", CLEAR_SCRIPT], env=env, capture_output=True, text=True, check=False)
    return done.returncode, (tmp_path / "termination-log").read_text().strip()


def test_the_script_removes_one_cache_directory_and_says_what(tmp_path: Path) -> None:
    mine, other = tmp_path / KEY, tmp_path / cache_key("https://other.invalid/x.gguf")
    (mine / "sub").mkdir(parents=True)
    (mine / "model-00001-of-00002.gguf").write_bytes(b"x" * 1000)
    (mine / "sub" / "mmproj.gguf").write_bytes(b"y" * 24)
    other.mkdir()
    (other / "keep.gguf").write_bytes(b"z")
    code, said = run_script(tmp_path, KEY)
    assert code == 0 and said == f"llmkube-cache-clear: done: 2 files, 1024 bytes removed from {mine}"
    assert not mine.exists() and (other / "keep.gguf").exists()
    code, said = run_script(tmp_path, KEY)  # nothing there: a success too
    assert code == 0 and said.startswith("llmkube-cache-clear: done: 0 files, 0 bytes")


@pytest.mark.parametrize("key", ["..", "../etc", "abc", "0123456789abcdeF", "0123456789abcdef0", ""])
def test_the_script_refuses_what_is_no_cache_key(tmp_path: Path, key: str) -> None:
    (tmp_path / "keep").mkdir()
    code, said = run_script(tmp_path, key)
    assert code == 3 and "is not a cache key" in said and (tmp_path / "keep").exists()


def test_each_answer_is_one_event() -> None:
    clearing = ready(record=CacheClearStatus(request="r1", phase="Clearing", job="j", message="removes"))
    refused = ready(
        record=CacheClearStatus(request="r2", phase="Refused", message="InferenceServices use it")
    )
    assert [(e.type, e.reason) for e in model_events(ready(), clearing)] == [("Normal", "CacheClearing")]
    assert model_events(clearing, clearing) == []
    [event] = model_events(clearing, refused)
    assert (event.type, event.reason, event.message) == (
        "Warning",
        "CacheClearRefused",
        "InferenceServices use it",
    )


# --- transitions, through plan_model: each reconcile planned from what the last one wrote --------

PROBED = ProbeOutcome(fingerprint=Fingerprint(etag='"e1"', content_length=9))  # not due again for 1 h


def reconcile(the_model: Model, status: ModelStatus, clear: ClearFacts) -> ModelDecision:
    return plan_model(
        the_model.model_copy(update={"status": status}), ModelFacts(probe=PROBED, clear=clear), NOW, CONFIG
    )


def test_the_reconcile_that_records_cleared_deletes_the_job() -> None:
    """Nothing wakes the Model after its Job completed (a Job changes no more once Complete, a
    status write wakes no reconcile, and the next requeue is the revalidation an hour later): the
    Job goes with the reconcile that records the answer, or it stays forever."""
    forced = model(force=True)
    clearing = reconcile(forced, ready(), CLAIM)
    assert clearing.status.cache_clear is not None and clearing.status.cache_clear.phase == "Clearing"
    done = ClearFacts(jobs=(job("Succeeded"),), claim_exists=True)
    cleared = reconcile(forced, clearing.status, done)
    assert cleared.status.cache_clear is not None and cleared.status.cache_clear.phase == "Cleared"
    assert cleared.cache_clear is not None and cleared.cache_clear.deletes == (
        (job("Succeeded").name, "j-1"),
    )
    assert cleared.requeue.after is not None and cleared.requeue.after.total_seconds() >= 3600
    # The Job's deletion brings the Model back: the answer stands, nothing more to do or write.
    after = reconcile(forced, cleared.status, CLAIM)
    assert after.status == cleared.status and after.cache_clear is None


@pytest.mark.parametrize(
    ("record", "jobs", "phase", "creates", "deletes"),
    [
        # Down before Clearing was written, its Job created: taken up, not created again.
        (None, (job("Running"),), "Clearing", False, ()),
        (None, (job("Succeeded"),), "Cleared", False, (job("Succeeded").name,)),
        # Clearing written, the Job gone meanwhile (deleted by hand): created again, same name.
        ("Clearing", (), "Clearing", True, ()),
        ("Clearing", (job("Running"),), "Clearing", False, ()),
        ("Clearing", (job("Succeeded"),), "Cleared", False, (job("Succeeded").name,)),
        ("Clearing", (job("Failed", message="BackoffLimitExceeded"),), "Failed", False, ()),
    ],
)  # fmt: skip
def test_a_restarted_controller_takes_up_a_pending_clear(
    record: str | None, jobs: tuple[PrefetchJob, ...], phase: str, creates: bool, deletes: tuple[str, ...]
) -> None:
    """A restart keeps nothing in memory: the next reconcile plans from the status and the Job
    cache alone."""
    name = clear_job_name("tiny", "r1", KEY)
    stored = (
        CacheClearStatus(request="r1", phase=record, cache_key=KEY, job=name, time=NOW) if record else None
    )
    decision = reconcile(model(), ready(record=stored), ClearFacts(jobs=jobs, claim_exists=True))
    answer = decision.status.cache_clear
    assert answer is not None and (answer.request, answer.phase, answer.job) == ("r1", phase, name)
    plan = decision.cache_clear
    assert plan is not None
    assert (plan.job is not None) is creates
    assert tuple(n for n, _ in plan.deletes) == deletes
    if record == phase:
        assert answer.time == NOW  # the same answer: no new write


def test_a_clear_asked_twice() -> None:
    """The same id again is the answered request; a new id while the first Job runs is a new
    request: its own Job, the first one deleted."""
    first = reconcile(model(request="r1"), ready(), CLAIM)
    running = ClearFacts(jobs=(job("Running", "r1"),), claim_exists=True)
    second = reconcile(model(request="r2"), first.status, running)
    record = second.status.cache_clear
    assert record is not None and (record.request, record.phase) == ("r2", "Clearing")
    assert record.job == clear_job_name("tiny", "r2", KEY) != clear_job_name("tiny", "r1", KEY)
    assert second.cache_clear is not None and second.cache_clear.job is not None
    assert second.cache_clear.deletes == ((job("Running", "r1").name, "j-1"),)
    both = ClearFacts(jobs=(job("Succeeded", "r2"),), claim_exists=True)
    cleared = reconcile(model(request="r2"), second.status, both)
    assert cleared.status.cache_clear is not None and cleared.status.cache_clear.phase == "Cleared"
    again = reconcile(model(request="r2"), cleared.status, CLAIM)
    assert again.status == cleared.status and again.cache_clear is None


def test_an_annotation_under_a_running_service_then_the_service_deleted() -> None:
    """kubectl annotate while a service names the Model: refused, no Job. That id stays answered
    when the service goes; a new request (the command makes one each time) is carried out."""
    used = ClearFacts(services=("web",), claim_exists=True)
    refused = reconcile(model(request="by-hand"), ready(), used)
    record = refused.status.cache_clear
    assert record is not None and (record.phase, record.job) == ("Refused", None)
    assert refused.cache_clear is not None and refused.cache_clear.job is None
    assert "InferenceServices use it (web)" in (record.message or "")
    unused = reconcile(model(request="by-hand"), refused.status, CLAIM)
    assert unused.status == refused.status and unused.cache_clear is None
    asked = reconcile(model(request="r2"), refused.status, CLAIM)
    assert asked.status.cache_clear is not None and asked.status.cache_clear.phase == "Clearing"
    assert asked.cache_clear is not None and asked.cache_clear.job is not None
    # Forced, the same services: carried out.
    forced = reconcile(model(request="r3", force=True), refused.status, used)
    assert forced.status.cache_clear is not None and forced.status.cache_clear.phase == "Clearing"


def answered_record(phase: str, request: str = "r1") -> CacheClearStatus:
    return CacheClearStatus(request=request, phase=phase, cache_key=KEY)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("annotations", "record", "cached", "confirm"),
    [
        # A pending, unforced request the cache would refuse: read the services again.
        ({CLEAR_ANNOTATION: "r1"}, None, ("web",), True),
        ({CLEAR_ANNOTATION: "r1"}, answered_record("Clearing"), ("web",), True),
        ({CLEAR_ANNOTATION: "r2"}, answered_record("Refused"), ("web",), True),
        # The cache names none, the request is forced, or it is answered: the cache's word stands.
        ({CLEAR_ANNOTATION: "r1"}, None, (), False),
        ({CLEAR_ANNOTATION: "r1", FORCE_ANNOTATION: "true"}, None, ("web",), False),
        ({CLEAR_ANNOTATION: "r1"}, answered_record("Refused"), ("web",), False),
        ({CLEAR_ANNOTATION: "r1"}, answered_record("Cleared"), ("web",), False),
        ({}, None, ("web",), False),
        (None, answered_record("Cleared"), ("web",), False),
    ],
)  # fmt: skip
def test_when_the_services_are_read_again(
    annotations: dict[str, str] | None,
    record: CacheClearStatus | None,
    cached: tuple[str, ...],
    confirm: bool,
) -> None:
    assert services_to_confirm(annotations, record, cached) is confirm
