"""vLLM arguments and env, flag by flag."""

import json
from typing import Any

import pytest
from runtime_helpers import arg_list, contains_run, run_builder

from llmkube.api.inferenceservice import VLLMConfig
from llmkube.plan.inferenceservice.runtimes.vllm import kv_cache_dtype

CONFIG_FLAGS: list[tuple[str, dict[str, Any], int, list[str], list[str]]] = [
    ("tensor parallel 2", {"tensorParallelSize": 2}, 0, ["--tensor-parallel-size", "2"], []),
    ("tensor parallel 1 is not emitted", {"tensorParallelSize": 1}, 0, [], ["--tensor-parallel-size"]),
    ("max model len", {"maxModelLen": 32768}, 0, ["--max-model-len", "32768"], []),
    ("max model len 0 is not emitted", {"maxModelLen": 0}, 0, [], ["--max-model-len"]),
    ("quantization", {"quantization": "awq"}, 0, ["--quantization", "awq"], []),
    ("dtype", {"dtype": "bfloat16"}, 0, ["--dtype", "bfloat16"], []),
    ("kv cache dtype", {"kvCacheDtype": "fp8_e5m2"}, 0, ["--kv-cache-dtype", "fp8_e5m2"], []),
    ("kv cache auto (default) is not emitted", {}, 0, [], ["--kv-cache-dtype"]),
    (
        "custom kv dtype wins",
        {"kvCacheDtype": "fp8_e4m3", "kvCacheCustomDtype": "fp8"},
        0,
        ["--kv-cache-dtype", "fp8"],
        [],
    ),
    ("prefix caching", {"enablePrefixCaching": True}, 0, ["--enable-prefix-caching"], []),
    ("prefix caching false", {"enablePrefixCaching": False}, 0, [], ["--enable-prefix-caching"]),
    ("chunked prefill", {"enableChunkedPrefill": True}, 0, ["--enable-chunked-prefill"], []),
    ("chunked prefill false", {"enableChunkedPrefill": False}, 0, [], ["--enable-chunked-prefill"]),
    ("max batched tokens", {"maxNumBatchedTokens": 8192}, 0, ["--max-num-batched-tokens", "8192"], []),
    ("attention backend", {"attentionBackend": "FLASHINFER"}, 0, ["--attention-backend", "FLASHINFER"], []),
    ("expert parallel", {"enableExpertParallel": True}, 0, ["--enable-expert-parallel"], []),
    ("expert parallel false", {"enableExpertParallel": False}, 0, [], ["--enable-expert-parallel"]),
    ("cpu offload with a GPU", {"cpuOffloadGB": 8}, 1, ["--cpu-offload-gb", "8"], []),
    ("cpu offload 0 with a GPU", {"cpuOffloadGB": 0}, 1, ["--cpu-offload-gb", "0"], []),
    ("cpu offload without a GPU is skipped", {"cpuOffloadGB": 8}, 0, [], ["--cpu-offload-gb"]),
    ("gpu memory utilization", {"gpuMemoryUtilization": 0.9}, 1, ["--gpu-memory-utilization", "0.9"], []),
    ("shortest decimal", {"gpuMemoryUtilization": 0.85}, 1, ["--gpu-memory-utilization", "0.85"], []),
    (
        "gpu memory utilization without a GPU",
        {"gpuMemoryUtilization": 0.9},
        0,
        [],
        ["--gpu-memory-utilization"],
    ),
    (
        "speculative disabled",
        {"speculative": {"enabled": False, "model": "d"}},
        0,
        [],
        ["--speculative-config"],
    ),
    (
        "speculative without model is skipped",
        {"speculative": {"enabled": True}},
        0,
        [],
        ["--speculative-config"],
    ),
]


@pytest.mark.parametrize(
    ("case", "config", "gpus", "expected", "absent"), CONFIG_FLAGS, ids=[f[0] for f in CONFIG_FLAGS]
)
def test_vllm_config_flags(
    case: str, config: dict[str, Any], gpus: int, expected: list[str], absent: list[str]
) -> None:
    args = arg_list(run_builder("vllm", {"vllmConfig": config}, gpus=gpus))
    assert contains_run(args, expected), args
    for flag in absent:
        assert flag not in args


def test_positional_model_then_host_and_port() -> None:
    args = arg_list(run_builder("vllm", port=8000))
    assert args == ["/models/k/tiny.gguf", "--host", "0.0.0.0", "--port", "8000"]
    assert "--model" not in args


def test_positional_model_falls_back_to_the_source() -> None:
    args = arg_list(run_builder("vllm", model_path="", source="Qwen/Qwen2.5-0.5B-Instruct"))
    assert args[0] == "Qwen/Qwen2.5-0.5B-Instruct"


def test_speculative_config_is_json_with_the_draft_model_and_token_count() -> None:
    config = {"speculative": {"enabled": True, "model": "org/draft", "numSpeculativeTokens": 6}}
    args = arg_list(run_builder("vllm", {"vllmConfig": config}))
    value = args[args.index("--speculative-config") + 1]
    assert json.loads(value) == {"model": "org/draft", "num_speculative_tokens": 6}


def test_speculative_token_count_defaults_to_the_crd_default() -> None:
    args = arg_list(run_builder("vllm", {"vllmConfig": {"speculative": {"enabled": True, "model": "d"}}}))
    assert json.loads(args[args.index("--speculative-config") + 1]) == {
        "model": "d",
        "num_speculative_tokens": 4,
    }


def test_speculative_token_count_omitted_when_null() -> None:
    spec = {"vllmConfig": {"speculative": {"enabled": True, "model": "d", "numSpeculativeTokens": None}}}
    args = arg_list(run_builder("vllm", spec))
    assert json.loads(args[args.index("--speculative-config") + 1]) == {"model": "d"}


def test_config_flag_order() -> None:
    config = {
        "tensorParallelSize": 2,
        "maxModelLen": 4096,
        "quantization": "fp8",
        "dtype": "float16",
        "kvCacheDtype": "fp8_e5m2",
        "enablePrefixCaching": True,
        "enableChunkedPrefill": True,
        "maxNumBatchedTokens": 1024,
        "attentionBackend": "flash_attn",
        "speculative": {"enabled": True, "model": "d", "numSpeculativeTokens": 2},
        "enableExpertParallel": True,
        "cpuOffloadGB": 4,
        "gpuMemoryUtilization": 0.8,
    }
    flags = [a for a in arg_list(run_builder("vllm", {"vllmConfig": config}, gpus=2)) if a.startswith("--")]
    assert flags == [
        "--host",
        "--port",
        "--tensor-parallel-size",
        "--max-model-len",
        "--quantization",
        "--dtype",
        "--kv-cache-dtype",
        "--enable-prefix-caching",
        "--enable-chunked-prefill",
        "--max-num-batched-tokens",
        "--attention-backend",
        "--speculative-config",
        "--enable-expert-parallel",
        "--cpu-offload-gb",
        "--gpu-memory-utilization",
    ]


@pytest.mark.parametrize(
    ("config", "gpus", "expected"),
    [
        (None, 2, ["--tensor-parallel-size", "2"]),
        ({}, 4, ["--tensor-parallel-size", "4"]),
        ({"tensorParallelSize": 1}, 4, []),  # an explicit value wins, even 1
        ({"tensorParallelSize": 2}, 4, ["--tensor-parallel-size", "2"]),
        (None, 1, []),
    ],
)
def test_tensor_parallel_from_gpu_count(
    config: dict[str, Any] | None, gpus: int, expected: list[str]
) -> None:
    spec = {"vllmConfig": config} if config is not None else {}
    args = arg_list(run_builder("vllm", spec, gpus=gpus))
    assert args.count("--tensor-parallel-size") == (1 if expected else 0)
    assert contains_run(args, expected)


@pytest.mark.parametrize(
    ("spec", "expected_seqs"),
    [
        ({"parallelSlots": 1}, ["--max-num-seqs", "1"]),
        ({"parallelSlots": 16}, ["--max-num-seqs", "16"]),
        ({}, None),
        ({"parallelSlots": 16, "extraArgs": ["--max-num-seqs", "64"]}, ["--max-num-seqs", "64"]),
        ({"parallelSlots": 16, "extraArgs": ["--max-num-seqs=64"]}, ["--max-num-seqs=64"]),
    ],
)
def test_max_num_seqs(spec: dict[str, Any], expected_seqs: list[str] | None) -> None:
    args = arg_list(run_builder("vllm", spec))
    if expected_seqs is None:
        assert "--max-num-seqs" not in args
    else:
        assert contains_run(args, expected_seqs)
        assert sum(a.startswith("--max-num-seqs") for a in args) == 1


def test_extra_args_last_verbatim() -> None:
    args = arg_list(
        run_builder("vllm", {"parallelSlots": 2, "extraArgs": ["--seed", "42", "--served-model-name", "m"]})
    )
    assert args[-4:] == ["--seed", "42", "--served-model-name", "m"]


def test_hf_token_from_secret() -> None:
    ref = {"name": "hf", "key": "token", "optional": True}
    process = run_builder("vllm", {"vllmConfig": {"hfTokenSecretRef": ref}})
    assert process.env == ({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": ref}},)


def test_hf_token_secret_without_optional_or_name() -> None:
    process = run_builder("vllm", {"vllmConfig": {"hfTokenSecretRef": {"key": "token"}}})
    assert process.env == ({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "", "key": "token"}}},)


def test_no_env_without_token() -> None:
    assert run_builder("vllm", {"vllmConfig": {}}).env == ()
    assert run_builder("vllm").env == ()


@pytest.mark.parametrize(
    ("kv", "custom", "expected"),
    [
        ("auto", None, ""),
        (None, None, ""),
        ("fp8_e5m2", None, "fp8_e5m2"),
        ("auto", "fp8", "fp8"),
        ("fp8_e4m3", "auto", ""),
    ],
)
def test_kv_cache_dtype(kv: str | None, custom: str | None, expected: str) -> None:
    assert (
        kv_cache_dtype(VLLMConfig.model_validate({"kvCacheDtype": kv, "kvCacheCustomDtype": custom}))
        == expected
    )
