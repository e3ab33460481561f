"""What the Model controller makes of its prefetch Jobs and their pods (controllers/
model_prefetch.py, plan/model/prefetch.py): the Job's phase from its conditions, a finished
downloader's last words from its termination message (the server's own refusal, not only the Job
controller's BackoffLimitExceeded), the latest finished pod's words when it was retried, and while
one runs the bytes its last progress line counted; Jobs of other Models are not its."""

from typing import Any

from llmkube.controllers.model_prefetch import JOB_NAME_LABEL, prefetch_jobs_of
from llmkube.plan.model.downloader import NAME
from llmkube.plan.model.facts import PrefetchJob
from llmkube.plan.model.prefetch import progress_of

UID = "model-uid"


def job(name: str, *conditions: tuple[str, str, str], owner: str = UID) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ml",
            "uid": f"{name}-uid",
            "ownerReferences": [{"uid": owner, "controller": True}],
        },
        "status": {
            "conditions": [
                {"type": kind, "status": "True", "reason": reason, "message": message}
                for kind, reason, message in conditions
            ]
        },
    }


def pod(name: str, job_name: str, state: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {JOB_NAME_LABEL: job_name}},
        "status": {"containerStatuses": [{"name": NAME, "state": state}]},
    }


def terminated(message: str, at: str) -> dict[str, Any]:
    return {"terminated": {"exitCode": 3, "message": message, "finishedAt": at}}


async def test_the_facts_of_every_job_with_what_its_pods_said() -> None:
    jobs = [
        job("m-prefetch-aaaa", ("Failed", "PodFailurePolicy", "Container model-downloader exited 3")),
        job("m-prefetch-bbbb"),
        job("m-prefetch-cccc", ("Complete", "", "")),
        job("other-prefetch-dddd", owner="another-model"),
    ]
    refused = "llmkube-download: failed: m.gguf from s3://b/m: HTTP 403 InvalidAccessKeyId: no such key"
    pods = [
        pod(
            "a-1", "m-prefetch-aaaa", terminated("llmkube-download: failed: HTTP 503", "2026-05-01T00:00:00Z")
        ),
        pod("a-2", "m-prefetch-aaaa", terminated(f"{refused}\n", "2026-05-01T00:01:00Z")),
        pod("b-1", "m-prefetch-bbbb", {"running": {}}),
        pod("c-1", "m-prefetch-cccc", terminated("llmkube-download: done: 2 files, 900 bytes in /m", "x")),
    ]
    reads: list[tuple[str, str]] = []

    async def read_log(namespace: str, name: str) -> str:
        reads.append((namespace, name))
        return "llmkube-download: downloading m.gguf\nllmkube-download: 300 of 1200 bytes (25%)\n"

    facts = await prefetch_jobs_of(jobs, pods, UID, read_log)
    assert facts == (
        PrefetchJob("m-prefetch-aaaa", "m-prefetch-aaaa-uid", "Failed", refused),
        PrefetchJob("m-prefetch-bbbb", "m-prefetch-bbbb-uid", "Running", received=300, total=1200),
        PrefetchJob(
            "m-prefetch-cccc",
            "m-prefetch-cccc-uid",
            "Succeeded",
            "llmkube-download: done: 2 files, 900 bytes in /m",
        ),
    )
    assert reads == [("ml", "b-1")]  # only the running downloader's log is read


async def test_without_pods_the_job_controllers_words_stand() -> None:
    async def no_log(namespace: str, name: str) -> None:
        raise AssertionError("no pod runs: nothing to read")

    [fact] = await prefetch_jobs_of(
        [
            job(
                "m-prefetch-aaaa",
                ("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
            )
        ],
        [],
        UID,
        no_log,
    )
    assert fact.message == "BackoffLimitExceeded: Job has reached the specified backoff limit"


def test_progress_lines() -> None:
    assert progress_of(None) == (None, None)
    assert progress_of("llmkube-download: downloading m.gguf (12 bytes)") == (None, None)
    assert progress_of("llmkube-download: 5 of 10 bytes (50%)\nllmkube-download: 7 of 10 bytes (70%)") == (
        7,
        10,
    )
    assert progress_of("llmkube-download: 4096 bytes") == (4096, None)
    assert progress_of("llmkube-download: 10 of 0 bytes (m.gguf done)") == (10, None)


async def test_cache_clear_jobs_are_told_apart_from_prefetch_jobs() -> None:
    """One Job cache holds both kinds (by their component label): each list has only its own."""
    from llmkube.api.constants import LABEL_COMPONENT
    from llmkube.controllers.model_prefetch import clear_jobs_of
    from llmkube.plan.model.cache_clear import COMPONENT as CLEAR

    prefetch = job("m-prefetch-aaaa", ("Complete", "", ""))
    clear = job("m-cache-clear-bbbb", ("Complete", "", ""))
    clear["metadata"]["labels"] = {LABEL_COMPONENT: CLEAR}
    others = job("o-cache-clear-cccc", owner="another-model")
    others["metadata"]["labels"] = {LABEL_COMPONENT: CLEAR}

    async def no_log(namespace: str, name: str) -> str:
        raise AssertionError("no pod runs")

    found = await prefetch_jobs_of([prefetch, clear, others], [], UID, no_log)
    assert [fact.name for fact in found] == ["m-prefetch-aaaa"]
    assert clear_jobs_of([prefetch, clear, others], UID) == (
        PrefetchJob("m-cache-clear-bbbb", "m-cache-clear-bbbb-uid", "Succeeded"),
    )


async def test_a_running_job_without_a_pod_says_why_from_its_failed_create_events() -> None:
    """Only a running Job with no live pod has its Events listed (one list, selected by the
    server on the Job's uid and the reason); its fact carries the API server's refusal."""
    from llmkube.controllers.model_prefetch import refusals_selector

    refused = 'pods "m-prefetch-aaaa-x" is forbidden: exceeded quota: no-pods'
    jobs = [job("m-prefetch-aaaa"), job("m-prefetch-bbbb"), job("m-prefetch-cccc", ("Complete", "", ""))]
    pods = [pod("b-1", "m-prefetch-bbbb", {"running": {}})]
    lists: list[tuple[str, str]] = []

    async def read_log(namespace: str, name: str) -> str:
        return ""

    async def read_events(namespace: str, selector: str) -> list[dict[str, Any]]:
        lists.append((namespace, selector))
        return [
            {
                "reason": "FailedCreate",
                "note": refused,
                "regarding": {"uid": "m-prefetch-aaaa-uid"},
                "deprecatedLastTimestamp": "2026-05-01T00:00:00Z",
            }
        ]

    facts = await prefetch_jobs_of(jobs, pods, UID, read_log, read_events)
    assert [(fact.name, fact.pod_refusal) for fact in facts] == [
        ("m-prefetch-aaaa", refused),
        ("m-prefetch-bbbb", ""),
        ("m-prefetch-cccc", ""),
    ]
    assert lists == [("ml", "regarding.uid=m-prefetch-aaaa-uid,reason=FailedCreate")]
    assert refusals_selector("u") == "regarding.uid=u,reason=FailedCreate"
