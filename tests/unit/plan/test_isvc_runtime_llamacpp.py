"""llama.cpp arguments, flag by flag: present, absent, zero and false."""

from typing import Any

import pytest
from runtime_helpers import arg_list, contains_run, run_builder

from llmkube.api.model import GPUSpec
from llmkube.plan.inferenceservice.runtimes.llamacpp import gpu_layers, split_mode, tensor_split

# (spec, gpus, expected consecutive args, flags that must be absent)
FLAGS: list[tuple[str, dict[str, Any], int, list[str], list[str]]] = [
    ("context size", {"contextSize": 8192}, 0, ["--ctx-size", "8192"], []),
    ("no context size", {}, 0, [], ["--ctx-size"]),
    ("parallel 1 is honoured", {"parallelSlots": 1}, 0, ["--parallel", "1"], []),
    ("parallel 4", {"parallelSlots": 4}, 0, ["--parallel", "4"], []),
    ("flash attention with a GPU", {"flashAttention": True}, 1, ["--flash-attn", "on"], []),
    ("flash attention without a GPU is skipped", {"flashAttention": True}, 0, [], ["--flash-attn"]),
    ("flash attention false", {"flashAttention": False}, 1, [], ["--flash-attn"]),
    ("jinja", {"jinja": True}, 0, ["--jinja"], []),
    ("jinja false", {"jinja": False}, 0, [], ["--jinja"]),
    (
        "cache types",
        {"cacheTypeK": "q8_0", "cacheTypeV": "q4_0"},
        0,
        ["--cache-type-k", "q8_0", "--cache-type-v", "q4_0"],
        [],
    ),
    (
        "custom cache types win",
        {
            "cacheTypeK": "q8_0",
            "cacheTypeCustomK": "turbo3",
            "cacheTypeV": "f16",
            "cacheTypeCustomV": "turbo4",
        },
        0,
        ["--cache-type-k", "turbo3", "--cache-type-v", "turbo4"],
        [],
    ),
    ("only a custom V", {"cacheTypeCustomV": "q5_1"}, 0, ["--cache-type-v", "q5_1"], ["--cache-type-k"]),
    ("moe cpu offload", {"moeCPUOffload": True}, 0, ["--cpu-moe"], []),
    ("moe cpu offload false", {"moeCPUOffload": False}, 0, [], ["--cpu-moe"]),
    ("moe cpu layers", {"moeCPULayers": 12}, 0, ["--n-cpu-moe", "12"], []),
    ("moe cpu layers 0", {"moeCPULayers": 0}, 0, [], ["--n-cpu-moe"]),
    ("no kv offload", {"noKvOffload": True}, 0, ["--no-kv-offload"], []),
    ("no kv offload false", {"noKvOffload": False}, 0, [], ["--no-kv-offload"]),
    ("no warmup", {"noWarmup": True}, 0, ["--no-warmup"], []),
    ("no warmup false", {"noWarmup": False}, 0, [], ["--no-warmup"]),
    (
        "batch sizes",
        {"batchSize": 2048, "uBatchSize": 512},
        0,
        ["--batch-size", "2048", "--ubatch-size", "512"],
        [],
    ),
    ("no batch sizes", {}, 0, [], ["--batch-size", "--ubatch-size"]),
    ("reasoning budget 0 is emitted", {"reasoningBudget": 0}, 0, ["--reasoning-budget", "0"], []),
    (
        "reasoning budget with message",
        {"reasoningBudget": 256, "reasoningBudgetMessage": "Stop thinking."},
        0,
        ["--reasoning-budget", "256", "--reasoning-budget-message", "Stop thinking."],
        [],
    ),
    (
        "message without budget is ignored",
        {"reasoningBudgetMessage": "x"},
        0,
        [],
        ["--reasoning-budget-message"],
    ),
    (
        "empty message",
        {"reasoningBudget": 5, "reasoningBudgetMessage": ""},
        0,
        [],
        ["--reasoning-budget-message"],
    ),
    (
        "tensor overrides in order",
        {"tensorOverrides": ["blk\\.1\\.ffn=CPU", "exps=CPU"]},
        0,
        ["--override-tensor", "blk\\.1\\.ffn=CPU", "--override-tensor", "exps=CPU"],
        [],
    ),
    (
        "metadata overrides in order",
        {"metadataOverrides": ["a.b=int:1", "c=str:x"]},
        0,
        ["--override-kv", "a.b=int:1", "--override-kv", "c=str:x"],
        [],
    ),
    (
        "rope scaling, type only",
        {"ropeScaling": {"type": "linear"}},
        0,
        ["--rope-scaling", "linear"],
        ["--rope-scale", "--yarn-orig-ctx"],
    ),
    (
        "rope scaling, all",
        {"ropeScaling": {"type": "yarn", "factor": "4.0", "originalContext": 32768}},
        0,
        ["--rope-scaling", "yarn", "--rope-scale", "4.0", "--yarn-orig-ctx", "32768"],
        [],
    ),
    ("gpu layers default 99", {}, 1, ["--n-gpu-layers", "99"], ["--split-mode", "--tensor-split"]),
    ("no gpu, no gpu layers", {}, 0, [], ["--n-gpu-layers"]),
]


@pytest.mark.parametrize(("case", "spec", "gpus", "expected", "absent"), FLAGS, ids=[f[0] for f in FLAGS])
def test_llamacpp_flags(
    case: str, spec: dict[str, Any], gpus: int, expected: list[str], absent: list[str]
) -> None:
    args = arg_list(run_builder("llamacpp", spec, gpus=gpus))
    assert contains_run(args, expected), args
    for flag in absent:
        assert flag not in args


def test_base_arguments_in_order_and_metrics_last() -> None:
    args = arg_list(run_builder("llamacpp", {}, port=9090))
    assert args == ["--model", "/models/k/tiny.gguf", "--host", "0.0.0.0", "--port", "9090", "--metrics"]


def test_no_model_flag_without_a_model_path() -> None:
    args = arg_list(run_builder("llamacpp", {"extraArgs": ["-hf", "org/repo"]}, model_path=""))
    assert "--model" not in args and "" not in args
    assert args[:4] == ["--host", "0.0.0.0", "--port", "8080"]
    assert contains_run(args, ["-hf", "org/repo", "--metrics"])


@pytest.mark.parametrize(
    ("extra", "expected_metrics"),
    [(["--seed", "42"], 1), (["--metrics", "--seed", "42"], 1), ([], 1)],
)
def test_metrics_last_and_never_duplicated(extra: list[str], expected_metrics: int) -> None:
    args = arg_list(run_builder("llamacpp", {"extraArgs": extra}))
    assert args.count("--metrics") == expected_metrics
    if "--metrics" not in extra:
        assert args[-1] == "--metrics"
        assert args[-1 - len(extra) : -1] == extra  # extraArgs right before --metrics, verbatim


@pytest.mark.parametrize("user_flag", [["--parallel", "8"], ["--parallel=8"], ["-np", "8"]])
def test_extra_args_win_over_parallel(user_flag: list[str]) -> None:
    args = arg_list(run_builder("llamacpp", {"parallelSlots": 2, "extraArgs": user_flag}))
    assert "2" not in args
    assert contains_run(args, user_flag)


@pytest.mark.parametrize("user_flag", [["--rope-scaling", "linear"], ["--rope-scaling=linear"]])
def test_extra_args_win_over_rope_scaling(user_flag: list[str]) -> None:
    spec = {"ropeScaling": {"type": "yarn", "factor": "2", "originalContext": 4096}, "extraArgs": user_flag}
    args = arg_list(run_builder("llamacpp", spec))
    assert "yarn" not in args and "--rope-scale" not in args and "--yarn-orig-ctx" not in args
    assert args.count("--rope-scaling") + sum(a.startswith("--rope-scaling=") for a in args) == 1


def test_other_duplicates_pass_through() -> None:
    args = arg_list(run_builder("llamacpp", {"contextSize": 4096, "extraArgs": ["--ctx-size", "8192"]}))
    assert args.count("--ctx-size") == 2


@pytest.mark.parametrize(("layers", "expected"), [(None, 99), (0, 99), (-1, 99), (1, 1), (33, 33)])
def test_gpu_layers(layers: int | None, expected: int) -> None:
    assert gpu_layers(GPUSpec.model_validate({"layers": layers})) == expected
    assert contains_run(
        arg_list(run_builder("llamacpp", gpus=1, gpu={"layers": layers})), ["--n-gpu-layers", str(expected)]
    )


def test_gpu_layers_without_gpu_spec() -> None:
    assert gpu_layers(None) == 99


@pytest.mark.parametrize(
    ("strategy", "mode"),
    [
        (None, "layer"),
        ("layer", "layer"),
        ("pipeline", "layer"),
        ("tensor", "row"),
        ("row", "row"),
        ("none", "none"),
    ],
)
def test_split_mode(strategy: str | None, mode: str) -> None:
    gpu = {"sharding": {"strategy": strategy}} if strategy else {}
    assert split_mode(GPUSpec.model_validate(gpu)) == mode
    args = arg_list(run_builder("llamacpp", gpus=2, gpu=gpu))
    assert contains_run(args, ["--split-mode", mode])
    assert ("--tensor-split" in args) is (mode != "none")


def test_split_mode_without_gpu_spec() -> None:
    assert split_mode(None) == "layer"
    assert contains_run(
        arg_list(run_builder("llamacpp", gpus=2)), ["--split-mode", "layer", "--tensor-split", "1,1"]
    )


def test_single_gpu_has_no_split() -> None:
    args = arg_list(run_builder("llamacpp", gpus=1, gpu={"sharding": {"strategy": "row"}}))
    assert "--split-mode" not in args and "--tensor-split" not in args


@pytest.mark.parametrize(
    ("layer_split", "gpus", "expected"),
    [
        (None, 2, "1,1"),
        (None, 4, "1,1,1,1"),
        (["0-24", "25-39"], 2, "5,3"),  # 25 and 15 layers, GCD 5
        ([" 0 - 9 ", "10-19", "20-39"], 3, "1,1,2"),  # whitespace trimmed
        (["0-0", "1-1"], 2, "1,1"),
        (["0-24"], 2, "1,1"),  # count mismatch
        (["0-24", "x-39"], 2, "1,1"),  # unparseable
        (["10-5", "6-9"], 2, "1,1"),  # start after end
        (["-1-5", "6-9"], 2, "1,1"),  # negative
        (["0-24", "25"], 2, "1,1"),  # no range
        (["0-²", "3-4"], 2, "1,1"),  # only ASCII digits count
        ([], 2, "1,1"),
    ],
)
def test_tensor_split(layer_split: list[str] | None, gpus: int, expected: str) -> None:
    assert tensor_split(layer_split, gpus) == expected


def test_tensor_split_reaches_the_args() -> None:
    gpu = {"sharding": {"strategy": "layer", "layerSplit": ["0-24", "25-39"]}}
    assert contains_run(arg_list(run_builder("llamacpp", gpus=2, gpu=gpu)), ["--tensor-split", "5,3"])


def test_llamacpp_has_no_env_and_no_command() -> None:
    process = run_builder("llamacpp", {"env": [{"name": "X", "value": "1"}]})
    assert process.env == () and process.command is None
