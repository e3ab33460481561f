"""When is a Model status worth writing? Only when something besides `lastUpdated` changed
(design decision 18): an unchanged reconcile makes no write and so triggers no watch event.
"""

from typing import Any

from llmkube.api.model import ModelStatus
from llmkube.plan.model import conditions as cond

_TIMESTAMP_ONLY = frozenset({"last_updated"})


def _comparable(status: ModelStatus | None) -> dict[str, Any]:
    # exclude_none: a field that is None and a field never set serialize the same way on the wire.
    return (status or ModelStatus()).model_dump(mode="json", exclude=set(_TIMESTAMP_ONLY), exclude_none=True)


def status_changed(old: ModelStatus | None, new: ModelStatus) -> bool:
    return _comparable(old) != _comparable(new)


# `llmkube_model_status{phase=...}` label values (reference §8.1): the reference tells a Model that
# was found in the controller's cache ("Cached") from one copied or on a claim ("Ready") and from one
# the workload resolves itself ("ready", lowercase).
METRIC_READY = "Ready"
METRIC_CACHED = "Cached"
METRIC_RUNTIME_READY = "ready"
METRIC_FAILED = "Failed"
_READY_LABELS = {
    cond.MODEL_CACHED: METRIC_CACHED,
    cond.RUNTIME_RESOLVED: METRIC_RUNTIME_READY,
    cond.WORKLOAD_RESOLVED: METRIC_RUNTIME_READY,
    cond.METAL_AGENT_MANAGED: METRIC_RUNTIME_READY,
}


def status_metric_label(phase: str | None, available_reason: str | None) -> str | None:
    """The `phase` label of a Model's status gauge, from its stored phase and the reason of its
    Available condition; None before the first status (no series). Phases without a special label
    (Pending, Copying) are reported as they are."""
    if not phase:
        return None
    if phase == "Ready":
        return _READY_LABELS.get(available_reason or "", METRIC_READY)
    return phase
