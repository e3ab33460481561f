"""What one Model plan reads: the Model, the facts, the time, the operator's settings and the
status the Model had, each as far as it still describes the Model's spec (the facts of an action
planned for another spec are dropped, and so is what the status said of another source)."""

from dataclasses import dataclass, replace
from datetime import datetime

from llmkube.api.model import Model, ModelStatus
from llmkube.plan.conditions.standard import remove_condition
from llmkube.plan.model import conditions as cond
from llmkube.plan.model.accelerator import accelerator_ready
from llmkube.plan.model.decision import ActionTarget, ModelPlanConfig
from llmkube.plan.model.facts import ModelFacts


@dataclass(frozen=True)
class PlanInputs:
    model: Model
    facts: ModelFacts
    now: datetime
    config: ModelPlanConfig
    old: ModelStatus

    @property
    def source(self) -> str:
        return self.model.spec.source

    @property
    def generation(self) -> int | None:
        return self.model.metadata.generation

    @property
    def accelerator_ready(self) -> bool:
        return accelerator_ready(
            self.model.spec.hardware, self.facts.gpu_capacity, self.config.intel_gpu_resource
        )

    @property
    def is_metal(self) -> bool:
        hardware = self.model.spec.hardware
        return hardware is not None and hardware.accelerator == "metal"


def spec_target(model: Model) -> ActionTarget:
    """What the Model's actions are about now (ModelAction.target)."""
    return ActionTarget(source=model.spec.source, sha256=model.spec.sha256)


def current_facts(facts: ModelFacts, target: ActionTarget) -> ModelFacts:
    """The facts without results, or an action in flight, that are about another spec."""
    if facts.results_for is not None and facts.results_for != target:
        facts = replace(
            facts, probe=None, remote_header=None, copy=None, verify=None, hub_listing=None, results_for=None
        )
    if facts.pending is not None and facts.pending.target != target:
        facts = replace(facts, pending=None)
    return facts


def rebased(old: ModelStatus, key: str) -> ModelStatus:
    """The status with everything that described an earlier `spec.source` dropped.

    The cache key is a hash of the source, so a different key means a different source: its path,
    hash, GGUF metadata and drift fingerprint would be lies about the new one.
    """
    if (old.cache_key or "") == key:
        return old
    return old.model_copy(
        update={
            "cache_key": key,
            "path": None,
            "size": None,
            "sha256": None,
            "gguf": None,
            "source_e_tag": None,
            "source_content_length": None,
            "last_revalidated": None,
            "staged_files": None,
            "conditions": remove_condition(old.conditions, cond.SOURCE_DRIFTED),
        }
    )
