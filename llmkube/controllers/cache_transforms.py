"""What the InferenceService controller's caches keep of the objects it owns or reads: the fields
it applies (the owned-fields compare), the fields its planner and field policies read although
others own them, and nothing else (bench/bench_cache_memory.py measures the bytes per service).

Whoever makes the planner or a field policy read another field of these kinds adds it here.
"""

import functools

from llmkube.kube.cache import Transform, keep_only, keep_owned
from llmkube.kube.types import Obj


# One transform per field manager: the InferenceService and ModelRouter controllers share the
# informers of owned Deployments and Services, and a shared informer has one transform.
@functools.cache
def deployment_cache(field_manager: str) -> Transform:
    """Deployments: what we apply, plus the replica count the HPA may own (the hand-over and the
    "desired" of an autoscaled service), the selector (immutable: the planner checks it), the
    strategy (an exclusive subtree: fields in it that we do not set are taken over), the status
    counters the phase is computed from, and of the status conditions only `ReplicaFailure` (pods
    an admission plugin refuses to create: plan/inferenceservice/pod_failures.py)."""
    owned = keep_owned(
        field_manager,
        ("spec", "replicas"),
        ("spec", "selector"),
        ("spec", "strategy"),
        ("status", "replicas"),
        ("status", "readyReplicas"),
        ("status", "availableReplicas"),
        ("status", "updatedReplicas"),
        ("status", "observedGeneration"),
        ("status", "conditions"),
    )

    def transform(obj: Obj) -> Obj:
        kept = owned(obj)
        status = kept.get("status")
        if isinstance(status, dict) and "conditions" in status:
            failures = [c for c in status["conditions"] or () if c.get("type") == "ReplicaFailure"]
            if failures:
                status["conditions"] = failures
            else:
                del status["conditions"]
        return kept

    return transform


@functools.cache
def service_cache(field_manager: str) -> Transform:
    """Services: what we apply, plus every port (someone else's port next to ours is repaired)."""
    return keep_owned(field_manager, ("spec", "ports"))


#: Pods (never written): what the scheduling and pod-failure diagnosis and the running count read,
#: and a preemptor's priority (controllers/preemptions.py).
POD_CACHE: Transform = keep_only(
    ("metadata", "labels"),
    ("metadata", "ownerReferences"),
    ("spec", "nodeName"),
    ("spec", "priority"),
    ("status", "phase"),
    ("status", "conditions"),
    ("status", "containerStatuses"),
    ("status", "initContainerStatuses"),
    ("status", "startTime"),  # spec.maxPodLifetimeSeconds (plan/inferenceservice/lifetime.py)
)


#: The scheduler's `Preempted` Events (controllers/preemptions.py): whom and for whom, nothing else.
PREEMPTION_EVENT_CACHE: Transform = keep_only(("regarding",), ("related",), ("note",))
