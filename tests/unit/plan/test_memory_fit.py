"""The memory-fit estimate, its verdict, and what planning does with it (MemoryFit, an Event, and,
with the enforce annotation, Failed/InsufficientMemory with nothing applied)."""

from dataclasses import replace
from typing import Any

import pytest
from isvc_factories import make_isvc, make_model, observe
from isvc_planning import condition, plan

from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.api.model import Model
from llmkube.plan.inferenceservice.memory_fit import (
    GIB,
    MIB,
    PROCESS_MARGIN,
    context_cells,
    estimate_memory,
    judge_memory_fit,
    node_gpu_memory,
    size_text,
)
from llmkube.plan.model.size import parse_size

# TinyLlama 1.1B's shape: 22 layers, 2048 wide, 32 heads of 64, 4 KV heads, 32000 tokens.
TINYLLAMA = {
    "architecture": "llama",
    "contextLength": 2048,
    "embeddingSize": 2048,
    "layerCount": 22,
    "headCount": 32,
    "headCountKV": 4,
    "vocabSize": 32000,
    "tensorBytes": 1_170_000_000,
}


def model(
    gguf: dict[str, Any] | None = None, *, hardware: dict[str, Any] | None = None, **status: Any
) -> Model:
    return make_model(
        hardware=hardware,
        status={"size": "1.1 GiB", **({"gguf": gguf} if gguf is not None else {}), **status},
    )


def spec(**fields: Any) -> InferenceServiceSpec:
    return InferenceServiceSpec.model_validate({"modelRef": "tiny", **fields})


def test_kv_cache_is_layers_cells_kv_heads_head_size_and_type() -> None:
    estimate = estimate_memory(model(TINYLLAMA), spec(contextSize=4096), gpu_count=0)
    assert estimate is not None
    # 22 layers x 4096 cells x (4 KV heads x 64) x (2 + 2 bytes): 88 MiB, what llama.cpp allocates.
    assert estimate.kv_cache == 22 * 4096 * 256 * 4 == 88 * MIB
    assert estimate.weights == 1_170_000_000
    quantised = estimate_memory(
        model(TINYLLAMA), spec(contextSize=4096, cacheTypeK="q8_0", cacheTypeV="q4_0"), gpu_count=0
    )
    assert quantised is not None
    assert quantised.kv_cache == int(22 * 4096 * 256 * (34 / 32 + 18 / 32))


@pytest.mark.parametrize(
    ("fields", "cells"),
    [
        ({}, 2048),  # the trained context when contextSize is unset
        ({"contextSize": 4000}, 4096),  # padded to 256
        ({"contextSize": 4096, "parallelSlots": 4}, 4096),
        ({"contextSize": 1000, "parallelSlots": 3}, 1536),  # each slot's share padded: 334 -> 512
    ],
)
def test_context_cells_as_llama_cpp_sizes_them(fields: dict[str, Any], cells: int) -> None:
    gguf = model(TINYLLAMA).status.gguf  # type: ignore[union-attr]
    assert gguf is not None
    assert context_cells(spec(**fields), gguf) == cells


def test_without_kv_heads_the_estimate_assumes_full_attention_and_says_so() -> None:
    old_status = {k: v for k, v in TINYLLAMA.items() if k not in ("headCountKV", "tensorBytes", "vocabSize")}
    estimate = estimate_memory(model(old_status), spec(contextSize=4096), gpu_count=0)
    assert estimate is not None
    assert estimate.kv_cache == 22 * 4096 * 2048 * 4  # 8x the GQA figure: an upper bound
    assert estimate.weights == parse_size("1.1 GiB")
    assert estimate.assumptions == (
        "KV heads unknown: assumed equal to attention heads (an upper bound)",
        "weights taken as the file size",
    )


def test_no_metadata_no_estimate() -> None:
    assert estimate_memory(model(None), spec(), gpu_count=0) is None
    assert estimate_memory(model({"architecture": "llama"}), spec(), gpu_count=0) is None


def test_size_text() -> None:
    assert (size_text(5.14 * GIB), size_text(640 * MIB), size_text(1)) == ("5.1 GiB", "640 MiB", "1 MiB")


def verdict(fields: dict[str, Any], **kwargs: Any) -> tuple[str, str, str]:
    found = judge_memory_fit(
        kwargs.pop("the_model", model(TINYLLAMA)),
        spec(**fields),
        runtime=kwargs.pop("runtime", "llamacpp"),
        **kwargs,
    )
    assert found is not None
    return found.status, found.reason, found.message


def test_cpu_service_against_its_memory_request() -> None:
    status, reason, message = verdict({"contextSize": 4096, "resources": {"memory": "4Gi"}}, gpu_count=0)
    assert (status, reason) == ("True", "Fits")
    assert message.startswith(
        "needs ~1.3 GiB (weights 1.1 + KV 0.1 + overhead 0.1 GiB), memory request 4.0 GiB"
    )
    status, reason, message = verdict({"contextSize": 4096, "resources": {"memory": "1Gi"}}, gpu_count=0)
    assert (status, reason) == ("False", "ExceedsMemoryRequest")
    assert message.endswith("memory request 1.0 GiB")
    status, reason, message = verdict({"contextSize": 4096}, gpu_count=0)
    assert (status, reason) == ("Unknown", "NoMemoryRequest")
    assert "no memory request to compare" in message


def test_gpu_memory_from_the_service_the_model_or_the_largest_node_gpu() -> None:
    small_gpu = {"resources": {"gpu": 1, "gpuMemory": "1Gi"}}
    status, reason, message = verdict(small_gpu, gpu_count=1)
    assert (status, reason) == ("False", "ExceedsGPUMemory")
    assert "per GPU on 1 GPU" in message and "1.0 GiB per GPU (resources.gpuMemory)" in message
    gpu_model = model(TINYLLAMA, hardware={"accelerator": "cuda", "gpu": {"count": 1, "memory": "24Gi"}})
    assert verdict({}, gpu_count=1, the_model=gpu_model)[:2] == ("True", "Fits")
    assert "the Model's hardware.gpu.memory" in verdict({}, gpu_count=1, the_model=gpu_model)[2]
    assert verdict({}, gpu_count=1, node_gpu_memory=(8 * GIB, 16 * GIB))[2].endswith(
        "16.0 GiB per GPU (the largest GPU of the cluster's nodes)"
    )
    assert verdict({}, gpu_count=1)[:2] == ("Unknown", "UnknownGPUMemory")


def test_the_offloaded_part_is_split_like_the_tensor_split() -> None:
    even = estimate_memory(model(TINYLLAMA), spec(contextSize=4096), gpu_count=2)
    assert even is not None
    assert even.per_gpu() == (even.gpu_total // 2, even.gpu_total // 2)
    three_to_one = model(
        TINYLLAMA,
        hardware={"accelerator": "cuda", "gpu": {"count": 2, "sharding": {"layerSplit": ["0-14", "15-19"]}}},
    )
    uneven = estimate_memory(three_to_one, spec(contextSize=4096), gpu_count=2)
    assert uneven is not None
    assert uneven.gpu_share == (0.75, 0.25)
    none = model(
        TINYLLAMA, hardware={"accelerator": "cuda", "gpu": {"count": 2, "sharding": {"strategy": "none"}}}
    )
    assert estimate_memory(none, spec(), gpu_count=2).gpu_share == (1.0, 0.0)  # type: ignore[union-attr]


def test_partial_offload_keeps_the_rest_in_host_memory() -> None:
    half = model(
        TINYLLAMA, hardware={"accelerator": "cuda", "gpu": {"count": 1, "layers": 11, "memory": "24Gi"}}
    )
    estimate = estimate_memory(half, spec(contextSize=4096), gpu_count=1)
    assert estimate is not None and estimate.gpu_layers == 11
    assert estimate.host_total == pytest.approx(
        (estimate.weights + estimate.kv_cache) / 2 + PROCESS_MARGIN, abs=2
    )
    status, reason, message = verdict(
        {"contextSize": 4096, "resources": {"gpu": 1, "hostMemory": "256Mi"}}, gpu_count=1, the_model=half
    )
    assert (status, reason) == ("False", "ExceedsMemoryRequest")
    assert "(11 of 22 layers stay on the CPU)" in message


def test_only_llamacpp_is_estimated() -> None:
    assert judge_memory_fit(model(TINYLLAMA), spec(runtime="vllm"), runtime="vllm", gpu_count=1) is None


def test_node_gpu_memory_reads_the_label_of_nodes_that_offer_the_resource() -> None:
    def node(gpus: str, memory: str | None) -> dict[str, Any]:
        labels = {"nvidia.com/gpu.memory": memory} if memory else {}
        return {"metadata": {"labels": labels}, "status": {"capacity": {"nvidia.com/gpu": gpus}}}

    nodes = [
        node("2", "81920"),
        node("0", "99999"),
        node("1", None),
        node("4", "not-a-number"),
        node("1", "24576"),
    ]
    assert node_gpu_memory(nodes, "nvidia.com/gpu") == (80 * GIB, 24 * GIB)
    assert node_gpu_memory(nodes, "amd.com/gpu") == ()


# -- planning --------------------------------------------------------------------------------------

GGUF_MODEL = make_model(status={"size": "1.1 GiB", "gguf": TINYLLAMA})


def test_planning_reports_a_misfit_with_a_condition_and_an_event_and_still_applies() -> None:
    result = plan({"contextSize": 4096, "resources": {"memory": "1Gi"}}, GGUF_MODEL)
    found = condition(result, "MemoryFit")
    assert found is not None and found[:2] == ("False", "ExceedsMemoryRequest")
    assert [(e.type, e.reason) for e in result.events if e.reason == "InsufficientMemory"] == [
        ("Warning", "InsufficientMemory")
    ]
    assert result.deployment is not None  # an estimate can be wrong: not blocking by default
    assert result.status.phase != "Failed"


def test_enforce_annotation_blocks_a_misfit_and_heals_when_the_request_grows() -> None:
    enforced = make_isvc({"contextSize": 4096, "resources": {"memory": "1Gi"}})
    enforced.metadata.annotations = {"inference.llmkube.dev/memory-fit": "enforce"}
    blocked = plan(isvc=enforced, model=GGUF_MODEL)
    assert blocked.status.phase == "Failed"
    assert blocked.deployment is None and blocked.service is None
    degraded = condition(blocked, "Degraded")
    assert degraded is not None and degraded[:2] == ("True", "InsufficientMemory")
    assert "not started: the memory-fit annotation says enforce" in degraded[2]
    # The user gives it more memory: the same service, planned from its Failed status, now starts.
    grown = make_isvc({"contextSize": 4096, "resources": {"memory": "4Gi"}}, status=blocked.status.to_json())
    grown.metadata.annotations = enforced.metadata.annotations
    healed = plan(isvc=grown, model=GGUF_MODEL)
    assert healed.deployment is not None
    assert condition(healed, "MemoryFit")[:2] == ("True", "Fits")  # type: ignore[index]
    degraded = condition(healed, "Degraded")
    assert degraded is not None and degraded[0] == "False"


def test_a_model_without_metadata_adds_no_condition_and_turns_an_old_one_unknown() -> None:
    fresh = plan({"resources": {"memory": "1Gi"}}, make_model())
    assert condition(fresh, "MemoryFit") is None
    before = plan({"contextSize": 4096, "resources": {"memory": "8Gi"}}, GGUF_MODEL)
    after = plan(
        isvc=make_isvc({"contextSize": 4096, "resources": {"memory": "8Gi"}}, status=before.status.to_json()),
        model=make_model(),
    )
    assert condition(after, "MemoryFit")[:2] == ("Unknown", "NoModelMetadata")  # type: ignore[index]


def test_switching_to_another_runtime_removes_the_condition() -> None:
    before = plan({"contextSize": 4096, "resources": {"memory": "8Gi"}}, GGUF_MODEL)
    assert condition(before, "MemoryFit") is not None
    after = plan(isvc=make_isvc({"runtime": "vllm"}, status=before.status.to_json()), model=GGUF_MODEL)
    assert condition(after, "MemoryFit") is None


def test_node_labels_reach_the_verdict_through_observed_state() -> None:
    gpu_model = make_model(hardware={"accelerator": "cuda", "gpu": {"count": 1}}, status={"gguf": TINYLLAMA})
    node = {
        "metadata": {"labels": {"nvidia.com/gpu.memory": "512"}},
        "status": {"capacity": {"nvidia.com/gpu": "1"}},
    }
    result = plan({"contextSize": 4096}, gpu_model, observed=replace(observe(), nodes=(node,)))
    found = condition(result, "MemoryFit")
    assert found is not None and found[:2] == ("False", "ExceedsGPUMemory")
    assert "512 MiB per GPU (the largest GPU of the cluster's nodes)" in found[2]
