"""The Model controller's decisions, as pure functions over plain data."""

from llmkube.plan.model.accelerator import accelerator_ready, accelerator_resource
from llmkube.plan.model.cache_layout import LEGACY_BASENAME, CacheLayout, cache_layout, is_controller_cached
from llmkube.plan.model.decision import (
    ActionKind,
    ModelAction,
    ModelDecision,
    ModelPlanConfig,
    Requeue,
)
from llmkube.plan.model.drift import (
    DriftKind,
    DriftOutcome,
    decide_drift,
    next_revalidation_in,
    revalidation_due,
)
from llmkube.plan.model.facts import (
    CachedFile,
    FetchError,
    FetchFailure,
    Fingerprint,
    HeaderFailure,
    ModelFacts,
    ProbeFailure,
    ProbeOutcome,
    RemoteHeader,
    StoredFile,
)
from llmkube.plan.model.gguf_metadata import gguf_metadata_from_fields, normalize_license, quantization_name
from llmkube.plan.model.planner import plan_model
from llmkube.plan.model.size import format_size
from llmkube.plan.model.status import status_changed

__all__ = [
    "LEGACY_BASENAME",
    "ActionKind",
    "CacheLayout",
    "CachedFile",
    "DriftKind",
    "DriftOutcome",
    "FetchError",
    "FetchFailure",
    "Fingerprint",
    "HeaderFailure",
    "ModelAction",
    "ModelDecision",
    "ModelFacts",
    "ModelPlanConfig",
    "ProbeFailure",
    "ProbeOutcome",
    "RemoteHeader",
    "Requeue",
    "StoredFile",
    "accelerator_ready",
    "accelerator_resource",
    "cache_layout",
    "decide_drift",
    "format_size",
    "gguf_metadata_from_fields",
    "is_controller_cached",
    "next_revalidation_in",
    "normalize_license",
    "plan_model",
    "quantization_name",
    "revalidation_due",
    "status_changed",
]
