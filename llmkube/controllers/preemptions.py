"""Preemptions of our pods, from the pod cache and the scheduler's `Preempted` Events, until each
service's status tells them (`llmkube.plan.inferenceservice.preemption` has what Kubernetes writes).

A preempted pod is deleted moments after the scheduler marks it: a reconcile may run only after
the pod is gone from the cache, so the mark is noted when the cache sees it (`follow_pod`), and
kept until the service's status has reported it. The Event naming the preemptor may arrive before
or after the mark, on another watch: whichever comes second completes the account and sends the
service back to planning (`follow_event`). The pod cache must be indexed by `BY_POD_UID` and the
Event cache by `BY_REGARDING_UID`, and the Events must keep `related` and `note`.

What is kept is bounded by the scheduler's preemptions (a tenant cannot mark a pod, that takes
writing its status): each record lives `RETAIN` seconds, reported or not, so a pod's late updates
(its deletion) do not report it twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from llmkube.api.constants import LABEL_SERVICE
from llmkube.kube.cache import Change, Store
from llmkube.kube.types import Obj, ObjectKey
from llmkube.plan.inferenceservice.preemption import Preemption, preemption_mark, preemptor_in_note

#: how long a preemption is remembered after the cache showed it (the scheduler's Event follows
#: within seconds; a status write takes less)
RETAIN = 600.0

#: the scheduler's Events on the pods it preempted, and no other Event of the cluster
PREEMPTED_EVENTS = "reason=Preempted,regarding.kind=Pod"

#: Event index: the uid of the object an Event is about
BY_REGARDING_UID = "regardingUID"


#: Pod index: its uid (the scheduler's Event names a preemptor by uid only)
BY_POD_UID = "uid"


def regarding_uid_index(event: Obj) -> tuple[str, ...]:
    uid = (event.get("regarding") or {}).get("uid")
    return (uid,) if isinstance(uid, str) and uid else ()


def uid_index(obj: Obj) -> tuple[str, ...]:
    uid = (obj.get("metadata") or {}).get("uid")
    return (uid,) if isinstance(uid, str) and uid else ()


@dataclass
class _Victim:
    service: ObjectKey
    preemption: Preemption  # as the pod told it; the Event adds the preemptor when planned
    uid: str
    seen: float  # monotonic time the cache showed the mark
    reported: Preemption | None = None


@dataclass
class PreemptionTracker:
    pods: Store
    events: Store
    clock: Callable[[], float] = time.monotonic
    _victims: dict[str, _Victim] = field(default_factory=dict)  # pod uid -> the record
    _by_service: dict[ObjectKey, set[str]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self._victims)

    def follow_pod(self, change: Change) -> list[ObjectKey]:
        """A pod cache change: a new preemption mark is noted; returns the service to re-plan."""
        self._prune()
        pod = change.obj
        meta = pod.get("metadata") or {}
        uid = meta.get("uid")
        service = (meta.get("labels") or {}).get(LABEL_SERVICE)
        if not isinstance(uid, str) or not uid or not service or uid in self._victims:
            return []
        marked, at = preemption_mark(pod)
        if not marked:
            return []
        key = ObjectKey(meta.get("namespace") or "", service)
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        self._victims[uid] = _Victim(
            key, Preemption(str(meta.get("name") or ""), node, at), uid, self.clock()
        )
        self._by_service.setdefault(key, set()).add(uid)
        return [key]

    def follow_event(self, change: Change) -> list[ObjectKey]:
        """A `Preempted` Event: the service of a victim already noted is re-planned (the Event names
        the preemptor)."""
        if change.new is None:
            return []
        victim = self._victims.get(next(iter(regarding_uid_index(change.new)), ""))
        return [victim.service] if victim is not None else []

    def pending(self, service: ObjectKey) -> Preemption | None:
        """The newest preemption of the service's pods, as completely as it is known, when its
        status has not told it yet."""
        newest = None
        for uid in self._by_service.get(service, ()):
            victim = self._victims[uid]
            if newest is None or _order(victim) > _order(newest):
                newest = victim
        if newest is None:
            return None
        known = newest.preemption
        if not known.by_service:
            known = self._with_preemptor(newest)
            if known.by_service:  # one of ours, resolved for good: its pod may be gone later
                newest.preemption = known
        return None if known == newest.reported else known

    def reported(self, service: ObjectKey, preemption: Preemption) -> None:
        """The service's status now tells `preemption`."""
        for uid in self._by_service.get(service, ()):
            victim = self._victims[uid]
            if victim.preemption.pod == preemption.pod:
                victim.reported = preemption

    def forget(self, service: ObjectKey) -> None:
        """The service is gone."""
        for uid in self._by_service.pop(service, ()):
            self._victims.pop(uid, None)

    def _with_preemptor(self, victim: _Victim) -> Preemption:
        events = self.events.by_index(BY_REGARDING_UID, victim.uid)
        if not events:
            return victim.preemption
        event = events[-1]
        related = event.get("related") or {}
        kind, namespace, name = related.get("kind"), related.get("namespace"), related.get("name")
        pod = None
        if kind and name:
            by = f"{str(kind).lower()} {namespace}/{name}" if namespace else f"{str(kind).lower()} {name}"
            pod = self.pods.get_object(namespace or "", name) if kind == "Pod" else None
        elif (found := preemptor_in_note(event.get("note"))) is not None:
            # v1.37 names the preemptor by UID only: one of our pods, or some other pod.
            kind, uid = found
            ours = self.pods.by_index(BY_POD_UID, uid) if kind == "pod" else []
            pod = ours[0] if ours else None
            if pod is not None:
                meta = pod.get("metadata") or {}
                by = f"pod {meta.get('namespace')}/{meta.get('name')}"
            else:
                by = f"{kind} with uid {uid}"
        else:
            return victim.preemption
        by_service, by_priority = "", None
        if pod is not None:  # one of our pods: its service and its priority
            namespace = (pod.get("metadata") or {}).get("namespace")
            service = ((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_SERVICE)
            by_service = f"{namespace}/{service}" if service else ""
            priority = (pod.get("spec") or {}).get("priority")
            by_priority = priority if isinstance(priority, int) and not isinstance(priority, bool) else None
        return Preemption(
            victim.preemption.pod,
            victim.preemption.node,
            victim.preemption.at,
            by=by,
            by_service=by_service,
            by_priority=by_priority,
        )

    def _prune(self) -> None:
        # Records are kept in the order the cache showed them: the oldest are first.
        oldest = self.clock() - RETAIN
        while self._victims:
            uid, victim = next(iter(self._victims.items()))
            if victim.seen >= oldest:
                return
            del self._victims[uid]
            uids = self._by_service.get(victim.service)
            if uids is not None:
                uids.discard(uid)
                if not uids:
                    del self._by_service[victim.service]


def _order(victim: _Victim) -> tuple[float, float]:
    at = victim.preemption.at
    return (at.timestamp() if at is not None else 0.0, victim.seen)
