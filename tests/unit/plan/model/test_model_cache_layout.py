from typing import Any

import pytest

from llmkube.api.model import Model
from llmkube.plan.model import ModelPlanConfig, cache_layout, is_controller_cached
from llmkube.plan.model.source import cache_key


def model(
    source: str, accelerator: str | None = None, gguf_name: str | None = None, name: str = "m"
) -> Model:
    document: dict[str, Any] = {"metadata": {"name": name}, "spec": {"source": source}}
    if accelerator:
        document["spec"]["hardware"] = {"accelerator": accelerator}
    if gguf_name:
        document["status"] = {"gguf": {"modelName": gguf_name}}
    return Model.model_validate(document)


@pytest.mark.parametrize(
    ("source", "accelerator", "cached"),
    [
        ("/data/m.gguf", None, True),
        ("file:///data/m.gguf", "cuda", True),
        ("/data/m.gguf", "metal", False),  # the host agent reads it
        ("https://h/m.gguf", None, False),
        ("pvc://c/m.gguf", None, False),
        ("org/repo", None, False),
    ],
)
def test_only_local_non_metal_sources_use_the_controller_cache(
    source: str, accelerator: str | None, cached: bool
) -> None:
    assert is_controller_cached(model(source, accelerator)) is cached


def test_layout_uses_the_cache_key_and_the_canonical_name() -> None:
    layout = cache_layout(model("/data/m.gguf", gguf_name="Tiny Llama 1B"), ModelPlanConfig(cache_path="/c"))
    key = cache_key("/data/m.gguf")
    assert (layout.cache_key, layout.model_dir, layout.preferred_basename) == (
        key,
        f"/c/{key}",
        "Tiny-Llama-1B.gguf",
    )
    assert (
        cache_layout(model("/data/m.gguf", name="my-model"), ModelPlanConfig()).preferred_basename
        == "my-model.gguf"
    )
