"""v0.9 `maxPodLifetimeSeconds`: recycle a pod once it has run that long (drivers that leak memory
over days, as llama.cpp on AMD Vulkan does), as the reference does, best effort.

One pod at a time, the oldest past its lifetime (by `status.startTime`), and only while no pod of
the service is terminating and every desired replica is ready, so that recycling never takes a
service below what it asked for except with a single replica (a restart, then: the model loads
again). The controller evicts it (the Eviction API: PodDisruptionBudgets hold, and the pod's drain
hook, rolloutPolicy.waitForIdle, lets its requests finish); its ReplicaSet makes the new one. The
service is looked at again when the next pod's lifetime ends.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from llmkube.api.base import KubeObject

RECYCLED = "PodRecycled"  # the Event reason


@dataclass(frozen=True)
class Recycling:
    evict: str = ""  # the pod to evict now; "" for none
    #: seconds until the next pod's lifetime ends (look again then); None: no pod to watch
    requeue_after: float | None = None
    message: str = ""


def _started(pod: KubeObject) -> datetime | None:
    text = (pod.get("status") or {}).get("startTime")
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def recycling(
    pods: Sequence[KubeObject], max_seconds: int | None, *, ready: int, desired: int, now: datetime
) -> Recycling:
    if not max_seconds or desired <= 0:
        return Recycling()
    running = [pod for pod in pods if not (pod.get("metadata") or {}).get("deletionTimestamp")]
    terminating = len(running) < len(pods)
    ages = sorted(
        ((now - started).total_seconds(), str((pod.get("metadata") or {}).get("name") or ""))
        for pod in running
        if (started := _started(pod)) is not None
    )
    if not ages:
        return Recycling()
    oldest_age, oldest = ages[-1]
    if oldest_age < max_seconds:
        return Recycling(requeue_after=max_seconds - oldest_age)
    if terminating or ready < desired:
        # Not now: wait for the replicas (or the last recycled pod's successor) to be ready.
        return Recycling(requeue_after=30.0)
    younger = [age for age, _ in ages[:-1] if age < max_seconds]
    after = max_seconds - max(younger) if younger else None
    message = (
        f"pod {oldest} has run {int(oldest_age)} s, past spec.maxPodLifetimeSeconds ({max_seconds} s): "
        "evicted, its ReplicaSet starts a new one"
    )
    return Recycling(evict=oldest, requeue_after=after, message=message)
