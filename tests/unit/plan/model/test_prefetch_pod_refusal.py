"""Why a prefetch Job has no pod (plan/model/prefetch.py: pod_refusal): the API server's words
from the Job controller's FailedCreate Events, decided on the Event's reason and the Job's uid,
never on its text; nothing while a pod exists, or once one was created after the refusal."""

from typing import Any

import pytest

from llmkube.plan.model.prefetch import awaits_its_pod, pod_refusal

UID = "job-uid"
QUOTA = (
    'pods "m-prefetch-abcd-x1" is forbidden: exceeded quota: no-pods, '
    + "requested: pods=1, used: pods=0, limited: pods=0"
)
LIMIT = 'pods "m-prefetch-abcd-x2" is forbidden: maximum cpu usage per Container is 100m, but limit is 1'


def job(**counts: int) -> dict[str, Any]:
    return {"metadata": {"uid": UID, "name": "m-prefetch-abcd"}, "status": dict(counts)}


def event(note: str, at: str, *, reason: str = "FailedCreate", uid: str = UID, **more: Any) -> dict[str, Any]:
    return {"reason": reason, "note": note, "regarding": {"kind": "Job", "uid": uid}, **more} | (
        {"deprecatedLastTimestamp": at} if at else {}
    )


def pod(phase: str, created: str) -> dict[str, Any]:
    return {"metadata": {"creationTimestamp": created}, "status": {"phase": phase}}


@pytest.mark.parametrize(
    ("name", "the_job", "pods", "events", "expected"),
    [
        ("no events: nothing to say", job(), [], [], ""),
        ("a quota refused the pod", job(), [], [event(QUOTA, "2026-05-01T00:00:00Z")], QUOTA),
        (
            "the latest refusal speaks",
            job(),
            [],
            [event(LIMIT, "2026-05-01T00:05:00Z"), event(QUOTA, "2026-05-01T00:01:00Z")],
            LIMIT,
        ),
        (
            "a series' last observation counts",
            job(),
            [],
            [
                event(QUOTA, "2026-05-01T00:03:00Z"),
                event(
                    LIMIT,
                    "",
                    eventTime="2026-05-01T00:00:00.000000Z",
                    series={"count": 4, "lastObservedTime": "2026-05-01T00:09:00.000000Z"},
                ),
            ],
            LIMIT,
        ),
        (
            "another reason is not a refusal",
            job(),
            [],
            [event(QUOTA, "2026-05-01T00:00:00Z", reason="SuccessfulCreate")],
            "",
        ),
        (
            "another Job's refusal is not this one's",
            job(),
            [],
            [event(QUOTA, "2026-05-01T00:00:00Z", uid="other")],
            "",
        ),
        (
            "a pod runs: no refusal stands",
            job(),
            [pod("Running", "2026-05-01T00:02:00Z")],
            [event(QUOTA, "2026-05-01T00:00:00Z")],
            "",
        ),
        (
            "the Job counts an active pod the cache has not shown yet",
            job(active=1),
            [],
            [event(QUOTA, "2026-05-01T00:00:00Z")],
            "",
        ),
        (
            "a retry refused after a failed pod",
            job(failed=1),
            [pod("Failed", "2026-05-01T00:00:00Z")],
            [event(QUOTA, "2026-05-01T00:04:00Z")],
            QUOTA,
        ),
        (
            "a refusal older than the last pod is history",
            job(failed=1),
            [pod("Failed", "2026-05-01T00:06:00Z")],
            [event(QUOTA, "2026-05-01T00:04:00Z")],
            "",
        ),
        (
            "only the first line, bounded",
            job(),
            [],
            [event("x" * 900 + "\nmore", "2026-05-01T00:00:00Z")],
            "x" * 500,
        ),
    ],
)
def test_pod_refusal(
    name: str,
    the_job: dict[str, Any],
    pods: list[dict[str, Any]],
    events: list[dict[str, Any]],
    expected: str,
) -> None:
    assert pod_refusal(the_job, pods, events) == expected, name


@pytest.mark.parametrize(
    ("the_job", "pods", "expected"),
    [
        (job(), [], True),
        (job(active=1), [], False),
        (job(terminating=1), [], False),
        (job(), [pod("Pending", "2026-05-01T00:00:00Z")], False),
        (job(failed=2), [pod("Failed", "t"), pod("Failed", "t")], True),
    ],
)
def test_awaits_its_pod(the_job: dict[str, Any], pods: list[dict[str, Any]], expected: bool) -> None:
    assert awaits_its_pod(the_job, pods) is expected
