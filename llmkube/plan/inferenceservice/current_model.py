"""Whether a Model's status describes the Model's current spec, so a service may plan from it.

A Model's spec and status change in separate writes: right after a user edits `spec.source`, the
cache still holds the new spec next to the status of the old one (Ready, with the old cache key and
path). A service planned from that pair would mount what the new spec names before the Model
controller has judged it: a path it would refuse, a claim that does not exist. So the planner uses a
Model only when its status says it describes this very spec: `status.observedGeneration` equals
`metadata.generation`. A status written before llmkube recorded the generation is judged by its
cache key instead, which is a hash of the source it describes.
"""

from llmkube.api.model import Model
from llmkube.plan.model.source import SourceKind, cache_key, classify_source

_HASHED_SOURCES = frozenset(
    {SourceKind.HTTP, SourceKind.HF, SourceKind.S3, SourceKind.GS, SourceKind.LOCAL, SourceKind.PVC}
)


def describes_current_spec(model: Model) -> bool:
    status = model.status
    if status is None:
        return False
    seen = status.observed_generation
    if seen is not None:
        return model.metadata.generation is None or seen == model.metadata.generation
    # A status from before the generation was recorded: a Ready status of a downloaded, copied or
    # claimed source names the source it describes by its hash.
    if status.phase == "Ready" and classify_source(model.spec.source) in _HASHED_SOURCES:
        return (status.cache_key or "") == cache_key(model.spec.source)
    return True


def stale_status_message(model: Model) -> str:
    status = model.status
    seen = status.observed_generation if status else None
    described = f"generation {seen}" if seen is not None else "an earlier source"
    return (
        f'Model "{model.metadata.name}" changed (generation {model.metadata.generation}) and its status '
        f"still describes {described}: waiting for the Model controller to judge the new spec"
    )
