"""Priority: the five llmkube PriorityClasses, the class a pod uses, the effective value.

The effective priority is the value of the class the pod really uses, read from the cluster, so a
custom `priorityClassName` is honoured and a missing one is reported (the reference operator read
`spec.priority` whatever class the pod used). The controller itself ensures the five classes exist
with the documented values, unless `--manage-priority-classes=false` leaves them to the installer
(GitOps, Helm).
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from llmkube.api.base import KubeObject
from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.plan.inferenceservice.names import managed

PreemptionPolicy = Literal["PreemptLowerPriority", "Never"]


@dataclass(frozen=True)
class PriorityClassSpec:
    priority: str
    name: str
    value: int
    preemption_policy: PreemptionPolicy
    description: str


PRIORITY_CLASSES: tuple[PriorityClassSpec, ...] = (
    PriorityClassSpec(
        "critical",
        "llmkube-critical",
        1_000_000,
        "PreemptLowerPriority",
        "llmkube critical inference: preempts every lower priority",
    ),
    PriorityClassSpec(
        "high", "llmkube-high", 100_000, "PreemptLowerPriority", "llmkube high-priority inference"
    ),
    PriorityClassSpec(
        "normal", "llmkube-normal", 10_000, "PreemptLowerPriority", "llmkube default inference priority"
    ),
    PriorityClassSpec("low", "llmkube-low", 1_000, "PreemptLowerPriority", "llmkube low-priority inference"),
    PriorityClassSpec(
        "batch", "llmkube-batch", 100, "Never", "llmkube batch inference: waits, never preempts"
    ),
)
_BY_PRIORITY = {pc.priority: pc for pc in PRIORITY_CLASSES}
_BY_NAME = {pc.name: pc for pc in PRIORITY_CLASSES}
DEFAULT_PRIORITY = "normal"


def priority_class_name(spec: InferenceServiceSpec) -> str:
    """Always set on the pod: the custom class if given, else the mapping of `priority`."""
    return class_for(spec.priority_class_name, spec.priority)


def class_for(priority_class_name: str | None, priority: str | None) -> str:
    """`priority_class_name` from the two spec fields alone (for callers holding the raw object)."""
    if priority_class_name:
        return priority_class_name
    return _BY_PRIORITY.get(priority or DEFAULT_PRIORITY, _BY_PRIORITY[DEFAULT_PRIORITY]).name


def effective_priority(class_name: str, observed_values: Mapping[str, int]) -> int | None:
    """The class's value from the cluster; for our own classes, which the controller creates, the
    documented value until it is observed; None when a custom class does not exist."""
    if class_name in observed_values:
        return observed_values[class_name]
    own = _BY_NAME.get(class_name)
    return own.value if own else None


def is_llmkube_class(class_name: str) -> bool:
    return class_name in _BY_NAME


def priority_classes() -> list[KubeObject]:
    """Apply intents for the five classes. `value` and `preemptionPolicy` are immutable in the API:
    on drift the controller must delete and recreate the class."""
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": pc.name, "labels": managed({})},
            "value": pc.value,
            # globalDefault stays unset (false): the API omits false, and an applied `false` would
            # never compare equal to the stored object, costing a write on every restart.
            "preemptionPolicy": pc.preemption_policy,
            "description": pc.description,
        }
        for pc in PRIORITY_CLASSES
    ]


def priority_class_drift(desired: KubeObject, observed: KubeObject) -> list[str]:
    """The fields of an existing class that differ from what the controller would apply.

    Judged on values, not on who wrote them: a class the installer applied with the documented
    values is already right, so a controller start after `kubectl apply -k manifests/` (or a Helm
    install) makes no write and takes no field ownership away from the installer."""
    drift = [
        name
        for name in ("value", "preemptionPolicy", "description")
        if observed.get(name) != desired.get(name)
    ]
    if bool(observed.get("globalDefault")) != bool(desired.get("globalDefault")):
        drift.append("globalDefault")
    want_labels: dict[str, Any] = (desired.get("metadata") or {}).get("labels") or {}
    have_labels: dict[str, Any] = (observed.get("metadata") or {}).get("labels") or {}
    drift += [f"metadata.labels.{key}" for key, value in want_labels.items() if have_labels.get(key) != value]
    return drift
