"""Preemptions noted from the pod cache and completed from the scheduler's Events, whichever comes
first, until the service's status has told them (controllers/preemptions.py)."""

from datetime import UTC, datetime
from typing import Any

from llmkube.controllers.preemptions import (
    BY_POD_UID,
    BY_REGARDING_UID,
    RETAIN,
    PreemptionTracker,
    regarding_uid_index,
    uid_index,
)
from llmkube.kube.cache import Change, Store
from llmkube.kube.types import ObjectKey
from llmkube.plan.inferenceservice.preemption import Preemption

AT = datetime(2026, 3, 1, 11, 59, 30, tzinfo=UTC)
DEMO = ObjectKey("ai", "demo")


def a_pod(
    name: str, service: str, *, namespace: str = "ai", marked: bool = False, priority: int = 10_000
) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "True"}]
    if marked:
        conditions.append(
            {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
             "lastTransitionTime": "2026-03-01T11:59:30Z"}
        )  # fmt: skip
    return {
        "metadata": {
            "name": name, "namespace": namespace, "uid": f"uid-{name}",
            "labels": {"inference.llmkube.dev/service": service},
        },
        "spec": {"nodeName": "gpu-0", "priority": priority},
        "status": {"phase": "Running", "conditions": conditions},
    }  # fmt: skip


def an_event(
    victim: str, preemptor: str, *, namespace: str = "ai", preemptor_namespace: str = "team-b"
) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{victim}.18a", "namespace": namespace},
        "regarding": {"kind": "Pod", "namespace": namespace, "name": victim, "uid": f"uid-{victim}"},
        "related": {
            "kind": "Pod", "namespace": preemptor_namespace, "name": preemptor, "uid": f"uid-{preemptor}"
        },
    }  # fmt: skip


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def tracker() -> tuple[PreemptionTracker, Store, Store, Clock]:
    pods, events, clock = (
        Store({BY_POD_UID: uid_index}),
        Store({BY_REGARDING_UID: regarding_uid_index}),
        Clock(),
    )
    return PreemptionTracker(pods, events, clock=clock), pods, events, clock


def modified(pods: Store, pod: dict[str, Any]) -> Change:
    old = pods.upsert(pod)
    return Change("MODIFIED" if old else "ADDED", old, pod)


def test_the_mark_then_the_event_then_reported() -> None:
    preemptions, pods, events, _ = tracker()
    pods.upsert(a_pod("urgent-1", "urgent", namespace="team-b", priority=1_000_000))  # the preemptor, ours
    assert preemptions.follow_pod(modified(pods, a_pod("demo-1", "demo"))) == []  # no mark: nothing
    assert preemptions.follow_pod(modified(pods, a_pod("demo-1", "demo", marked=True))) == [DEMO]
    assert preemptions.pending(DEMO) == Preemption(
        "demo-1", "gpu-0", AT
    )  # before the Event: only what the pod says
    pods.delete("ai/demo-1")  # deleted at once: the record outlives the pod
    assert preemptions.follow_pod(Change("DELETED", a_pod("demo-1", "demo", marked=True), None)) == []

    event = an_event("demo-1", "urgent-1")
    events.upsert(event)
    assert preemptions.follow_event(Change("ADDED", None, event)) == [DEMO]
    complete = Preemption(
        "demo-1", "gpu-0", AT, by="pod team-b/urgent-1", by_service="team-b/urgent", by_priority=1_000_000
    )
    assert preemptions.pending(DEMO) == complete
    preemptions.reported(DEMO, complete)
    assert preemptions.pending(DEMO) is None  # told: not again
    pods.delete("team-b/urgent-1")  # the preemptor goes: what was told of it stays true
    assert preemptions.pending(DEMO) is None
    assert preemptions.pending(ObjectKey("ai", "other")) is None


def test_the_event_before_the_mark_and_a_preemptor_that_is_not_ours() -> None:
    preemptions, pods, events, _ = tracker()
    event = an_event("demo-1", "batch-9", preemptor_namespace="jobs")
    events.upsert(event)
    assert preemptions.follow_event(Change("ADDED", None, event)) == []  # no victim known yet
    assert preemptions.follow_pod(modified(pods, a_pod("demo-1", "demo", marked=True))) == [DEMO]
    assert preemptions.pending(DEMO) == Preemption("demo-1", "gpu-0", AT, by="pod jobs/batch-9")


def test_reported_without_the_event_is_told_again_once_the_event_comes() -> None:
    preemptions, pods, events, _ = tracker()
    preemptions.follow_pod(modified(pods, a_pod("demo-1", "demo", marked=True)))
    first = preemptions.pending(DEMO)
    assert first is not None
    preemptions.reported(DEMO, first)
    assert preemptions.pending(DEMO) is None
    event = an_event("demo-1", "urgent-1")
    events.upsert(event)
    assert preemptions.follow_event(Change("ADDED", None, event)) == [DEMO]
    later = preemptions.pending(DEMO)
    assert later is not None and later.by == "pod team-b/urgent-1"


def test_the_newest_of_several_preemptions_is_told() -> None:
    preemptions, pods, _, _ = tracker()
    older = a_pod("demo-1", "demo", marked=True)
    newer = a_pod("demo-2", "demo", marked=True)
    newer["status"]["conditions"][1]["lastTransitionTime"] = "2026-03-01T12:00:00Z"
    preemptions.follow_pod(modified(pods, newer))
    preemptions.follow_pod(modified(pods, older))
    pending = preemptions.pending(DEMO)
    assert pending is not None and pending.pod == "demo-2"


def test_records_are_bounded_by_time_and_by_the_services_life() -> None:
    preemptions, pods, _, clock = tracker()
    preemptions.follow_pod(modified(pods, a_pod("demo-1", "demo", marked=True)))
    preemptions.follow_pod(modified(pods, a_pod("other-1", "other", marked=True)))
    assert len(preemptions) == 2
    preemptions.forget(DEMO)
    assert len(preemptions) == 1 and preemptions.pending(DEMO) is None
    clock.now += RETAIN + 1
    preemptions.follow_pod(modified(pods, a_pod("third-1", "third", marked=True)))  # prunes as it goes
    assert len(preemptions) == 1 and preemptions.pending(ObjectKey("ai", "other")) is None


def test_pods_without_a_service_label_or_uid_are_ignored() -> None:
    preemptions, _, _, _ = tracker()
    bare = a_pod("x", "demo", marked=True)
    del bare["metadata"]["labels"]
    assert preemptions.follow_pod(Change("ADDED", None, bare)) == []
    no_uid = a_pod("y", "demo", marked=True)
    del no_uid["metadata"]["uid"]
    assert preemptions.follow_pod(Change("ADDED", None, no_uid)) == []
    assert len(preemptions) == 0


def v137_event(victim: str, preemptor_uid: str, *, namespace: str = "ai") -> dict[str, Any]:
    """What kube-scheduler v1.37 writes: no `related`, the preemptor's UID in the note."""
    return {
        "metadata": {"name": f"{victim}.18b", "namespace": namespace},
        "regarding": {"kind": "Pod", "namespace": namespace, "name": victim, "uid": f"uid-{victim}"},
        "note": f"Preempted by pod {preemptor_uid} on node kwok-gpu-0",
    }


def test_the_v1_37_event_names_the_preemptor_by_uid_in_its_note() -> None:
    preemptions, pods, events, _ = tracker()
    preemptor = a_pod("urgent-1", "urgent", namespace="team-b", priority=1_000_000)
    preemptor["metadata"]["uid"] = "cdabceaf-3f46-480f-a341-e7286d4975e6"
    pods.upsert(preemptor)
    preemptions.follow_pod(modified(pods, a_pod("demo-1", "demo", marked=True)))
    event = v137_event("demo-1", "cdabceaf-3f46-480f-a341-e7286d4975e6")
    events.upsert(event)
    assert preemptions.follow_event(Change("ADDED", None, event)) == [DEMO]
    assert preemptions.pending(DEMO) == Preemption(
        "demo-1", "gpu-0", AT, by="pod team-b/urgent-1", by_service="team-b/urgent", by_priority=1_000_000
    )


def test_a_preemptor_that_is_not_ours_is_named_by_its_uid() -> None:
    preemptions, pods, events, _ = tracker()
    preemptions.follow_pod(modified(pods, a_pod("demo-1", "demo", marked=True)))
    events.upsert(v137_event("demo-1", "0f0f0f0f-1111-2222-3333-444444444444"))
    pending = preemptions.pending(DEMO)
    assert pending is not None and pending.by == "pod with uid 0f0f0f0f-1111-2222-3333-444444444444"
    assert (pending.by_service, pending.by_priority) == ("", None)
    # A note in no format the scheduler writes names nobody.
    preemptions2, pods2, events2, _ = tracker()
    preemptions2.follow_pod(modified(pods2, a_pod("demo-1", "demo", marked=True)))
    events2.upsert({**v137_event("demo-1", "x"), "note": "Preempted by a tenant's invention"})
    assert preemptions2.pending(DEMO) == Preemption("demo-1", "gpu-0", AT)
