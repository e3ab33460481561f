"""`llmkube deploy`'s objects from its options (pure)."""

import pytest

from llmkube.api.inferenceservice import InferenceService
from llmkube.api.model import Model
from llmkube.plan.inferenceservice.images import default_image
from llmkube.usercli.manifests import DeployError, DeployOptions, build_manifests, name_from_source

TINY = "https://huggingface.co/TheBloke/TinyLlama-1.1B-Chat-v1.0-GGUF/resolve/main/tinyllama-1.1b-chat-v1.0.Q4_K_M.gguf"


@pytest.mark.parametrize(
    ("source", "name"),
    [
        (TINY, "tinyllama-1-1b-chat-v1-0"),
        ("/models/Llama-3.1-8B-Instruct-Q5_K_S.gguf", "llama-3-1-8b-instruct"),
        ("file:///m/qwen2.5-7b-instruct-f16.gguf", "qwen2-5-7b-instruct"),
        ("pvc://models/phi/Phi-3-mini.gguf", "phi-3-mini"),
        ("Qwen/Qwen2.5-0.5B-Instruct", "qwen2-5-0-5b-instruct"),
        ("https://x.invalid/7b.gguf?download=true", "model-7b"),
        ("https://x.invalid/" + "a" * 80 + ".gguf", "a" * 63),
    ],
)
def test_the_name_comes_from_the_file_or_repo_name(source: str, name: str) -> None:
    assert name_from_source(source) == name
    assert len(name) <= 63


def test_cpu_deployment_sets_only_what_was_asked_and_both_parse_as_api_objects() -> None:
    model, isvc = build_manifests(DeployOptions(source=TINY, namespace="ml", memory="4Gi", context_size=4096))
    assert model["metadata"] == {"name": "tinyllama-1-1b-chat-v1-0", "namespace": "ml"}
    assert model["spec"] == {"source": TINY, "hardware": {"accelerator": "cpu"}}
    assert isvc["spec"] == {
        "modelRef": "tinyllama-1-1b-chat-v1-0",
        "resources": {"memory": "4Gi"},
        "contextSize": 4096,
    }
    Model.model_validate(model)
    InferenceService.model_validate(isvc)


@pytest.mark.parametrize(
    ("vendor", "accelerator", "image"),
    [
        ("nvidia", "cuda", "ghcr.io/ggml-org/llama.cpp:server-cuda-b10068"),
        ("amd", "rocm", "ghcr.io/ggml-org/llama.cpp:server-rocm-b10068"),
        ("intel", "intel", "ghcr.io/ggml-org/llama.cpp:server-intel-b10068"),
    ],
)
def test_gpu_deployment_gets_the_gpu_on_both_objects_and_the_controller_picks_the_build(
    vendor: str, accelerator: str, image: str
) -> None:
    model, isvc = build_manifests(
        DeployOptions(source=TINY, name="m", gpus=2, gpu_vendor=vendor, gpu_layers=-1)  # type: ignore[arg-type]
    )
    assert model["spec"]["hardware"] == {
        "accelerator": accelerator,
        "gpu": {"enabled": True, "count": 2, "vendor": vendor, "layers": -1},
    }
    # No image in the spec: the controller chooses the vendor's build, as for a service applied as YAML.
    assert "image" not in isvc["spec"]
    assert isvc["spec"]["resources"] == {"gpu": 2}
    parsed = Model.model_validate(model)
    assert default_image("llamacpp", parsed, 2, {}) == image


def test_an_explicit_image_and_a_non_llamacpp_runtime_keep_their_image() -> None:
    _, isvc = build_manifests(DeployOptions(source=TINY, name="m", gpus=1, image="my/llama:1"))
    assert isvc["spec"]["image"] == "my/llama:1"
    _, isvc = build_manifests(DeployOptions(source="org/repo", name="m", gpus=1, runtime="vllm"))
    assert "image" not in isvc["spec"]
    assert isvc["spec"]["runtime"] == "vllm"


def test_autoscaling_env_extra_args_and_annotations() -> None:
    _, isvc = build_manifests(
        DeployOptions(
            source=TINY,
            name="m",
            min_replicas=2,
            max_replicas=5,
            env=("A=1", "B=x=y"),
            extra_args=("--mlock",),
            annotations={"inference.llmkube.dev/memory-fit": "enforce"},
        )
    )
    assert isvc["spec"]["autoscaling"] == {"minReplicas": 2, "maxReplicas": 5}
    assert isvc["spec"]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "x=y"}]
    assert isvc["spec"]["extraArgs"] == ["--mlock"]
    assert isvc["metadata"]["annotations"] == {"inference.llmkube.dev/memory-fit": "enforce"}
    InferenceService.model_validate(isvc)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (DeployOptions(source="model.gguf"), "is not a URL"),
        (DeployOptions(source=TINY, name="Bad_Name"), "--name"),
        (DeployOptions(source=TINY, name="x" * 64), "at most 63"),
        (DeployOptions(source=TINY, min_replicas=2), "--min-replicas needs --max-replicas"),
        (DeployOptions(source=TINY, min_replicas=5, max_replicas=2), "--min-replicas 5 is more than"),
        (DeployOptions(source=TINY, env=("NOVALUE",)), '--env "NOVALUE"'),
    ],
)
def test_mistakes_are_refused_naming_the_option(options: DeployOptions, words: str) -> None:
    with pytest.raises(DeployError, match=words):
        build_manifests(options)
