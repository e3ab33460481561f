"""Where a local-source Model lives in the controller's cache: `<cache path>/<cacheKey>/<name>.gguf`,
the reference operator's layout, which the workloads' cached mode reads.

The planner and the directory observation both use this, so they always look at the same place.
"""

import posixpath
from dataclasses import dataclass

from llmkube.api.model import Model
from llmkube.plan.model.decision import ModelPlanConfig
from llmkube.plan.model.source import SourceKind, cache_key, canonical_basename, classify_source

LEGACY_BASENAME = "model.gguf"


@dataclass(frozen=True)
class CacheLayout:
    cache_key: str
    model_dir: str  # <cache>/<cacheKey>
    preferred_basename: str  # the canonical name as far as status knows it today


def is_controller_cached(model: Model) -> bool:
    """Only local paths on non-metal models are copied into the controller's own cache."""
    hardware = model.spec.hardware
    is_metal = hardware is not None and hardware.accelerator == "metal"
    return classify_source(model.spec.source) is SourceKind.LOCAL and not is_metal


def cache_layout(model: Model, config: ModelPlanConfig) -> CacheLayout:
    key = cache_key(model.spec.source)
    gguf = model.status.gguf if model.status else None
    return CacheLayout(
        cache_key=key,
        model_dir=posixpath.join(config.effective_cache_path, key),
        preferred_basename=canonical_basename(model.metadata.name or "", gguf.model_name if gguf else None),
    )
