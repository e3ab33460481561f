"""Warnings are announced as Events when the condition that carries them changes: once per problem
and generation, never again on a later reconcile or after a restart."""

from typing import Any

import pytest
from isvc_factories import make_isvc, make_model
from isvc_planning import condition, plan

from llmkube.api.inferenceservice import InferenceServiceStatus
from llmkube.plan.inferenceservice.planner import InferenceServicePlan

HF = make_model("Org/Repo-7B", cache_key=None)
# A Model whose GGUF metadata (TinyLlama 1.1B's shape) needs more than 1Gi at a 4096 context.
GGUF = make_model(
    status={
        "size": "1.1 GiB",
        "gguf": {
            "architecture": "llama",
            "contextLength": 2048,
            "embeddingSize": 2048,
            "layerCount": 22,
            "headCount": 32,
            "headCountKV": 4,
            "vocabSize": 32000,
            "tensorBytes": 1_170_000_000,
        },
    }
)

# (case, spec, model, the Event reason, the condition carrying it)
WARNED: list[tuple[str, dict[str, Any], Any, str, tuple[str, str, str]]] = [
    (
        "invalid spec",
        {"resources": {"cpu": "two"}},
        make_model(),
        "InvalidSpec",
        ("Degraded", "True", "InvalidSpec"),
    ),
    (
        "ignored setting",
        {"runtime": "vllm", "contextSize": 4096},
        make_model(),
        "IgnoredSetting",
        ("SpecValid", "False", "IgnoredSettings"),
    ),
    (
        "missing memory request",
        {"moeCPUOffload": True},
        make_model(),
        "MissingMemoryRequest",
        ("SpecValid", "False", "MissingMemoryRequest"),
    ),
    (
        "HF source to the init container",
        {},
        HF,
        "MissingSkipModelInit",
        ("SpecValid", "False", "MissingSkipModelInit"),
    ),
    (
        "memory estimate above the request",
        {"contextSize": 4096, "resources": {"memory": "1Gi"}},
        GGUF,
        "InsufficientMemory",
        ("MemoryFit", "False", "ExceedsMemoryRequest"),
    ),
]


def again(
    result: InferenceServicePlan, spec: dict[str, Any], model: Any, generation: int = 3
) -> InferenceServicePlan:
    """The next reconcile (or a restarted controller): planned from the status written last."""
    stored: InferenceServiceStatus = result.status
    return plan(isvc=make_isvc(spec, status=stored.to_json(), generation=generation), model=model)


@pytest.mark.parametrize(("case", "spec", "model", "reason", "carrier"), WARNED, ids=[w[0] for w in WARNED])
def test_announced_once_per_generation(
    case: str, spec: dict[str, Any], model: Any, reason: str, carrier: tuple[str, str, str]
) -> None:
    first = plan(isvc=make_isvc(spec), model=model)
    assert [e.reason for e in first.events] == [reason]
    found = condition(first, carrier[0])
    assert found is not None and found[:2] == carrier[1:]
    assert first.events[0].message in found[2]
    # Reconciled again, or by a restarted controller: the stored status already says it.
    assert again(first, spec, model).events == ()
    assert again(again(first, spec, model), spec, model).events == ()
    # A new generation of the spec that still has the problem: said once more.
    assert [e.reason for e in again(first, spec, model, generation=4).events] == [reason]


def test_a_second_problem_is_announced_and_the_first_with_it() -> None:
    """The condition lists every problem: when one is added, its text changes, and each problem is
    announced (the recorder folds the repeated one into its series)."""
    first = plan({"moeCPUOffload": True})
    second = plan(isvc=make_isvc({"moeCPUOffload": True, "args": ["--x"]}, status=first.status.to_json()))
    assert sorted(e.reason for e in second.events) == ["IgnoredSetting", "MissingMemoryRequest"]
    spec_valid = condition(second, "SpecValid")
    assert spec_valid is not None and spec_valid[1] == "IgnoredSettings"


def test_a_problem_fixed_is_not_announced() -> None:
    first = plan({"moeCPUOffload": True})
    fixed = plan(
        isvc=make_isvc({"moeCPUOffload": True, "resources": {"memory": "8Gi"}}, status=first.status.to_json())
    )
    assert fixed.events == ()
    assert condition(fixed, "SpecValid") == ("True", "Valid", "Every setting is applied")
