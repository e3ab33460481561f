"""The shipped catalog (llmkube/usercli/catalog/models.yaml): every entry makes a Model and an
InferenceService the API types accept, names files the planner can stage, and gets its memory
from the controller's estimator (never a figure in the file); `catalog list|info` and
`deploy ID --dry-run` print them without a cluster."""

import dataclasses
import json
from importlib import resources

import pytest
import yaml

from llmkube.api.inferenceservice import InferenceService, InferenceServiceSpec
from llmkube.api.model import Model, ModelStatus
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.images import default_image
from llmkube.plan.inferenceservice.memory_fit import estimate_memory
from llmkube.plan.model.fileset import StagingPlan, staging_plan
from llmkube.plan.model.remote import RemoteSource, remote_source
from llmkube.plan.model.source import SourceKind, classify_source, parse_hf_source
from llmkube.usercli import kubectl_plugin_main
from llmkube.usercli.catalog.entries import (
    DEFAULT_CONTEXT_CAP,
    CatalogError,
    decimal_bytes,
    deploy_options,
    estimate,
    find_entry,
    gguf_of,
    load_catalog,
    parse_catalog,
)
from llmkube.usercli.manifests import DeployOptions, build_manifests

CATALOG = load_catalog()
IDS = [entry.id for entry in CATALOG]


def test_the_catalog_has_fifteen_to_twenty_distinct_models() -> None:
    assert 15 <= len(CATALOG) <= 20
    assert len(set(IDS)) == len(IDS)
    assert len({entry.family for entry in CATALOG}) >= 6  # Qwen, Llama, Mistral, Phi, Gemma, ...


@pytest.mark.parametrize("entry_id", IDS)
def test_every_entry_deploys_as_objects_the_api_types_accept(entry_id: str) -> None:
    entry = find_entry(entry_id)
    assert entry is not None
    model_obj, service_obj = build_manifests(deploy_options(entry, DeployOptions(source=entry_id)))
    model = Model.model_validate(model_obj)
    InferenceService.model_validate(service_obj)
    assert model.metadata.name == service_obj["spec"]["modelRef"] == entry.object_name
    # A Hugging Face repository with the files listed: the downloader stages them from the Hub.
    assert classify_source(model.spec.source) is SourceKind.HF
    assert not isinstance(parse_hf_source(model.spec.source), str)
    plan = staging_plan(model.spec)
    assert isinstance(plan, StagingPlan) and plan.primary == entry.files[0]
    assert model.spec.mmproj == entry.mmproj
    remote = remote_source(model, OperatorConfig().hf_endpoint)
    assert isinstance(remote, RemoteSource)
    assert all(file.dest.endswith(".gguf") for file in remote.files)
    assert model.spec.quantization == entry.quantization and entry.quantization in entry.files[0].upper()
    assert service_obj["spec"]["contextSize"] == min(entry.context_length, DEFAULT_CONTEXT_CAP)


@pytest.mark.parametrize("entry_id", IDS)
def test_the_estimate_is_the_controllers_own(entry_id: str) -> None:
    entry = find_entry(entry_id)
    assert entry is not None
    model_obj, service_obj = build_manifests(deploy_options(entry))
    model = Model.model_validate(model_obj).model_copy(
        update={"status": ModelStatus(gguf=gguf_of(entry), source_content_length=entry.download_bytes)}
    )
    spec = InferenceServiceSpec.model_validate(service_obj["spec"])
    expected = estimate_memory(model, spec, gpu_count=0)
    assert expected is not None and estimate(entry) == expected
    # The weights are the files' bytes (the estimator's fallback without tensor bytes), the rest is
    # the KV cache and buffers of the context deployed: never less than the weights.
    assert expected.weights == entry.download_bytes and expected.total > expected.weights
    assert expected.context >= entry.default_context


def test_the_estimate_follows_the_figures_and_the_options() -> None:
    entry = find_entry("llama-3.1-8b-instruct")
    assert entry is not None
    base = estimate(entry)
    # More KV heads: a larger cache; a longer context: larger again; q8_0 cache: about half.
    wider = dataclasses.replace(entry, architecture=dataclasses.replace(entry.architecture, kv_heads=32))
    assert estimate(wider).kv_cache == 4 * base.kv_cache
    longer = estimate(entry, DeployOptions(source=entry.id, context_size=16384))
    assert longer.kv_cache == 2 * base.kv_cache
    halved = estimate(entry, DeployOptions(source=entry.id, cache_type_k="q8_0", cache_type_v="q8_0"))
    assert halved.kv_cache < 0.6 * base.kv_cache
    on_gpu = estimate(entry, DeployOptions(source=entry.id, gpus=1))
    assert on_gpu.gpu_total > 0.95 * base.total - on_gpu.overhead and on_gpu.host_total < base.total / 10


def test_the_file_holds_no_memory_figure_and_says_where_sizes_come_from() -> None:
    text = resources.files("llmkube.usercli.catalog").joinpath("models.yaml").read_text()
    assert "model cards" in text
    for raw in yaml.safe_load(text)["models"]:
        assert not {key for key in raw if "memory" in key.lower() or "estimate" in key.lower()}


@pytest.mark.parametrize(
    ("text", "bytes_"), [("669 MB", 669_000_000), ("4.68 GB", 4_680_000_000), ("42.52 GB", 42_520_000_000)]
)
def test_sizes_are_decimal_as_the_hub_lists_them(text: str, bytes_: int) -> None:
    assert decimal_bytes(text) == bytes_


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("models: {}", '"models" list'),
        ("models: [{id: a}]", "'a'"),
        (
            "models:\n- &e {id: a, title: t, family: f, parameters: 1B, source: hf://o/r, files: [a.gguf], "
            "quantization: Q4_K_M, size: 1 GB, contextLength: 1, license: mit, architecture: {name: llama, "
            "layers: 1, embedding: 8, heads: 1, kvHeads: 1, vocab: 8}}\n- *e",
            "listed twice",
        ),
        (
            "models:\n- {id: a, title: t, family: f, parameters: 1B, source: hf://o/r, files: [a.gguf], "
            "quantization: Q4_K_M, size: 1 GiB, contextLength: 1, license: mit, architecture: {name: llama, "
            "layers: 1, embedding: 8, heads: 1, kvHeads: 1, vocab: 8}}",
            "not like",
        ),
    ],
)
def test_a_broken_catalog_is_refused_with_what_is_wrong(text: str, complaint: str) -> None:
    with pytest.raises(CatalogError, match=complaint):
        parse_catalog(text)


def test_a_catalog_id_is_looked_up_only_when_the_source_is_no_source() -> None:
    from llmkube.usercli.deploy import catalog_entry

    assert catalog_entry("qwen2.5-7b-instruct") is find_entry("qwen2.5-7b-instruct")
    assert catalog_entry("Qwen2.5-7B-Instruct") is not None  # ids are matched in lower case
    assert catalog_entry("Qwen/Qwen2.5-7B-Instruct") is None  # a repository id stays one
    assert catalog_entry("/models/phi-4") is None and catalog_entry("unknown-model") is None


def test_gpu_deploy_gets_the_gpu_build_of_llamacpp() -> None:
    entry = find_entry("qwen2.5-7b-instruct")
    assert entry is not None
    model_obj, service_obj = build_manifests(deploy_options(entry, DeployOptions(source=entry.id, gpus=1)))
    model = Model.model_validate(model_obj)
    assert model_obj["spec"]["hardware"] == {
        "accelerator": "cuda",
        "gpu": {"enabled": True, "count": 1, "vendor": "nvidia"},
    }
    assert service_obj["spec"]["resources"] == {"gpu": 1}
    assert "server-cuda" in default_image("llamacpp", model, 1, {})
    cpu_model = Model.model_validate(build_manifests(deploy_options(entry))[0])
    assert "server-cuda" not in default_image("llamacpp", cpu_model, 0, {})


def test_catalog_list_prints_a_kubectl_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert kubectl_plugin_main(["catalog", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["ID", "PARAMS", "QUANT", "SIZE", "CONTEXT", "LICENSE", "MEMORY"]
    assert [line.split()[0] for line in lines[1:]] == IDS
    tiny = next(line for line in lines if line.startswith("tinyllama-1.1b-chat "))
    assert tiny.split()[1:6] == ["1.1B", "Q4_K_M", "669", "MB", "2048"]

    assert kubectl_plugin_main(["catalog", "list", "--no-headers", "-o", "wide"]) == 0
    wide = capsys.readouterr().out.splitlines()
    assert len(wide) == len(IDS) and "hf://TheBloke/TinyLlama-1.1B-Chat-v1.0-GGUF" in wide[0]

    assert kubectl_plugin_main(["catalog", "ls", "-o", "name"]) == 0
    assert capsys.readouterr().out.split() == IDS

    assert kubectl_plugin_main(["catalog", "list", "-o", "json"]) == 0
    documents = json.loads(capsys.readouterr().out)["models"]
    assert [d["id"] for d in documents] == IDS
    first = documents[0]["memoryEstimate"]
    assert first["cpu"]["totalBytes"] == estimate(CATALOG[0]).total and "gpuBytes" in first["gpu1"]


def test_catalog_info_shows_one_entry_and_refuses_an_unknown_id(capsys: pytest.CaptureFixture[str]) -> None:
    assert kubectl_plugin_main(["catalog", "info", "gemma-3-4b-it"]) == 0
    out = capsys.readouterr().out
    assert "mmproj-model-f16.gguf" in out and "Memory (CPU):" in out and "llmkube deploy gemma-3-4b-it" in out
    assert kubectl_plugin_main(["catalog", "info", "gemma-3-4b-it", "-o", "yaml"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["mmproj"] == "mmproj-model-f16.gguf"
    assert kubectl_plugin_main(["catalog", "info", "no-such-model"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert (
        captured.err == 'error: "no-such-model" is not in the catalog (llmkube catalog list shows its ids)\n'
    )


def test_deploy_id_dry_run_prints_both_objects_without_a_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["deploy", "phi-4", "--gpu", "1", "--dry-run", "-o", "yaml", "--kubeconfig", "/nonexistent"]
    assert kubectl_plugin_main(argv) == 0
    model, service = list(yaml.safe_load_all(capsys.readouterr().out))
    assert model["spec"]["source"] == "hf://bartowski/phi-4-GGUF"
    assert (
        model["spec"]["files"] == ["phi-4-Q4_K_M.gguf"] and model["spec"]["hardware"]["accelerator"] == "cuda"
    )
    assert service["metadata"]["name"] == "phi-4" and service["spec"]["contextSize"] == 8192
    named = ["deploy", "gemma-3-4b-it", "--name", "vision", "--ctx", "2048", "--dry-run", "-o", "json"]
    assert kubectl_plugin_main(named) == 0
    model, service = json.loads(capsys.readouterr().out)
    assert (model["metadata"]["name"], model["spec"]["mmproj"]) == ("vision", "mmproj-model-f16.gguf")
    assert service["spec"]["contextSize"] == 2048
