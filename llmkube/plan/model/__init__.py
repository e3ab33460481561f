"""A Model's plan, as pure functions over plain data: `plan_model(model, facts, now, config)`
returns a `ModelDecision` (the status to write, the one action to perform next, the prefetch and
cache-clear Jobs, when to come back). The Model controller observes the `ModelFacts`, performs
the action and plans again until no action is left, then writes the status and the Events
(`status_changed`, `model_events`, `status_after_refusal` when the API server refuses it).

Exported here: `plan_model`, its inputs and outputs, and what a caller does with a decision.
Inside, downward (import-linter holds the first three, pyproject.toml):

* `planner.py`: the face, which picks the module of the Model's kind of source;
* `sources/`: one module per kind (pvc, local, hf, downloaded, metal), none importing another;
* the steps they share: `inputs.py`, `phases.py`, `drift.py`, `prefetch_plan.py`, `cache_clear.py`;
* the pieces below them, several read directly by the InferenceService planner, the host agent
  and the user commands: `source.py` (the kinds of source), `fileset.py` (`spec.files`),
  `remote.py` (where each file comes from), `downloader.py` and `download_scripts.py` (the model
  downloader), `prefetch.py` (its Job), `cache_layout.py`, `local_roots.py`, `egress.py`,
  `bounds.py`, `gguf_metadata.py`, `size.py`, `accelerator.py`, `conditions.py`, `events.py`,
  `refused_status.py`, `status.py`, and `decision.py` and `facts.py` (the types exported here).
"""

from llmkube.plan.model.accelerator import accelerator_ready, accelerator_resource
from llmkube.plan.model.cache_layout import LEGACY_BASENAME, CacheLayout, cache_layout, is_controller_cached
from llmkube.plan.model.decision import (
    ActionKind,
    ActionTarget,
    ModelAction,
    ModelDecision,
    ModelPlanConfig,
    PrefetchPlan,
    Requeue,
)
from llmkube.plan.model.drift import (
    DriftKind,
    DriftOutcome,
    decide_drift,
    next_revalidation_in,
    revalidation_due,
)
from llmkube.plan.model.events import model_events
from llmkube.plan.model.facts import (
    CachedFile,
    ClearFacts,
    CopyResult,
    FetchError,
    FetchFailure,
    Fingerprint,
    HeaderFailure,
    HubListing,
    ListingFailure,
    ModelFacts,
    PrefetchJob,
    ProbeFailure,
    ProbeOutcome,
    RemoteHeader,
    StoredFile,
)
from llmkube.plan.model.gguf_metadata import gguf_metadata_from_fields, normalize_license, quantization_name
from llmkube.plan.model.planner import plan_model
from llmkube.plan.model.refused_status import MAX_STATUS_BYTES, is_refused_status, status_after_refusal
from llmkube.plan.model.size import format_size
from llmkube.plan.model.status import status_changed

__all__ = [
    "LEGACY_BASENAME",
    "MAX_STATUS_BYTES",
    "ActionKind",
    "ActionTarget",
    "CacheLayout",
    "CachedFile",
    "ClearFacts",
    "CopyResult",
    "DriftKind",
    "DriftOutcome",
    "FetchError",
    "FetchFailure",
    "Fingerprint",
    "HeaderFailure",
    "HubListing",
    "ListingFailure",
    "ModelAction",
    "ModelDecision",
    "ModelFacts",
    "ModelPlanConfig",
    "PrefetchJob",
    "PrefetchPlan",
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
    "is_refused_status",
    "model_events",
    "next_revalidation_in",
    "normalize_license",
    "plan_model",
    "quantization_name",
    "revalidation_due",
    "status_after_refusal",
    "status_changed",
]
