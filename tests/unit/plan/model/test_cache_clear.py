"""`llmkube cache clear`'s decision (plan/model/cache_clear.py), table-driven, and its Job's script
run for real with sh on a directory laid out as the cache claim is."""

import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from llmkube.api.model import CacheClearStatus, Model, ModelStatus
from llmkube.plan.model.cache_clear import (
    CLEAR_ANNOTATION,
    CLEAR_SCRIPT,
    CONTAINER,
    FORCE_ANNOTATION,
    clear_job_name,
    plan_cache_clear,
)
from llmkube.plan.model.decision import ModelPlanConfig
from llmkube.plan.model.facts import ClearFacts, Fingerprint, ModelFacts, PrefetchJob, ProbeOutcome
from llmkube.plan.model.planner import plan_model
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
    from llmkube.plan.model.events import model_events

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
