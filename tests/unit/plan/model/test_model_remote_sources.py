"""plan_model for the sources the downloader fetches from where users keep models: hf://
repositories, s3:// buckets and http(s) base URLs with `files` and `mmproj`; the credentials of
`sourceSecretRef`; refusals before the first Ready; and `prefetch`, a Job that fills the cache."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from llmkube.api.model import GGUFMetadata, Model, ModelStatus
from llmkube.plan.apiserver.pod_security import violations
from llmkube.plan.model import (
    ActionKind,
    Fingerprint,
    HeaderFailure,
    ModelDecision,
    ModelFacts,
    ModelPlanConfig,
    PrefetchJob,
    ProbeFailure,
    ProbeOutcome,
    RemoteHeader,
    Requeue,
    model_events,
    plan_model,
)
from llmkube.plan.model.fileset import FileSetProblem, StagingPlan, path_problem, staging_plan
from llmkube.plan.model.prefetch import prefetch_digest, prefetch_job_name, prefetch_result
from llmkube.plan.model.remote import remote_source
from llmkube.plan.model.source import (
    HFSource,
    S3Source,
    SourceKind,
    cache_key,
    parse_hf_source,
    parse_s3_source,
    runtime_model,
)

NOW = datetime(2026, 3, 1, 12, 10, tzinfo=UTC)
HUB = "https://hub.example"
CONFIG = ModelPlanConfig(hf_endpoint=HUB)
META = GGUFMetadata(architecture="llama", model_name="Tiny", layer_count=2, embedding_size=128)
SHARDS = ["Q4/m-00001-of-00003.gguf", "Q4/m-00002-of-00003.gguf", "Q4/m-00003-of-00003.gguf"]


def model(source: str, *, status: ModelStatus | None = None, **spec: Any) -> Model:
    built = Model.model_validate(
        {
            "metadata": {"name": "llama", "namespace": "ml", "generation": 2, "uid": "u-1"},
            "spec": {"source": source, **spec},
        }
    )
    return built.model_copy(update={"status": status})


def plan(m: Model, facts: ModelFacts | None = None, config: ModelPlanConfig = CONFIG) -> ModelDecision:
    return plan_model(m, facts or ModelFacts(), NOW, config)


def conditions(decision: ModelDecision) -> dict[str, tuple[str, str, str]]:
    return {
        c.type: (c.status, c.reason, c.message)
        for c in decision.status.conditions or ()
        if c.type not in {"Ready", "Reconciling", "Stalled"}
    }


# --- sources and file lists, parsed ----------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("hf://org/Repo-GGUF", HFSource("org/Repo-GGUF", "main")),
        ("hf://org/repo@v1.2", HFSource("org/repo", "v1.2")),
        ("hf://org/repo@refs/pr/3", HFSource("org/repo", "refs/pr/3")),
        ("org/repo", HFSource("org/repo", "main")),
        ("hf://org", "does not name a Hugging Face repository"),
        ("hf://org/repo/extra", "does not name a Hugging Face repository"),
        ("hf://../repo", "does not name a Hugging Face repository"),
        ("hf://org/repo@", "is not a revision"),
        ("hf://org/repo@a..b", "is not a revision"),
        ("hf://org/repo@-x", "is not a revision"),
    ],
)
def test_parse_hf_source(source: str, expected: HFSource | str) -> None:
    parsed = parse_hf_source(source)
    if isinstance(expected, str):
        assert isinstance(parsed, str) and expected in parsed
    else:
        assert parsed == expected


@pytest.mark.parametrize(
    ("source", "prefix", "expected"),
    [
        ("s3://models/llama/m.gguf", False, S3Source("models", "llama/m.gguf")),
        ("s3://models/org/Repo", True, S3Source("models", "org/Repo")),
        ("s3://models/org/Repo/", True, S3Source("models", "org/Repo")),
        ("s3://models", True, S3Source("models", "")),
        ("s3://models/", False, "names no object"),
        ("s3://Models/x", False, "is not an S3 bucket name"),
        ("s3://ab/x", False, "is not an S3 bucket name"),
        ("s3://models/a/../b", False, '".." part'),
    ],
)
def test_parse_s3_source(source: str, prefix: bool, expected: S3Source | str) -> None:
    parsed = parse_s3_source(source, prefix=prefix)
    if isinstance(expected, str):
        assert isinstance(parsed, str) and expected in parsed
    else:
        assert parsed == expected


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("Q4/m.gguf", None),
        ("a b.gguf", None),
        ("", "is empty"),
        ("/etc/passwd", "is absolute"),
        ("../x", '".." part'),
        ("a/./b", '"." or ".." part'),
        ("a//b", "empty"),
        ("a\tb", "control character"),
        ("line\nbreak", "control character"),
        ("*.gguf", "wildcard"),
        ("m-0000[1-3].gguf", "wildcard"),
    ],
)
def test_path_problem(path: str, problem: str | None) -> None:
    found = path_problem(path)
    assert (found is None) if problem is None else (found is not None and problem in found)


def test_staging_plan_dedups_keeps_the_order_and_puts_the_projector_last() -> None:
    spec = model("hf://o/r", files=["b.gguf", "a.gguf", "b.gguf"], mmproj="p.gguf").spec
    assert staging_plan(spec) == StagingPlan(
        primary="b.gguf", files=("b.gguf", "a.gguf", "p.gguf"), mmproj="p.gguf"
    )
    assert staging_plan(model("hf://o/r").spec) is None
    problem = staging_plan(model("hf://o/r", mmproj="p.gguf").spec)
    assert isinstance(problem, FileSetProblem) and problem.field == "spec.files"
    problem = staging_plan(model("hf://o/r", files=["a.gguf", "../b"]).spec)
    assert isinstance(problem, FileSetProblem) and problem.field == "spec.files[1]"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("hf://org/repo", ("org/repo", "")),
        ("hf://org/repo@v2", ("org/repo", "v2")),
        ("org/repo", ("org/repo", "")),
        ("https://x/m.gguf", ("https://x/m.gguf", "")),
    ],
)
def test_what_a_runtime_that_resolves_repositories_is_given(source: str, expected: tuple[str, str]) -> None:
    served = runtime_model(source)
    assert (served.model_id, served.revision) == expected


def test_remote_locations_of_each_kind() -> None:
    hf = remote_source(model("hf://org/repo@v1", files=SHARDS, mmproj="mmproj.gguf"), HUB)
    assert hf is not None and not isinstance(hf, FileSetProblem)
    assert hf.kind is SourceKind.HF and hf.mmproj == "mmproj.gguf"
    assert [f.location for f in hf.files] == [
        *(f"{HUB}/org/repo/resolve/v1/{path}" for path in SHARDS),
        f"{HUB}/org/repo/resolve/v1/mmproj.gguf",
    ]
    assert hf.staged == (*SHARDS, "mmproj.gguf")
    s3 = remote_source(model("s3://models/llama/m.gguf", sourceSecretRef={"name": "creds"}), HUB)
    assert s3 is not None and not isinstance(s3, FileSetProblem)
    assert [(f.dest, f.location) for f in s3.files] == [("llama.gguf", "/models/llama/m.gguf")]
    assert s3.secret == "creds" and s3.staged == ()
    assert remote_source(model("hf://org/repo"), HUB) is None  # the runtime resolves the repository
    assert remote_source(model("pvc://c/p"), HUB) is None


# --- planning -------------------------------------------------------------------------------


def test_the_first_reconcile_sizes_every_file_and_reads_the_model_files_header() -> None:
    m = model("hf://org/repo@v1", files=SHARDS, mmproj="mmproj.gguf", sourceSecretRef={"name": "hf"})
    decision = plan(m)
    action = decision.action
    assert action.kind is ActionKind.PROBE_FINGERPRINT and action.read_header
    assert action.source == f"{HUB}/org/repo/resolve/v1/{SHARDS[0]}"
    assert len(action.locations) == 4 and action.locations[0] == action.source
    assert (action.remote_kind, action.secret, action.namespace) == (SourceKind.HF, "hf", "ml")


def test_a_sharded_model_is_ready_with_its_staged_files_the_sum_of_their_sizes_and_the_header() -> None:
    m = model("hf://org/repo@v1", files=SHARDS, mmproj="mmproj.gguf")
    probe = ProbeOutcome(fingerprint=Fingerprint(etag='"sha-1"', content_length=3 * 1024**3))
    header = RemoteHeader(metadata=META, bytes_fetched=262144, file_size=1024**3)
    decision = plan(m, ModelFacts(probe=probe, remote_header=header))
    status = decision.status
    assert status.phase == "Ready" and status.cache_key == cache_key("hf://org/repo@v1")
    assert status.staged_files == [*SHARDS, "mmproj.gguf"]
    assert status.size == "3.0 GiB"  # every file, not the first shard's 1 GiB
    assert status.gguf == META and status.source_e_tag == '"sha-1"'
    assert conditions(decision)["Available"][:2] == ("True", "WorkloadResolved")


def test_a_ready_model_never_says_size_0() -> None:
    """A status an earlier version wrote ("0" for every source it did not download) is not kept."""
    old = ModelStatus(phase="Ready", size="0", cache_key=cache_key("https://h/m.gguf"), observed_generation=2)
    unsized = ProbeOutcome(failure=ProbeFailure.TIMEOUT, detail="HEAD: no answer")
    decision = plan(model("https://h/m.gguf", status=old), ModelFacts(probe=unsized))
    assert decision.status.phase == "Ready" and decision.status.size is None


@pytest.mark.parametrize(
    ("facts", "reason", "words"),
    [
        (
            ModelFacts(
                probe=ProbeOutcome(failure=ProbeFailure.UNAUTHORIZED, detail="HEAD: 403"),
                remote_header=RemoteHeader(
                    failure=HeaderFailure.HTTP_STATUS,
                    http_status=403,
                    detail="GET http://s3/models/m.gguf: HTTP 403 InvalidAccessKeyId: The key does not exist",
                ),
            ),
            "SourceUnauthorized",
            "HTTP 403 InvalidAccessKeyId",
        ),
        (
            ModelFacts(
                probe=ProbeOutcome(failure=ProbeFailure.UNAUTHORIZED, detail="HEAD http://h: 401 (GatedRepo)")
            ),
            "SourceUnauthorized",
            "401 (GatedRepo)",
        ),
        (
            ModelFacts(
                probe=ProbeOutcome(failure=ProbeFailure.NOT_FOUND, detail="HEAD http://h: 404 Not Found")
            ),
            "SourceNotFound",
            "has no such file (HEAD http://h: 404 Not Found)",
        ),
        (
            ModelFacts(
                probe=ProbeOutcome(failure=ProbeFailure.SECRET_NOT_FOUND, detail='secrets "creds" not found')
            ),
            "SourceSecretNotFound",
            'names Secret "creds", which does not exist',
        ),
    ],
)
def test_a_source_that_says_no_before_the_first_ready_fails_and_is_looked_at_again_in_5_minutes(
    facts: ModelFacts, reason: str, words: str
) -> None:
    m = model("s3://models/m.gguf", sourceSecretRef={"name": "creds"})
    decision = plan(m, facts)
    assert decision.status.phase == "Failed"
    status, got_reason, message = conditions(decision)["Degraded"]
    assert (status, got_reason) == ("True", reason) and words in message
    assert decision.requeue == Requeue(after=timedelta(minutes=5))  # never a retry storm


def test_a_refusal_during_a_revalidation_of_a_ready_model_leaves_it_ready() -> None:
    source = "s3://models/m.gguf"
    first = plan(
        model(source), ModelFacts(probe=ProbeOutcome(fingerprint=Fingerprint(etag='"a"', content_length=9)))
    )
    ready = first.status
    assert ready.phase == "Ready"
    later = plan_model(
        model(source, status=ready),
        ModelFacts(probe=ProbeOutcome(failure=ProbeFailure.UNAUTHORIZED, detail="HEAD: 403")),
        NOW + timedelta(hours=2),
        CONFIG,
    )
    assert later.status.phase == "Ready"  # the cache still holds the files; the probe told nothing


def test_credentials_the_controller_may_not_read_leave_size_and_header_out_and_say_so() -> None:
    m = model("s3://models/m.gguf", sourceSecretRef={"name": "creds"})
    unreadable = ProbeOutcome(failure=ProbeFailure.CREDENTIALS_UNREADABLE, detail="forbidden")
    header = RemoteHeader(failure=HeaderFailure.CREDENTIALS_UNREADABLE, detail="forbidden")
    decision = plan(m, ModelFacts(probe=unreadable, remote_header=header))
    status = decision.status
    assert status.phase == "Ready" and status.size is None and status.gguf is None
    message = conditions(decision)["Available"][2]
    assert 'the controller may not read Secret "creds"' in message and "docs/models.md" in message
    assert "SourceDrifted" not in conditions(decision)


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ({"source": "/data/m.gguf", "files": ["a.gguf"]}, "not from"),
        (
            {"source": "https://h/m.gguf", "files": ["a.gguf"], "hardware": {"accelerator": "metal"}},
            "not from",
        ),
        ({"source": "hf://o/r", "files": ["../x"]}, "spec.files[0]"),
        ({"source": "hf://o/r", "mmproj": "p.gguf"}, "spec.files"),
    ],
)
def test_files_that_cannot_be_staged_fail_without_a_retry(spec: dict[str, Any], words: str) -> None:
    decision = plan(model(**spec))
    assert decision.status.phase == "Failed" and decision.requeue == Requeue()
    status, reason, message = conditions(decision)["Degraded"]
    assert (status, reason) == ("True", "InvalidFileSet") and words in message


METAL = {"accelerator": "metal"}


def test_a_metal_model_of_hugging_face_files_is_sized_read_and_ready_for_the_host_agent() -> None:
    """The host agent downloads the files a Model lists from the Hub (never the whole repository):
    the controller sizes them and reads the header as for a pod, and leaves the download to it."""
    m = model("hf://org/repo@v1", files=SHARDS, mmproj="mmproj.gguf", hardware=METAL)
    action = plan(m).action
    assert action.kind is ActionKind.PROBE_FINGERPRINT and action.read_header
    assert action.source == f"{HUB}/org/repo/resolve/v1/{SHARDS[0]}" and len(action.locations) == 4
    decision = plan(m, PROBED)
    assert decision.status.phase == "Ready" and decision.prefetch is None
    assert decision.status.staged_files == [*SHARDS, "mmproj.gguf"]
    assert "host metal-agent will fetch" in conditions(decision)["Available"][2]


@pytest.mark.parametrize(
    ("spec", "reason", "words"),
    [
        ({"source": "https://h/dir", "files": ["a.gguf"]}, "InvalidFileSet", "http(s) source of a Model"),
        ({"source": "s3://models/m.gguf"}, "InvalidSource", "fetches http(s) and Hugging Face files only"),
        ({"source": "s3://models/p", "files": ["a.gguf"]}, "InvalidFileSet", "not from"),
    ],
)
def test_what_the_host_agent_does_not_fetch_fails_at_once(
    spec: dict[str, Any], reason: str, words: str
) -> None:
    decision = plan(model(**spec, hardware=METAL))
    assert decision.status.phase == "Failed" and decision.requeue == Requeue()
    status, found, message = conditions(decision)["Degraded"]
    assert (status, found) == ("True", reason) and words in message, message


def test_a_source_that_names_no_object_fails_as_invalid() -> None:
    decision = plan(model("s3://models/"))
    assert conditions(decision)["Degraded"][1] == "InvalidSource"


def test_a_pvc_directory_with_files_stages_them_from_the_claim() -> None:
    from llmkube.plan.model import ModelFacts as Facts

    decision = plan(model("pvc://weights/llama", files=SHARDS), Facts(pvc_phase="Bound"))
    assert decision.status.phase == "Ready"
    assert decision.status.path == f"/model-source/llama/{SHARDS[0]}"
    assert decision.status.staged_files == SHARDS


# --- prefetch -------------------------------------------------------------------------------

PROBED = ModelFacts(
    probe=ProbeOutcome(fingerprint=Fingerprint(etag='"e1"', content_length=3000)),
    remote_header=RemoteHeader(metadata=META, bytes_fetched=3000, file_size=2000),
)


def judged(m: Model) -> Model:
    """The Model after its first reconcile: probed and judged."""
    decision = plan(m, PROBED)
    return m.model_copy(update={"status": decision.status})


def prefetching(**spec: Any) -> Model:
    return model("hf://org/repo@v1", files=SHARDS, prefetch=True, **spec)


def test_prefetch_creates_a_hardened_job_owned_by_the_model_and_says_downloading() -> None:
    m = prefetching(sourceSecretRef={"name": "hf"})
    decision = plan(m, PROBED)
    assert decision.status.phase == "Downloading"
    status, reason, message = conditions(decision)["Progressing"]
    assert (status, reason) == ("True", "PrefetchStarted") and "namespace's model cache" in message
    assert decision.prefetch is not None and decision.prefetch.deletes == ()
    job = decision.prefetch.job
    assert job is not None and job["kind"] == "Job"
    meta = job["metadata"]
    assert meta["name"].startswith("llama-prefetch-") and len(meta["name"]) <= 63
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "inference.llmkube.dev/v1alpha1",
            "kind": "Model",
            "name": "llama",
            "uid": "u-1",
            "controller": True,
            "blockOwnerDeletion": False,
        }
    ]
    pod = job["spec"]["template"]["spec"]
    assert violations(job["spec"]["template"], "restricted") == []  # Pod Security restricted
    assert pod["automountServiceAccountToken"] is False and pod["restartPolicy"] == "Never"
    (container,) = pod["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["CACHE_DIR"] == f"/models/{cache_key('hf://org/repo@v1')}"
    assert env["MODEL_FILES"].split("\n")[0] == f"{SHARDS[0]}\t{HUB}/org/repo/resolve/v1/{SHARDS[0]}"
    assert container["envFrom"] == [{"secretRef": {"name": "hf"}}]
    assert pod["volumes"][0] == {
        "name": "model-cache",
        "persistentVolumeClaim": {"claimName": "llmkube-model-cache"},
    }
    rule = job["spec"]["podFailurePolicy"]["rules"][0]
    assert rule["action"] == "FailJob" and rule["onExitCodes"]["values"] == [3]
    assert decision.requeue == Requeue(after=timedelta(seconds=10))


def test_the_prefetch_jobs_pod_is_the_inference_pods_downloader() -> None:
    """The same environment as the serving pod's init container: the first serving pod is a cache hit."""
    from llmkube.api.inferenceservice import InferenceServiceSpec
    from llmkube.plan.inferenceservice.config import OperatorConfig
    from llmkube.plan.inferenceservice.storage import ModelStorage, plan_storage

    m = judged(prefetching())
    job = plan(m, PROBED).prefetch
    assert job is not None and job.job is not None
    (container,) = job.job["spec"]["template"]["spec"]["containers"]
    storage = plan_storage(
        namespace="ml",
        spec=InferenceServiceSpec(model_ref="llama"),
        model=m,
        config=OperatorConfig(hf_endpoint=HUB),
        needs_model_init=True,
    )
    assert isinstance(storage, ModelStorage)
    (init,) = storage.init_containers
    assert container["env"] == init["env"] and container["command"] == init["command"]


def job_of(m: Model, phase: str, **fields: Any) -> PrefetchJob:
    decision = plan(m, PROBED)
    assert decision.prefetch is not None and decision.prefetch.job is not None
    return PrefetchJob(name=decision.prefetch.job["metadata"]["name"], uid="j-1", phase=phase, **fields)  # type: ignore[arg-type]


def test_prefetch_progress_is_shown_while_the_job_runs() -> None:
    m = judged(prefetching())
    running = job_of(m, "Running", received=3 * 1024**2, total=12 * 1024**2)
    decision = plan(m, ModelFacts(prefetch_jobs=(running,)))
    assert decision.status.phase == "Downloading"
    status, reason, message = conditions(decision)["Progressing"]
    assert (status, reason) == ("True", "PrefetchRunning")
    assert message.endswith(": 3.0 MiB of 12.0 MiB (25%)")
    assert decision.prefetch is not None and decision.prefetch.job is None  # never created twice


def test_a_download_keeps_each_conditions_transition_time_while_its_status_holds() -> None:
    # The planner builds the Ready status of a remote Model and then Downloading on top of it, so
    # Progressing passes through False inside one plan; only the status written before counts.
    m = judged(prefetching())
    assert m.status is not None
    times = {c.type: (c.status, c.last_transition_time) for c in m.status.conditions or ()}
    assert times["Progressing"] == ("True", NOW)
    for minutes, received in ((1, 1), (2, 5), (3, 5)):
        running = job_of(m, "Running", received=received * 1024**2, total=12 * 1024**2)
        at = NOW + timedelta(minutes=minutes)
        decision = plan_model(m, ModelFacts(prefetch_jobs=(running,)), at, CONFIG)
        after = {c.type: (c.status, c.last_transition_time) for c in decision.status.conditions or ()}
        assert {t: after[t] for t in times} == times, minutes
        m = m.model_copy(update={"status": decision.status})
    # The last reconcile saw what the one before it saw: nothing to write.
    assert (
        decision.status
        == plan_model(m, ModelFacts(prefetch_jobs=(running,)), NOW + timedelta(minutes=4), CONFIG).status
    )


@pytest.mark.parametrize(
    ("waited", "requeue"),
    [
        (timedelta(0), timedelta(seconds=5)),
        (timedelta(seconds=30), timedelta(seconds=30)),
        (timedelta(minutes=10), timedelta(seconds=60)),
    ],
)
def test_a_job_that_cannot_create_its_pod_says_why_and_is_looked_at_again_with_backoff(
    waited: timedelta, requeue: timedelta
) -> None:
    m = judged(prefetching())
    words = 'pods "x" is forbidden: exceeded quota: no-pods, requested: pods=1, used: pods=0, limited: pods=0'
    refused = job_of(m, "Running", pod_refusal=words)
    decision = plan_model(m, ModelFacts(prefetch_jobs=(refused,)), NOW + waited, CONFIG)
    assert decision.status.phase == "Downloading"
    status, reason, message = conditions(decision)["Progressing"]
    assert (status, reason) == ("True", "PrefetchPodNotCreated")
    assert f'Prefetch Job "{refused.name}" cannot create its pod: {words}' in message
    ready = next(c for c in decision.status.conditions or () if c.type == "Ready")
    assert (ready.status, ready.reason, ready.message) == ("False", "PrefetchPodNotCreated", message)
    assert decision.requeue == Requeue(after=requeue)  # never a spin, never the rate limiter
    assert decision.prefetch is not None and decision.prefetch.job is None  # the Job stays
    events = model_events(m.status, decision.status)
    assert [(e.type, e.reason, e.message) for e in events] == [("Warning", "PrefetchPodNotCreated", message)]
    # Once the pod exists the words go: the download's progress again, as a Normal Event.
    admitted = plan(
        m.model_copy(update={"status": decision.status}),
        ModelFacts(prefetch_jobs=(replace(refused, pod_refusal=""),)),
    )
    assert conditions(admitted)["Progressing"][:2] == ("True", "PrefetchRunning")
    assert words not in str(admitted.status.conditions)
    assert admitted.requeue == Requeue(after=timedelta(seconds=10))
    assert [(e.type, e.reason) for e in model_events(decision.status, admitted.status)] == [
        ("Normal", "PrefetchRunning")
    ]


def test_a_finished_prefetch_is_ready_with_the_cache_key_and_the_downloaded_size() -> None:
    m = judged(prefetching())
    m = m.model_copy(
        update={"status": m.status.model_copy(update={"size": None, "source_content_length": None})}
    )  # type: ignore[union-attr]
    done = job_of(
        m,
        "Succeeded",
        message="llmkube-download: done: 3 files, 4194304 bytes in /models/k (3 downloaded, 0 cache hits)",
    )
    decision = plan(m, ModelFacts(prefetch_jobs=(done,)))
    status = decision.status
    assert status.phase == "Ready" and status.cache_key == cache_key("hf://org/repo@v1")
    assert status.size == "4.0 MiB"
    available = conditions(decision)["Available"]
    assert available[:2] == ("True", "ModelPrefetched") and "3 files, 4194304 bytes" in available[2]
    assert conditions(decision)["Progressing"][:2] == ("False", "Superseded")


def test_a_failed_prefetch_fails_the_model_with_the_downloaders_words_and_no_new_job() -> None:
    m = judged(prefetching())
    failed = job_of(
        m, "Failed", message="llmkube-download: failed: m.gguf from s3://x: HTTP 403 SignatureDoesNotMatch"
    )
    decision = plan(m, ModelFacts(prefetch_jobs=(failed,)))
    assert decision.status.phase == "Failed"
    status, reason, message = conditions(decision)["Degraded"]
    assert (status, reason) == ("True", "PrefetchFailed")
    assert "HTTP 403 SignatureDoesNotMatch" in message and "delete the Job to try again" in message
    assert decision.prefetch is not None and decision.prefetch.job is None and decision.requeue == Requeue()


def test_a_changed_spec_replaces_the_job_and_prefetch_false_removes_it() -> None:
    m = judged(prefetching())
    old = job_of(m, "Succeeded", message="")
    edited = m.model_copy(update={"spec": m.spec.model_copy(update={"files": SHARDS[:2]})})
    decision = plan(edited, replace(PROBED, prefetch_jobs=(old,)))
    assert decision.prefetch is not None and decision.prefetch.deletes == ((old.name, "j-1"),)
    assert decision.prefetch.job is not None and decision.prefetch.job["metadata"]["name"] != old.name
    off = m.model_copy(update={"spec": m.spec.model_copy(update={"prefetch": False})})
    decision = plan(off, ModelFacts(prefetch_jobs=(old,)))
    assert decision.prefetch is not None and decision.prefetch.job is None
    assert decision.prefetch.deletes == ((old.name, "j-1"),) and decision.status.phase == "Ready"


def test_prefetch_needs_the_namespace_cache() -> None:
    decision = plan(prefetching(), PROBED, replace(CONFIG, namespace_cache=False))
    assert decision.status.phase == "Ready" and decision.prefetch is None


def test_with_on_change_a_changed_upstream_is_prefetched_again_by_a_new_job() -> None:
    m = judged(prefetching(refreshPolicy="OnChange"))
    first = job_of(m, "Succeeded", message="done: 3 files, 3000 bytes")
    m = m.model_copy(update={"status": plan(m, ModelFacts(prefetch_jobs=(first,))).status})
    changed = ModelFacts(
        probe=ProbeOutcome(fingerprint=Fingerprint(etag='"e2"', content_length=3100)), prefetch_jobs=(first,)
    )
    decision = plan_model(m, changed, NOW + timedelta(hours=2), CONFIG)
    assert decision.prefetch is not None and decision.prefetch.job is not None
    assert decision.prefetch.job["metadata"]["name"] != first.name
    assert decision.prefetch.deletes == ((first.name, "j-1"),)
    assert conditions(decision)["SourceDrifted"][:2] == ("True", "UpstreamChanged")


def test_prefetch_job_names_are_bounded_and_differ_by_digest() -> None:
    long = "m" * 253
    name = prefetch_job_name(long, "0123456789abcdef")
    assert len(name) <= 63 and name.endswith("-prefetch-01234567")
    m = prefetching()
    remote = remote_source(m, HUB)
    assert remote is not None and not isinstance(remote, FileSetProblem)
    status = ModelStatus()
    other = prefetching(sha256="ab" * 32)
    remote_other = remote_source(other, HUB)
    assert not isinstance(remote_other, FileSetProblem) and remote_other is not None
    assert prefetch_digest(m, remote, status) != prefetch_digest(other, remote_other, status)


def test_prefetch_result_reads_the_downloaders_last_line() -> None:
    result = prefetch_result(
        "llmkube-download: done: 2 files, 1234 bytes in /models/k (1 downloaded, 1 cache hits)"
    )
    assert result is not None and (result.files, result.bytes) == (2, 1234)
    assert prefetch_result("llmkube-download: failed: x") is None


def test_a_web_identity_model_is_never_probed_anonymously_and_says_why() -> None:
    role = "arn:aws:iam::123456789012:role/models-reader"
    m = model("s3://models/m.gguf", webIdentity={"roleArn": role})
    first = plan(m, ModelFacts())
    assert first.action.kind is ActionKind.PROBE_FINGERPRINT
    assert (first.action.identity, first.action.secret) == (role, "")
    # what the executor answers for it (nothing is sent: the controller has none of the keys)
    unreadable = ProbeOutcome(failure=ProbeFailure.CREDENTIALS_UNREADABLE, detail="the pods' web identity")
    decision = plan(m, ModelFacts(probe=unreadable))
    assert decision.status.phase == "Ready" and decision.status.size is None
    message = conditions(decision)["Available"][2]
    assert f'the pods\' web identity (role "{role}") signs the requests' in message
