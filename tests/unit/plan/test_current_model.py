"""A service plans only from a Model status that describes the Model's current spec
(plan/inferenceservice/current_model.py): the edit-then-plan window of a Model whose status is
still the old one."""

from typing import Any

import pytest
from isvc_factories import live_deployment, make_model, observe
from isvc_planning import condition, plan

from llmkube.api.model import Model
from llmkube.plan.inferenceservice.current_model import describes_current_spec
from llmkube.plan.model.source import cache_key

HTTP = "https://models.example/a.gguf"


def model(source: str, *, generation: int | None, status: dict[str, Any] | None) -> Model:
    metadata: dict[str, Any] = {"name": "tiny", "namespace": "ai"}
    if generation is not None:
        metadata["generation"] = generation
    document: dict[str, Any] = {"metadata": metadata, "spec": {"source": source}}
    if status is not None:
        document["status"] = status
    return Model.model_validate(document)


@pytest.mark.parametrize(
    ("source", "generation", "status", "current"),
    [
        (HTTP, 2, {"phase": "Ready", "observedGeneration": 2, "cacheKey": cache_key(HTTP)}, True),
        (HTTP, 3, {"phase": "Ready", "observedGeneration": 2, "cacheKey": cache_key(HTTP)}, False),
        ("/etc/shadow", 3, {"phase": "Ready", "observedGeneration": 2, "cacheKey": cache_key(HTTP)}, False),
        (HTTP, 2, None, False),
        # A status from before the generation was recorded: judged by the hash of its source.
        (HTTP, 5, {"phase": "Ready", "cacheKey": cache_key(HTTP)}, True),
        ("/etc/shadow", 5, {"phase": "Ready", "cacheKey": cache_key(HTTP)}, False),
        ("pvc://other/x.gguf", 5, {"phase": "Ready", "cacheKey": cache_key("pvc://mine/x.gguf")}, False),
        ("Org/Repo", 5, {"phase": "Ready", "cacheKey": ""}, True),  # nothing is mounted for these
    ],
)
def test_describes_current_spec(
    source: str, generation: int, status: dict[str, Any] | None, current: bool
) -> None:
    assert describes_current_spec(model(source, generation=generation, status=status)) is current


def test_a_stale_ready_status_plans_nothing_and_running_replicas_keep_serving() -> None:
    stale = make_model("/etc/shadow", generation=4, status={"observedGeneration": 3})
    result = plan(model=stale, observed=observe(deployment=live_deployment(ready=1)))
    assert result.deployment is None and result.deletes == ()
    assert result.status.phase == "Ready"  # the replicas that run say so, and why nothing changes
    progressing = condition(result, "Progressing")
    assert progressing is not None and progressing[1] == "WaitingForModel"
    assert "changed (generation 4) and its status still describes generation 3" in progressing[2]


def test_a_stale_status_of_a_new_service_is_pending() -> None:
    stale = make_model("pvc://other/x.gguf", generation=2, status={"observedGeneration": 1})
    result = plan(model=stale)
    assert result.status.phase == "Pending" and result.deployment is None
