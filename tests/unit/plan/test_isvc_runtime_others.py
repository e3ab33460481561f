"""TGI, PersonaPlex and generic processes, and the runtime table."""

from typing import Any

import pytest
from runtime_helpers import arg_list, contains_run, run_builder

from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.plan.inferenceservice.runtimes import RUNTIME_NAMES, resolve_runtime, runtime_defaults

TGI_FLAGS: list[tuple[dict[str, Any], int, list[str], list[str]]] = [
    ({"tgiConfig": {"quantize": "awq"}}, 0, ["--quantize", "awq"], []),
    ({"tgiConfig": {"maxInputLength": 4096}}, 0, ["--max-input-length", "4096"], []),
    ({"tgiConfig": {"maxInputLength": 0}}, 0, [], ["--max-input-length"]),
    ({"tgiConfig": {"maxTotalTokens": 8192}}, 0, ["--max-total-tokens", "8192"], []),
    ({"tgiConfig": {"maxTotalTokens": 0}}, 0, [], ["--max-total-tokens"]),
    ({"tgiConfig": {"dtype": "bfloat16"}}, 0, ["--dtype", "bfloat16"], []),
    ({"tgiConfig": {}}, 0, [], ["--quantize", "--dtype", "--max-input-length", "--max-total-tokens"]),
    ({}, 2, ["--num-shard", "2"], []),
    ({}, 1, [], ["--num-shard"]),
    ({"parallelSlots": 1}, 0, ["--max-concurrent-requests", "1"], []),
    ({"parallelSlots": 8}, 0, ["--max-concurrent-requests", "8"], []),
    ({}, 0, [], ["--max-concurrent-requests"]),
    (
        {"parallelSlots": 8, "extraArgs": ["--max-concurrent-requests=32"]},
        0,
        ["--max-concurrent-requests=32"],
        ["--max-concurrent-requests"],
    ),
]


@pytest.mark.parametrize(("spec", "gpus", "expected", "absent"), TGI_FLAGS)
def test_tgi_flags(spec: dict[str, Any], gpus: int, expected: list[str], absent: list[str]) -> None:
    args = arg_list(run_builder("tgi", spec, gpus=gpus, model_path=""))
    assert contains_run(args, expected), args
    for flag in absent:
        assert flag not in args


def test_tgi_base_args_use_the_source_as_model_id() -> None:
    args = arg_list(run_builder("tgi", model_path="", source="org/model", port=80))
    assert args == ["--model-id", "org/model", "--hostname", "0.0.0.0", "--port", "80"]


def test_tgi_extra_args_are_appended_last() -> None:
    spec = {"tgiConfig": {"quantize": "eetq"}, "parallelSlots": 4, "extraArgs": ["--trust-remote-code"]}
    args = arg_list(run_builder("tgi", spec, gpus=2, model_path=""))
    assert args[-1] == "--trust-remote-code"
    assert args.index("--quantize") < args.index("--num-shard") < args.index("--max-concurrent-requests")


def test_tgi_token_env() -> None:
    process = run_builder("tgi", {"tgiConfig": {"hfTokenSecretRef": {"name": "hf", "key": "t"}}})
    assert process.env == (
        {"name": "HUGGING_FACE_HUB_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "t"}}},
    )
    assert run_builder("tgi", {"tgiConfig": {}}).env == ()


@pytest.mark.parametrize(
    ("config", "expected_args"),
    [
        (None, ["--ssl", "/app/ssl"]),
        ({}, ["--ssl", "/app/ssl"]),
        ({"quantize4Bit": True}, ["--ssl", "/app/ssl", "--quantize-4bit"]),
        ({"cpuOffload": True}, ["--ssl", "/app/ssl", "--cpu-offload"]),
        (
            {"quantize4Bit": True, "cpuOffload": True},
            ["--ssl", "/app/ssl", "--quantize-4bit", "--cpu-offload"],
        ),
        ({"quantize4Bit": False, "cpuOffload": False}, ["--ssl", "/app/ssl"]),
    ],
)
def test_personaplex_args(config: dict[str, Any] | None, expected_args: list[str]) -> None:
    spec = {"personaPlexConfig": config} if config is not None else {}
    process = run_builder("personaplex", {**spec, "extraArgs": ["--ignored"]})
    assert arg_list(process) == expected_args
    assert process.command == ("/app/moshi/.venv/bin/python", "-m", "moshi.server")


def test_personaplex_env_token_then_no_torch_compile() -> None:
    process = run_builder(
        "personaplex", {"personaPlexConfig": {"hfTokenSecretRef": {"name": "s", "key": "k"}}}
    )
    assert process.env == (
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
        {"name": "NO_TORCH_COMPILE", "value": "1"},
    )
    assert run_builder("personaplex").env == ({"name": "NO_TORCH_COMPILE", "value": "1"},)


@pytest.mark.parametrize(("spec_args", "expected"), [(None, None), ([], None), (["--a", "1"], ("--a", "1"))])
def test_generic_passes_args_through(spec_args: list[str] | None, expected: tuple[str, ...] | None) -> None:
    process = run_builder("generic", {"args": spec_args, "extraArgs": ["--ignored"]})
    assert process.args == expected
    assert process.command is None and process.env == ()


@pytest.mark.parametrize(
    ("runtime", "container", "image", "port", "init", "metric", "probe"),
    [
        (
            "llamacpp",
            "llama-server",
            "ghcr.io/ggml-org/llama.cpp:server-b10068",
            8080,
            True,
            "llamacpp:requests_processing",
            "http",
        ),
        ("vllm", "vllm", "vllm/vllm-openai:v0.20.0", 8000, True, "vllm:num_requests_running", "http"),
        (
            "tgi",
            "tgi",
            "ghcr.io/huggingface/text-generation-inference:3.3.7",
            80,
            False,
            "tgi_queue_size",
            "http",
        ),
        ("personaplex", "personaplex", "", 8998, False, "llamacpp:requests_processing", "tcp"),
        ("generic", "inference-server", "", 8080, False, "llamacpp:requests_processing", "tcp"),
    ],
)
def test_runtime_table(
    runtime: str, container: str, image: str, port: int, init: bool, metric: str, probe: str
) -> None:
    defaults = runtime_defaults(runtime)
    assert (defaults.container_name, defaults.default_image, defaults.default_port) == (
        container,
        image,
        port,
    )
    assert (defaults.needs_model_init, defaults.hpa_metric, defaults.probe) == (init, metric, probe)


def test_every_schema_runtime_has_a_backend() -> None:
    assert set(RUNTIME_NAMES) == {
        "llamacpp",
        "vllm",
        "tgi",
        "personaplex",
        "generic",
        "llamacpp-router",
        "sglang",
    }


@pytest.mark.parametrize(
    ("runtime", "resolved"), [(None, "llamacpp"), ("vllm", "vllm"), ("generic", "generic")]
)
def test_resolve_runtime(runtime: str | None, resolved: str) -> None:
    assert (
        resolve_runtime(InferenceServiceSpec.model_validate({"modelRef": "m", "runtime": runtime}))
        == resolved
    )


def test_unknown_runtime_falls_back_to_llamacpp() -> None:
    # model_construct skips validation on purpose: a value from a newer schema must not crash us.
    future = InferenceServiceSpec.model_construct(model_ref="m", runtime="ollama")  # type: ignore[arg-type]
    assert resolve_runtime(future) == "llamacpp"


@pytest.mark.parametrize(
    ("runtime", "config_field", "variable"),
    [
        ("vllm", "vllmConfig", "HF_TOKEN"),
        ("tgi", "tgiConfig", "HUGGING_FACE_HUB_TOKEN"),
        ("personaplex", "personaPlexConfig", "HF_TOKEN"),
    ],
)
def test_hf_token_secret_ref_passes_name_key_and_optional(
    runtime: str, config_field: str, variable: str
) -> None:
    ref = {"name": "hf-secret", "key": "token", "optional": False}
    process = run_builder(runtime, {config_field: {"hfTokenSecretRef": ref}})
    assert process.env[0] == {"name": variable, "valueFrom": {"secretKeyRef": ref}}


def test_a_pinned_repository_revision_reaches_vllm_and_tgi() -> None:
    vllm = arg_list(run_builder("vllm", source="org/repo", model_path="", revision="v2"))
    assert vllm[:1] == ["org/repo"] and contains_run(vllm, ["--revision", "v2"])
    tgi = arg_list(run_builder("tgi", source="org/repo", model_path="", revision="v2"))
    assert contains_run(tgi, ["--model-id", "org/repo"]) and contains_run(tgi, ["--revision", "v2"])
    # A file the downloader staged has no revision to pass.
    assert "--revision" not in arg_list(run_builder("vllm", revision="v2"))
